"""The embedded Sail engine keeps an idle session for as long as we say (its own default drops it after 15 min),
runs without transparent huge pages, and with our record batch size unless the operator set one."""

from __future__ import annotations

import ctypes
import multiprocessing
import re
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
from pyspark.errors.exceptions.connect import SparkConnectException

from jobs.lakehouse.engine import SAIL_BATCH_ROWS, SAIL_IDLE_SESSION_TIMEOUT_S, spark_session
from jobs.processes import PR_SET_THP_DISABLE

IDLE_S = 4.0  # the idle time is what these tests are about: a sleep here is the subject, not a synchronisation


def test_an_idle_session_outlives_a_shorter_pause_than_its_timeout() -> None:
    with spark_session(None, idle_timeout_s=60) as spark:
        assert spark.range(3).count() == 3
        time.sleep(IDLE_S)
        assert spark.range(3).count() == 3


def test_the_idle_timeout_reaches_sail() -> None:
    # Proves the setting is the one Sail obeys: a session idle past a 1 s timeout is gone.
    with spark_session(None, idle_timeout_s=1) as spark:
        assert spark.range(3).count() == 3
        time.sleep(IDLE_S)
        with pytest.raises(SparkConnectException, match="not running"):
            spark.range(3).count()


def test_the_default_keeps_sessions_through_a_nightly_run() -> None:
    assert SAIL_IDLE_SESSION_TIMEOUT_S >= 12 * 3600


def _huge_pages_enabled() -> int:
    status = Path("/proc/self/status").read_text(encoding="ascii")
    return int(re.search(r"^THP_enabled:\s*(\d+)", status, re.MULTILINE).group(1))  # type: ignore[union-attr]


def test_the_embedded_engine_runs_without_huge_pages_and_so_do_the_workers_it_starts() -> None:
    # The process flag, not a speed: the kernel zeroes a whole huge page per fault, which was the engine's cost.
    # An earlier session in this test process has set the flag already: clear it, so only this session can set it.
    assert ctypes.CDLL(None, use_errno=True).prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0) == 0
    assert _huge_pages_enabled() == 1
    with spark_session(None) as spark:
        assert spark.range(3).count() == 3
        assert _huge_pages_enabled() == 0
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
            assert pool.submit(_huge_pages_enabled).result(timeout=120) == 0


def _aggregate_batch_rows(tmp_path: Path) -> int:
    """The largest record batch an aggregate over 100,000 rows read from Parquet returns (an aggregate emits batches
    of the engine's batch size; a range or a file scan has sizes of its own)."""
    with spark_session(None) as spark:
        spark.range(100_000).repartition(1).write.parquet(str(tmp_path / "rows"))
        grouped = spark.read.parquet(str(tmp_path / "rows")).selectExpr("id % 70000 AS k").groupBy("k").count()
        return max(len(chunk) for chunk in grouped.toArrow().column("k").chunks)


def test_the_engine_works_in_batches_of_our_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SAIL_EXECUTION__BATCH_SIZE", raising=False)
    assert SAIL_BATCH_ROWS > 8192  # Sail's own default
    assert _aggregate_batch_rows(tmp_path) == SAIL_BATCH_ROWS


def test_an_operators_batch_size_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAIL_EXECUTION__BATCH_SIZE", "4096")
    assert _aggregate_batch_rows(tmp_path) == 4096
