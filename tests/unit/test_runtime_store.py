"""Task stores and state directories on a real file system (SQLite)."""

from __future__ import annotations

import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from assignor import TaskId
from assignor.runtime.state_dir import StateDirectory, StateDirectoryError, StateDirectoryLocked
from assignor.runtime.store import TaskStore, read_checkpoints

CHANGELOG = ("orders-counts-changelog", 3)
INPUT = ("orders-input", 3)


def test_the_process_id_is_made_once_and_kept_across_restarts(tmp_path: Path) -> None:
    first = StateDirectory(tmp_path / "state").process_id
    assert uuid.UUID(first)
    assert StateDirectory(tmp_path / "state").process_id == first
    assert StateDirectory(tmp_path / "other").process_id != first


def test_applied_records_and_their_checkpoint_survive_a_reopen(tmp_path: Path) -> None:
    store = TaskStore(tmp_path / "0_3")
    applied = store.apply([(CHANGELOG, 0, "a", '{"count": 1}'), (CHANGELOG, 1, "a", '{"count": 2}')], {INPUT: 8})
    assert applied == 2
    assert store.get("a") == '{"count": 2}' and store.size() == 1
    assert store.offset_sum([CHANGELOG]) == 2  # next offset to read
    store.close()
    reopened = TaskStore(tmp_path / "0_3")
    assert reopened.positions == {CHANGELOG: 2}
    assert reopened.input_position(INPUT) == 8
    assert read_checkpoints(tmp_path / "0_3") == {CHANGELOG: 2}
    reopened.close()


def test_a_checkpoint_never_moves_back(tmp_path: Path) -> None:
    store = TaskStore(tmp_path / "0_3")
    store.apply([(CHANGELOG, 9, "a", "{}")])
    store.apply([(CHANGELOG, 4, "b", "{}")])  # a late delivery report for an older write
    assert store.positions[CHANGELOG] == 10
    assert read_checkpoints(tmp_path / "0_3") == {CHANGELOG: 10}
    store.close()


def test_local_tasks_are_the_task_directories_only(tmp_path: Path) -> None:
    state = StateDirectory(tmp_path)
    TaskStore(state.task_dir(TaskId(0, 1))).close()
    TaskStore(state.task_dir(TaskId(1, 0))).close()
    (tmp_path / "tasks" / "not-a-task").mkdir()
    assert state.local_tasks() == [TaskId(0, 1), TaskId(1, 0)]
    assert state.checkpoints(TaskId(0, 1)) == {}
    assert read_checkpoints(tmp_path / "missing") == {}


def test_an_empty_or_damaged_process_id_is_an_error_naming_the_file_never_a_new_identity(tmp_path: Path) -> None:
    for damaged in ("", "\n", "3f2a9c1e-half-writ", "not a uuid at all"):
        (tmp_path / "process.id").write_text(damaged, encoding="utf-8")
        with pytest.raises(StateDirectoryError, match=r"process\.id does not hold a process id"):
            StateDirectory(tmp_path).process_id  # noqa: B018  # reading it is the behaviour under test
        assert (tmp_path / "process.id").read_text(encoding="utf-8") == damaged  # left for the operator


def test_the_process_id_file_is_written_whole_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    process_id = StateDirectory(tmp_path).process_id
    assert (tmp_path / "process.id").read_text(encoding="utf-8") == f"{process_id}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["process.id", "tasks"]


def test_racing_first_starts_agree_on_one_process_id(tmp_path: Path) -> None:
    """The fleet reads an instance's id while the instance itself may be making it: the first id made wins."""
    with ThreadPoolExecutor(8) as pool:
        ids = set(pool.map(lambda _: StateDirectory(tmp_path).process_id, range(32)))
    assert len(ids) == 1


def test_a_second_lock_on_a_state_directory_fails_at_once_and_names_it(tmp_path: Path) -> None:
    first = StateDirectory(tmp_path)
    first.lock()
    with pytest.raises(StateDirectoryLocked, match=f"state directory {tmp_path} is in use by process {os.getpid()}"):
        StateDirectory(tmp_path).lock()
    first.unlock()
    second = StateDirectory(tmp_path)
    second.lock()  # released: the next instance may take it
    second.unlock()
