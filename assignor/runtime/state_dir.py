"""An instance's state directory: its persistent process id and one sub-directory per task it held."""

from __future__ import annotations

import uuid
from pathlib import Path

from assignor.runtime.protocol import Partition
from assignor.runtime.store import read_checkpoints
from assignor.task import TaskId

PROCESS_ID_FILE = "process.id"


class StateDirectory:
    """Where an instance keeps everything that must survive a restart (like Kafka Streams' state.dir)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        (root / "tasks").mkdir(exist_ok=True)

    @property
    def process_id(self) -> str:
        """A UUID made on first start and kept, so a restarted instance is recognised by the leader."""
        path = self.root / PROCESS_ID_FILE
        if not path.exists():
            path.write_text(f"{uuid.uuid4()}\n", encoding="utf-8")
        return path.read_text(encoding="utf-8").strip()

    def task_dir(self, task: TaskId) -> Path:
        return self.root / "tasks" / str(task)

    def local_tasks(self) -> list[TaskId]:
        """Tasks with state on disk, whether or not the instance holds them now."""
        found = []
        for child in sorted((self.root / "tasks").iterdir()):
            try:
                found.append(TaskId.parse(child.name))
            except ValueError:
                continue
        return found

    def checkpoints(self, task: TaskId) -> dict[Partition, int]:
        return read_checkpoints(self.task_dir(task))
