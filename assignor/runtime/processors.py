"""Task processors: what an active task does with its input. The runtime's loop reads, writes and commits;
the processor, chosen by the application, only turns input records into store updates."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from assignor.runtime.protocol import Partition
from assignor.task import TaskId


@dataclass(frozen=True)
class InputRecord:
    """One record of a task's input partition."""

    partition: Partition
    offset: int
    key: str
    value: str


@dataclass(frozen=True)
class ChangelogWrite:
    """One store update caused by one input record: written to the task's changelog, applied once delivered."""

    key: str
    value: str
    source: InputRecord


class StoreReader(Protocol):
    """The task's store as a processor sees it: committed values only."""

    def get(self, key: str) -> str | None: ...


class TaskProcessor(Protocol):
    """An application's processing logic for one stateful subtopology."""

    def process(self, task: TaskId, records: Sequence[InputRecord], store: StoreReader) -> list[ChangelogWrite]:
        """The store updates a batch causes, in input order; a later write for a key sees the earlier ones."""
        ...

    def resume_offset(self, value: str) -> int | None:
        """The input offset a changelog value was written for, so a restored store resumes after it."""
        ...


class CountPerKey:
    """The demo application: counts input records per key, each new count a changelog write."""

    def process(self, task: TaskId, records: Sequence[InputRecord], store: StoreReader) -> list[ChangelogWrite]:
        counts: dict[str, int] = {}
        writes = []
        for record in records:
            if record.key not in counts:
                counts[record.key] = _count(store.get(record.key))
            counts[record.key] += 1
            value = json.dumps({"count": counts[record.key], "input_offset": record.offset})
            writes.append(ChangelogWrite(record.key, value, record))
        return writes

    def resume_offset(self, value: str) -> int | None:
        try:
            return int(json.loads(value)["input_offset"])
        except (ValueError, TypeError, KeyError):
            return None


def _count(stored: str | None) -> int:
    """The count a store holds for a key; a value this processor did not write counts from zero."""
    try:
        value = json.loads(stored) if stored else {}
        return int(value.get("count", 0)) if isinstance(value, dict) else 0
    except (ValueError, TypeError):
        return 0
