"""The immutable input of every assignor: one group's clients, tasks and changelog positions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from assignor.errors import InvalidGroupState
from assignor.task import UNKNOWN_OFFSET_SUM, TaskId


def _task_set(owner: str, name: str, value: object) -> frozenset[TaskId]:
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise InvalidGroupState(f"{owner}.{name} must be a set of TaskId, got {value!r}")
    tasks = frozenset(value)
    bad = sorted(repr(t) for t in tasks if not isinstance(t, TaskId))
    if bad:
        raise InvalidGroupState(f"{owner}.{name} must hold TaskId values, got {', '.join(bad[:3])}")
    return tasks


def _int_map(owner: str, name: str, value: object, minimum: int) -> Mapping[TaskId, int]:
    if not isinstance(value, Mapping):
        raise InvalidGroupState(f"{owner}.{name} must map TaskId to int, got {value!r}")
    for task, number in value.items():
        if not isinstance(task, TaskId):
            raise InvalidGroupState(f"{owner}.{name} keys must be TaskId, got {task!r}")
        if isinstance(number, bool) or not isinstance(number, int) or number < minimum:
            raise InvalidGroupState(f"{owner}.{name}[{task}] must be an integer >= {minimum}, got {number!r}")
    return MappingProxyType(dict(value))


@dataclass(frozen=True)
class ClientState:
    """One application instance as it reported itself at the start of a rebalance."""

    process_id: str
    capacity: int = 1
    previous_active: frozenset[TaskId] = frozenset()
    previous_standby: frozenset[TaskId] = frozenset()
    task_offset_sums: Mapping[TaskId, int] = field(default_factory=dict)
    client_tags: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.process_id, str) or not self.process_id:
            raise InvalidGroupState(f"ClientState.process_id must be a non-empty string, got {self.process_id!r}")
        owner = f"client {self.process_id!r}"
        if isinstance(self.capacity, bool) or not isinstance(self.capacity, int) or self.capacity < 1:
            raise InvalidGroupState(f"{owner}: capacity must be an integer >= 1, got {self.capacity!r}")
        set_ = object.__setattr__
        set_(self, "previous_active", _task_set(owner, "previous_active", self.previous_active))
        set_(self, "previous_standby", _task_set(owner, "previous_standby", self.previous_standby))
        sums = _int_map(owner, "task_offset_sums", self.task_offset_sums, UNKNOWN_OFFSET_SUM)
        set_(self, "task_offset_sums", sums)
        tags = self.client_tags
        if not isinstance(tags, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in tags.items()):
            raise InvalidGroupState(f"{owner}: client_tags must map str to str, got {tags!r}")
        set_(self, "client_tags", MappingProxyType(dict(tags)))


@dataclass(frozen=True)
class GroupState:
    """One consumer group at one moment: who is there, what they hold and how far the changelogs are."""

    clients: Sequence[ClientState]
    stateful_tasks: frozenset[TaskId] = frozenset()
    stateless_tasks: frozenset[TaskId] = frozenset()
    changelog_end_offset_sums: Mapping[TaskId, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if isinstance(self.clients, (str, bytes, Mapping)) or not isinstance(self.clients, Sequence):
            raise InvalidGroupState(f"GroupState.clients must be a sequence of ClientState, got {self.clients!r}")
        clients = tuple(self.clients)
        if not clients:
            raise InvalidGroupState("GroupState.clients must hold at least one client, got none")
        for client in clients:
            if not isinstance(client, ClientState):
                raise InvalidGroupState(f"GroupState.clients must hold ClientState values, got {client!r}")
        seen: set[str] = set()
        for client in clients:
            if client.process_id in seen:
                raise InvalidGroupState(f"GroupState.clients: duplicate process_id {client.process_id!r}")
            seen.add(client.process_id)
        stateful = _task_set("GroupState", "stateful_tasks", self.stateful_tasks)
        stateless = _task_set("GroupState", "stateless_tasks", self.stateless_tasks)
        overlap = stateful & stateless
        if overlap:
            shown = ", ".join(str(t) for t in sorted(overlap)[:5])
            raise InvalidGroupState(f"GroupState: tasks both stateful and stateless: {shown}")
        ends = _int_map("GroupState", "changelog_end_offset_sums", self.changelog_end_offset_sums, 0)
        every_task = stateful | stateless
        for client in clients:
            for name in ("previous_active", "previous_standby"):
                unknown = getattr(client, name) - every_task
                if unknown:
                    shown = ", ".join(str(t) for t in sorted(unknown)[:5])
                    raise InvalidGroupState(
                        f"client {client.process_id!r}: {name} holds tasks not in the group: {shown}"
                    )
        set_ = object.__setattr__
        set_(self, "clients", clients)
        set_(self, "stateful_tasks", stateful)
        set_(self, "stateless_tasks", stateless)
        set_(self, "changelog_end_offset_sums", ends)

    @property
    def all_tasks(self) -> frozenset[TaskId]:
        """Stateful and stateless tasks together."""
        return self.stateful_tasks | self.stateless_tasks

    def client(self, process_id: str) -> ClientState:
        """The client with this process id; KeyError-free lookup with a clear message."""
        for client in self.clients:
            if client.process_id == process_id:
                return client
        raise InvalidGroupState(f"GroupState: no client with process_id {process_id!r}")


def evolved_client(
    client: ClientState,
    previous_active: frozenset[TaskId],
    previous_standby: frozenset[TaskId],
    task_offset_sums: Mapping[TaskId, int],
) -> ClientState:
    """``client`` at a later rebalance (it keeps ``task_offset_sums``) without __post_init__'s checks: only for
    values that hold by construction (sums at or above -3, tasks of the group), as catch_up_fully derives them.
    A read-only mapping already (the client's own sums) is shared, not copied."""
    evolved = object.__new__(ClientState)
    set_ = object.__setattr__
    set_(evolved, "process_id", client.process_id)
    set_(evolved, "capacity", client.capacity)
    set_(evolved, "previous_active", previous_active)
    set_(evolved, "previous_standby", previous_standby)
    shared = isinstance(task_offset_sums, MappingProxyType)
    set_(evolved, "task_offset_sums", task_offset_sums if shared else MappingProxyType(task_offset_sums))
    set_(evolved, "client_tags", client.client_tags)
    return evolved


def evolved_group(group: GroupState, clients: Sequence[ClientState]) -> GroupState:
    """``group`` with ``clients`` (the same process ids, each from evolved_client) and nothing re-checked."""
    evolved = object.__new__(GroupState)
    set_ = object.__setattr__
    set_(evolved, "clients", tuple(clients))
    set_(evolved, "stateful_tasks", group.stateful_tasks)
    set_(evolved, "stateless_tasks", group.stateless_tasks)
    set_(evolved, "changelog_end_offset_sums", group.changelog_end_offset_sums)
    return evolved
