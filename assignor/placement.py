"""A working copy of an assignment, private to one assignor call and frozen into a GroupAssignment at the end."""

from __future__ import annotations

from collections.abc import Iterable

from assignor.assignment import ClientAssignment, GroupAssignment
from assignor.state import GroupState
from assignor.task import TaskId


class Placement:
    """Mutable per-client task sets with load bookkeeping; never escapes the function that built it."""

    def __init__(self, group: GroupState) -> None:
        self.process_ids: tuple[str, ...] = tuple(sorted(c.process_id for c in group.clients))
        self.capacity: dict[str, int] = {c.process_id: c.capacity for c in group.clients}
        self.active: dict[str, set[TaskId]] = {p: set() for p in self.process_ids}
        self.standby: dict[str, set[TaskId]] = {p: set() for p in self.process_ids}
        self.warmup: dict[str, set[TaskId]] = {p: set() for p in self.process_ids}
        self.owner: dict[TaskId, str] = {}
        self._clients = group.clients
        self._tags: dict[str, dict[str, str]] | None = None  # built on first use (standby placement only)

    @property
    def tags(self) -> dict[str, dict[str, str]]:
        """Each client's rack tags, copied on first use (only standby placement reads them)."""
        # Cached by hand: compiled by mypyc, a class has no __dict__ for functools.cached_property to fill, so
        # it would copy every client's tags on every read (the rack-tag property tests ran 100x slower).
        if self._tags is None:
            self._tags = {c.process_id: dict(c.client_tags) for c in self._clients}
        return self._tags

    def standby_of(self, task: TaskId, pids: Iterable[str]) -> None:
        """Make each of ``pids`` a standby of the task."""
        for pid in pids:
            self.standby[pid].add(task)

    def holds(self, pid: str, task: TaskId) -> bool:
        """Whether the client has the task in any role."""
        return task in self.active[pid] or task in self.standby[pid] or task in self.warmup[pid]

    def assigned_load(self, pid: str) -> float:
        """Every replica the client holds, per unit of capacity (Kafka's assignedTaskLoad)."""
        held = len(self.active[pid]) + len(self.standby[pid]) + len(self.warmup[pid])
        return held / self.capacity[pid]

    def active_load(self, pid: str) -> float:
        """Active tasks per unit of capacity."""
        return len(self.active[pid]) / self.capacity[pid]

    def assign_active(self, pid: str, task: TaskId) -> None:
        self.active[pid].add(task)
        self.owner[task] = pid

    def unassign_active(self, pid: str, task: TaskId) -> None:
        self.active[pid].discard(task)
        if self.owner.get(task) == pid:
            del self.owner[task]

    def freeze(self, probing_rebalance_needed: bool) -> GroupAssignment:
        """The immutable assignment this placement describes."""
        return GroupAssignment(
            clients={
                p: ClientAssignment(
                    active=frozenset(self.active[p]),
                    standby=frozenset(self.standby[p]),
                    warmup=frozenset(self.warmup[p]),
                )
                for p in self.process_ids
            },
            probing_rebalance_needed=probing_rebalance_needed,
        )
