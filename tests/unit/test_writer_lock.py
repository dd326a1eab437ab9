"""One writer per lake: a second stage waits, then gives up naming the holder; a killed holder frees the lake."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from jobs.lakehouse.writer_lock import LOCK_FILE, LakeBusy, writer_lock
from jobs.pipeline import registry
from jobs.pipeline.stage import StageResult, StageUnavailable
from jobs.settings import Settings


def test_a_second_writer_waits_then_gives_up_naming_the_holder(tmp_path: Path) -> None:
    with (
        writer_lock(tmp_path, "plan", timeout_s=5),
        pytest.raises(LakeBusy, match=r"being written by plan \(pid \d+ on "),
        writer_lock(tmp_path, "observe", timeout_s=0.3, poll_s=0.05),
    ):
        pytest.fail("two writers held the lake at once")
    with writer_lock(tmp_path, "observe", timeout_s=0.3):  # released once the first is done
        pass


def test_a_killed_holder_leaves_the_lake_unlocked(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
                import sys, time
                from pathlib import Path
                from jobs.lakehouse.writer_lock import writer_lock
                with writer_lock(Path({str(tmp_path)!r}), "publish", timeout_s=5):
                    print("locked", flush=True)
                    sys.stdin.read()
            """),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"locked"
        with pytest.raises(LakeBusy, match="publish"), writer_lock(tmp_path, "plan", timeout_s=0.2, poll_s=0.05):
            pass
        holder.kill()
        holder.wait(timeout=10)
        with writer_lock(tmp_path, "plan", timeout_s=5):
            assert (tmp_path / LOCK_FILE).read_text().startswith('{"stage": "plan"')
    finally:
        if holder.poll() is None:
            holder.kill()


def test_a_stage_run_while_another_writes_the_lake_is_unavailable_so_retried(tmp_path: Path) -> None:
    lake: Any = SimpleNamespace(root=tmp_path, clear_staging=lambda: None)  # only the lock is exercised

    def run(_lake: object, request: registry.StageRequest) -> StageResult:
        return StageResult("observe", None)

    observe = dataclasses.replace(registry.stage("observe"), run=run)
    request = registry.StageRequest(Settings(lake_root=tmp_path, lake_lock_timeout_s=0.2))
    with writer_lock(tmp_path, "publish", timeout_s=5), pytest.raises(StageUnavailable, match="being written by"):
        observe.execute(lake, request)
    assert observe.execute(lake, request).stage == "observe"
    assert (tmp_path / LOCK_FILE).read_text() == ""  # no holder named once released
