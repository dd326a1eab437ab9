"""How replicas catch up between two rebalances: fully, or at a restore rate; what state directories report."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from assignor.assignment import GroupAssignment, Role
from assignor.state import ClientState, GroupState
from assignor.task import LATEST_OFFSET, UNKNOWN_OFFSET_SUM, TaskId


@dataclass(frozen=True)
class FullCatchUp:
    """Between two rebalances every replica a client holds catches up completely."""


@dataclass(frozen=True)
class RestoreRate:
    """Between two rebalances each instance restores at most this many offsets per second."""

    offsets_per_second: float

    def __post_init__(self) -> None:
        if self.offsets_per_second <= 0:
            raise ValueError(f"RestoreRate.offsets_per_second must be > 0, got {self.offsets_per_second}")


CatchUpModel = FullCatchUp | RestoreRate


def checkpoint(offset_sum: int, end: int) -> int:
    """What a replica's state directory reports once it no longer runs: a running active is at the log end."""
    return end if offset_sum == LATEST_OFFSET else offset_sum


def restore_replicas(
    client: ClientState,
    held: Sequence[tuple[TaskId, Role]],
    stopped_at: Mapping[TaskId, int],
    ends: Mapping[TaskId, int],
    stateful: frozenset[TaskId],
    budget: float | None,
) -> tuple[dict[TaskId, int], int]:
    """New offset sums of one client after a probing interval, and the offsets it replayed."""
    sums = {t: checkpoint(s, stopped_at.get(t, 0)) for t, s in client.task_offset_sums.items()}
    restored = 0
    remaining = budget
    # Restoring actives first: they block processing; then warmups, then standbys.
    for task, role in held:
        if task not in stateful:
            continue
        end = ends.get(task, 0)
        position = sums.get(task, 0)
        if position == UNKNOWN_OFFSET_SUM or position > end or position < 0:
            position = 0
        step = end - position if remaining is None else min(end - position, int(remaining))
        position += step
        restored += step
        if remaining is not None:
            remaining -= step
        sums[task] = LATEST_OFFSET if role is Role.ACTIVE and position >= end else position
    return sums, restored


def catch_up_fully(group: GroupState, assignment: GroupAssignment) -> GroupState:
    """The next rebalance's input if every replica held in ``assignment`` caught up (actives report -2)."""
    ends = group.changelog_end_offset_sums
    clients = []
    for client in group.clients:
        ca = assignment.clients[client.process_id]
        sums = {t: checkpoint(s, ends.get(t, 0)) for t, s in client.task_offset_sums.items()}
        sums.update({t: ends.get(t, 0) for t in (ca.standby | ca.warmup) & group.stateful_tasks})
        sums.update(dict.fromkeys(ca.active & group.stateful_tasks, LATEST_OFFSET))
        clients.append(
            replace(client, previous_active=ca.active, previous_standby=ca.standby | ca.warmup, task_offset_sums=sums)
        )
    return replace(group, clients=tuple(clients))
