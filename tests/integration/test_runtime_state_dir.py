"""The state directory lock between two real processes: one holder at a time, released when the holder dies."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from assignor.runtime.state_dir import StateDirectory, StateDirectoryError, StateDirectoryLocked
from tests.support.signing import VERIFY_KEYS

HOLD = """
import sys
from pathlib import Path
from assignor.runtime.state_dir import StateDirectory
held = StateDirectory(Path(sys.argv[1]))
held.lock()
print("locked", flush=True)
sys.stdin.read()  # hold until the test closes stdin or kills this process
"""


def holder(state: Path) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(state)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "locked"
    return child


def test_a_second_instance_on_a_held_state_directory_fails_naming_it_and_the_holder(tmp_path: Path) -> None:
    child = holder(tmp_path / "state")
    try:
        with pytest.raises(StateDirectoryLocked) as refused:
            StateDirectory(tmp_path / "state").lock()
        assert refused.value.holder_pid == child.pid
        assert f"state directory {tmp_path / 'state'} is in use by process {child.pid}" in str(refused.value)
    finally:
        child.kill()
        child.wait()


def test_the_lock_is_released_when_its_holder_is_killed(tmp_path: Path) -> None:
    child = holder(tmp_path / "state")
    child.kill()  # no chance to clean up: the kernel drops the lock with the process
    child.wait()
    state = StateDirectory(tmp_path / "state")
    state.lock()
    state.unlock()


def test_the_instance_command_on_a_held_state_directory_exits_2_naming_it_and_the_holder(tmp_path: Path) -> None:
    child = holder(tmp_path / "state")
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RBP_")}
        env["RBP_PLAN_VERIFY_KEYS"] = VERIFY_KEYS.render()
        args = ["instance", "--group", "g", "--bootstrap", "127.0.0.1:1", "--state-dir", str(tmp_path / "state")]
        second = subprocess.run(
            [sys.executable, "-m", "jobs.cli.runtime", *args],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            check=False,
        )
        assert second.returncode == 2, second.stderr
        assert f"state directory {tmp_path / 'state'} is in use by process {child.pid}" in second.stderr
        assert not (tmp_path / "state" / "events.jsonl").exists()  # it wrote nothing into the held directory
    finally:
        child.kill()
        child.wait()


def test_the_plan_sequence_floor_survives_a_restart_and_only_rises(tmp_path: Path) -> None:
    first = StateDirectory(tmp_path / "state")
    assert first.plan_sequence("orders") is None
    first.remember_plan_sequence("orders", 20)
    first.remember_plan_sequence("orders", 10)  # lower: the floor stays
    first.remember_plan_sequence("payments", 7)
    again = StateDirectory(tmp_path / "state")  # a restarted instance
    assert (again.plan_sequence("orders"), again.plan_sequence("payments")) == (20, 7)
    with pytest.raises(ValueError, match=r"outside 1\.\.9007199254740991"):
        again.remember_plan_sequence("orders", 2**53)


@pytest.mark.parametrize(
    "text", ["not json", '{"orders": "20"}', '{"orders": 0}', '{"orders": 9007199254740992}', "[]"]
)
def test_a_damaged_plan_sequence_file_is_an_error_naming_it(tmp_path: Path, text: str) -> None:
    state = StateDirectory(tmp_path / "state")
    (tmp_path / "state" / "plan-sequence.json").write_text(text, encoding="utf-8")
    with pytest.raises(StateDirectoryError, match=r"plan-sequence\.json"):
        state.plan_sequence("orders")
