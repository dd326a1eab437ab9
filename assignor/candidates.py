"""The least-loaded client that satisfies a constraint: one small structure for every such choice.

Kafka Streams' ``ConstrainedPrioritySet`` idea: clients wait in a heap ordered by (priority, client); ``poll``
takes out the first one a constraint accepts and leaves the others waiting. A caller whose choice changes the
client's load ``offer``s it back, so the heap always holds one current entry per waiting client.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from typing import Any

from assignor.task import TaskId

Priority = Callable[[str], Any]  # a comparable value, lower first; ties go to the smaller process id
Constraint = Callable[[str, TaskId], bool]  # whether the client may take the task


def _anyone(pid: str, task: TaskId) -> bool:
    return True


class Candidates:
    """Clients waiting to be chosen, least ``priority`` first, ties by process id."""

    __slots__ = ("_constraint", "_heap", "_priority")

    def __init__(self, priority: Priority, clients: Iterable[str] = (), constraint: Constraint = _anyone) -> None:
        self._priority = priority
        self._constraint = constraint
        self._heap: list[tuple[Any, str]] = [(priority(pid), pid) for pid in clients]
        heapq.heapify(self._heap)

    def offer(self, pid: str) -> None:
        """Let the client wait again, at its current priority (after its load changed)."""
        heapq.heappush(self._heap, (self._priority(pid), pid))

    def poll(self, task: TaskId) -> str | None:
        """Take out the first waiting client the constraint lets take ``task``; None if there is none."""
        heap, allowed = self._heap, self._constraint
        if allowed is _anyone:
            return heapq.heappop(heap)[1] if heap else None
        skipped: list[tuple[Any, str]] = []
        chosen: str | None = None
        while heap:
            entry = heapq.heappop(heap)
            if allowed(entry[1], task):
                chosen = entry[1]
                break
            skipped.append(entry)
        for entry in skipped:
            heapq.heappush(heap, entry)
        return chosen


def least_loaded(priority: Priority, clients: Iterable[str]) -> str | None:
    """The best of ``clients`` for a single choice, as a fresh Candidates would poll it (without the heap)."""
    best: tuple[Any, str] | None = None
    for pid in clients:
        entry = (priority(pid), pid)
        if best is None or entry < best:
            best = entry
    return None if best is None else best[1]
