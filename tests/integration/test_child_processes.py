"""Children we start reach exec even while a Spark Connect client (gRPC) runs in this process, and die with us."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from jobs.polling import wait_until
from jobs.processes import spawn

ROOT = Path(__file__).resolve().parents[2]


def test_children_start_cleanly_beside_a_live_grpc_client(spark: SparkSession) -> None:
    # A fork() would run gRPC's fork handlers, which abort a child in a few hundred before exec (seen in CI as
    # "Java gateway process exited"); spawn must not fork that way.
    assert spark.range(10).count() == 10
    failures = []
    for _ in range(3000):
        child = spawn(["true"])
        if child.wait(timeout=30) != 0:
            failures.append(child.returncode)
    assert failures == [], f"{len(failures)} of 3000 children died before exec: {failures[:5]}"


@pytest.mark.parametrize("attempt", range(5))
def test_a_spawned_child_dies_with_its_parent(tmp_path: Path, attempt: int) -> None:
    # The parent dies the instant spawn returns: spawn must not return before the death signal is armed (CI once
    # lost that race when setpriv had not yet set it).
    pid_file = tmp_path / "child.pid"
    parent = textwrap.dedent(f"""
        import os, signal
        from jobs.processes import spawn
        child = spawn(["sleep", "300"])
        open({str(pid_file)!r}, "w").write(str(child.pid))
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    subprocess.run([sys.executable, "-c", parent], cwd=ROOT, check=False, timeout=60)
    pid = int(pid_file.read_text())

    def gone() -> bool:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split()[2]
        except FileNotFoundError:
            return True
        return state == "Z"

    try:
        wait_until(gone, 30, f"child {pid} to die with its SIGKILLed parent")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
