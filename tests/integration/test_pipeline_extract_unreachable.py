"""extract with no broker at its bootstrap: bounded retries with exponential backoff, then a typed error whose one
line names the address. The CLI exits 1 with that line; under Airflow the task is left to retry, by the error's
type. Nothing is written to the lake."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.lakehouse.lake import Lake
from jobs.orchestration import tasks as orchestration
from jobs.orchestration.tasks import Runtime, TaskFailed, retryable, run_stage
from jobs.pipeline.broker_reads import ConnectRetry, await_broker
from jobs.pipeline.stage import BrokerUnreachable, StageUnavailable
from jobs.processes import free_port
from jobs.settings import Settings

CLI = Path(sys.executable).parent / "rebalance-planner"
# Fewer and shorter retries than the defaults, so the test takes seconds (once Settings has these RBP_ fields).
FAST_RETRIES = {"RBP_KAFKA_CONNECT_ATTEMPTS": "3", "RBP_KAFKA_RETRY_BACKOFF_S": "0.2", "RBP_KAFKA_TIMEOUT_S": "5"}
FAST = {"kafka_connect_attempts": 3, "kafka_retry_backoff_s": 0.2, "kafka_timeout_s": 5.0}


def closed_bootstrap() -> str:
    return f"127.0.0.1:{free_port()}"


def test_the_cli_exits_1_with_one_line_naming_the_bootstrap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bootstrap = closed_bootstrap()
    for name, value in FAST_RETRIES.items():
        monkeypatch.setenv(name, value)
    attempts = ConnectRetry.from_settings(Settings()).attempts  # what the CLI will read from the same variables
    env = {k: v for k, v in os.environ.items() if not k.startswith("RBP_") and k != "SPARK_REMOTE"}
    env |= FAST_RETRIES | {"RBP_LAKE_ROOT": str(tmp_path / "lake"), "RBP_KAFKA_BOOTSTRAP": bootstrap, "COLUMNS": "200"}
    # The timeout only stops a hang: retries are bounded by attempts x timeout plus the backoffs.
    done = subprocess.run(
        [str(CLI), "extract"], capture_output=True, text=True, timeout=240, env=env, check=False, cwd=tmp_path
    )
    assert done.returncode == 1, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    prefix = f"rebalance-planner extract: failed: Kafka broker at {bootstrap} unreachable after {attempts} attempt(s) "
    assert last.startswith(prefix)
    assert "Connection refused" in last
    assert last.count(bootstrap) >= 1 and "Traceback" not in done.stderr
    assert not (tmp_path / "lake" / "snapshots").exists()  # nothing written


def test_retries_back_off_exponentially_and_stop_after_the_configured_attempts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    bootstrap = closed_bootstrap()
    retry = ConnectRetry(attempts=4, backoff_s=0.1, backoff_max_s=0.3, timeout_s=5)
    assert [retry.delay(n) for n in (1, 2, 3, 4)] == [0.1, 0.2, 0.3, 0.3]
    caplog.set_level("WARNING", logger="jobs.pipeline.broker_reads")
    with pytest.raises(BrokerUnreachable) as raised:
        await_broker(Settings(), bootstrap, retry)
    err = raised.value
    assert err.bootstrap == bootstrap and err.attempts == 4
    assert err.waited_s >= 0.1 + 0.2 + 0.3  # every backoff was waited
    assert "\n" not in str(err) and f"Kafka broker at {bootstrap} unreachable after 4 attempt(s)" in str(err)
    retries = [r.getMessage() for r in caplog.records if "retrying in" in r.getMessage()]
    assert [m.split("retrying in ")[1] for m in retries] == ["0.1 s", "0.2 s", "0.3 s"]


def test_the_retry_settings_come_from_the_settings_object() -> None:
    settings = Settings(
        kafka_timeout_s=7, kafka_connect_attempts=2, kafka_retry_backoff_s=3, kafka_retry_backoff_max_s=9
    )
    assert ConnectRetry.from_settings(settings) == ConnectRetry(attempts=2, backoff_s=3, backoff_max_s=9, timeout_s=7)


def test_airflow_retries_the_extract_task_by_the_error_type(tmp_path: Path) -> None:
    settings = Settings(lake_root=tmp_path / "lake").model_copy(update=FAST)
    rt = Runtime(settings, closed_bootstrap(), None)
    with pytest.raises(BrokerUnreachable) as raised:  # propagates as itself: not TaskFailed, so Airflow retries
        orchestration.extract(rt, "20261121T020000Z-abcdef")
    assert retryable(raised.value) and isinstance(raised.value, StageUnavailable)
    assert str(pickle.loads(pickle.dumps(raised.value))) == str(raised.value)  # crosses process boundaries intact
    assert not (tmp_path / "lake" / "snapshots").exists()

    # By type, whatever the message says; a bug with the same words still fails at once.
    def unreachable(lake: Lake) -> None:
        raise BrokerUnreachable("kafka:9092", 1, 0.0, "anything")

    def lookalike(lake: Lake) -> None:
        raise KeyError("Kafka broker at kafka:9092 unreachable")

    with pytest.raises(BrokerUnreachable):
        run_stage("extract", rt, unreachable)
    with pytest.raises(TaskFailed):
        run_stage("extract", rt, lookalike)
