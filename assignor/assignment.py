"""The output of every assignor: who runs which task in which role."""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from assignor.configs import AssignmentConfigs
from assignor.invariants import raise_if, validity_violations
from assignor.state import GroupState
from assignor.task import TaskId


class Role(enum.Enum):
    """What a client does with a task: process it, mirror it, or restore it ahead of a move."""

    ACTIVE = "ACTIVE"
    STANDBY = "STANDBY"
    WARMUP = "WARMUP"


@dataclass(frozen=True)
class ClientAssignment:
    """The tasks one client holds, by role."""

    active: frozenset[TaskId] = frozenset()
    standby: frozenset[TaskId] = frozenset()
    warmup: frozenset[TaskId] = frozenset()

    def __post_init__(self) -> None:
        for name in ("active", "standby", "warmup"):
            object.__setattr__(self, name, frozenset(getattr(self, name)))

    def tasks(self, role: Role) -> frozenset[TaskId]:
        """The tasks held in one role."""
        return {Role.ACTIVE: self.active, Role.STANDBY: self.standby, Role.WARMUP: self.warmup}[role]

    def roles(self) -> Iterator[tuple[TaskId, Role]]:
        """Every (task, role) held, sorted by role then task."""
        for role in Role:
            for task in sorted(self.tasks(role)):
                yield task, role


@dataclass(frozen=True)
class GroupAssignment:
    """One assignment of a whole group, and whether a probing rebalance must follow it."""

    clients: Mapping[str, ClientAssignment] = field(default_factory=lambda: MappingProxyType({}))
    probing_rebalance_needed: bool = False

    def __post_init__(self) -> None:
        ordered = {pid: self.clients[pid] for pid in sorted(self.clients)}
        object.__setattr__(self, "clients", MappingProxyType(ordered))

    def active_owners(self) -> dict[TaskId, str]:
        """Task -> process id of its active (the last one wins if an invalid assignment has two)."""
        return {task: pid for pid, ca in self.clients.items() for task in ca.active}

    def count(self, role: Role) -> int:
        """How many (client, task) placements of this role the assignment holds."""
        return sum(len(ca.tasks(role)) for ca in self.clients.values())

    def validate(self, group: GroupState, configs: AssignmentConfigs) -> None:
        """Raise AssignmentError naming the first broken invariant among V1..V4."""
        raise_if(validity_violations(self, group, configs))
