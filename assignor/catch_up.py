"""How replicas catch up between two rebalances: fully, or at a restore rate; what state directories report."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from assignor.assignment import ClientAssignment, GroupAssignment, Role
from assignor.errors import InvalidGroupState
from assignor.state import ClientState, GroupState, evolved_client, evolved_group
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


def _checkpointed(client: ClientState, ends: Mapping[TaskId, int]) -> dict[TaskId, int]:
    """The client's offset sums once it stops running its actives (checkpoint() of each), in one pass."""
    return {t: (ends.get(t, 0) if s == LATEST_OFFSET else s) for t, s in client.task_offset_sums.items()}


def _held_standby(process_id: str, ca: ClientAssignment, every_task: frozenset[TaskId]) -> frozenset[TaskId]:
    """The standbys a client holds after ``ca`` (its warmups included), once its tasks are known to the group.

    The one check a derived client needs (every other value holds by construction): planners replay this per step,
    so the rest of ClientState's validation is skipped (evolved_client)."""
    if not (ca.active <= every_task and ca.standby <= every_task and ca.warmup <= every_task):  # no set built
        unknown = (ca.active | ca.standby | ca.warmup) - every_task
        shown = ", ".join(str(t) for t in sorted(unknown)[:5])
        raise InvalidGroupState(f"client {process_id!r}: assignment holds tasks not in the group: {shown}")
    return ca.standby | ca.warmup if ca.warmup else ca.standby


def catch_up_fully(group: GroupState, assignment: GroupAssignment) -> GroupState:
    """The next rebalance's input if every replica held in ``assignment`` caught up (actives report -2)."""
    ends = group.changelog_end_offset_sums
    stateful, every_task = group.stateful_tasks, group.all_tasks
    clients = []
    for client in group.clients:
        ca = assignment.clients[client.process_id]
        previous_standby = _held_standby(client.process_id, ca, every_task)
        sums = _checkpointed(client, ends)
        sums.update({task: ends.get(task, 0) for task in previous_standby & stateful})
        sums.update(dict.fromkeys(ca.active & stateful, LATEST_OFFSET))
        clients.append(evolved_client(client, ca.active, previous_standby, sums))
    return evolved_group(group, clients)


def roles_after(group: GroupState, assignment: GroupAssignment) -> GroupState:
    """catch_up_fully's group without its offset sums: the roles each client had in ``assignment`` (its warmups as
    standbys), every offset sum left as ``group`` reported it.

    For schedules that derive the lags of the next step themselves (LagIndex.after_catch_up) and so read only the
    roles: rewriting every client's offset sums at every step was a third of a long schedule's time."""
    every_task = group.all_tasks
    clients = []
    for client in group.clients:
        ca = assignment.clients[client.process_id]
        previous_standby = _held_standby(client.process_id, ca, every_task)
        if client.previous_active == ca.active and client.previous_standby == previous_standby:
            clients.append(client)  # nothing changed: late in a schedule most clients (state.py is interpreted)
        else:
            clients.append(evolved_client(client, ca.active, previous_standby, client.task_offset_sums))
    return evolved_group(group, clients)
