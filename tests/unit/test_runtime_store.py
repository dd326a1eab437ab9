"""Task stores and state directories on a real file system (SQLite)."""

from __future__ import annotations

import uuid
from pathlib import Path

from assignor import TaskId
from assignor.runtime.state_dir import StateDirectory
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
