"""Deferred resolution (design II of the incremental cooperative designs; Kafka Connect's
``scheduled.rebalance.max.delay.ms``): a member that leaves keeps its place for a while.

While it is away, its active tasks fail over at once to a caught-up copy, the rest of the group keeps what it
had, and the leader rebalances again at the deadline. If it returns in time, the ordinary decision runs with it
back (the KIP-441 placement depends on the members only, so it gets its tasks back, caught up). A task with no
caught-up copy elsewhere is moved to the most caught-up member, or, with ``hold_without_caught_up_copy``, held
unprocessed for the returning member so that it has nothing to restore.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from assignor.assignment import ClientAssignment, GroupAssignment
from assignor.configs import AssignmentConfigs
from assignor.lags import LagIndex
from assignor.state import GroupState
from assignor.task import TaskId


@dataclass(frozen=True)
class DeferralSettings:
    """How long a departed member's place is kept (0: not at all, as Kafka Streams), and what its tasks with no
    caught-up copy elsewhere do meanwhile."""

    scheduled_rebalance_max_delay_ms: int = 0
    hold_without_caught_up_copy: bool = False

    def __post_init__(self) -> None:
        if self.scheduled_rebalance_max_delay_ms < 0:
            raise ValueError(
                f"scheduled_rebalance_max_delay_ms must be >= 0, got {self.scheduled_rebalance_max_delay_ms}"
            )


@dataclass(frozen=True)
class Departure:
    """A member that left: when, and the tasks it was running."""

    process_id: str
    departed_at_ms: int
    active: frozenset[TaskId]


@dataclass(frozen=True)
class Deferral:
    """The leader's answer while members are away: the assignment, the departures pending, the next deadline."""

    assignment: GroupAssignment
    departures: Mapping[str, Departure]
    rebalance_in_ms: int
    held: frozenset[TaskId]  # tasks nobody runs until their member returns or the deadline passes


def pending_departures(
    previous: GroupAssignment | None,
    group: GroupState,
    departures: Mapping[str, Departure],
    now_ms: int,
    settings: DeferralSettings,
) -> dict[str, Departure]:
    """Members still away within the delay: the ones known, plus those in the previous assignment missing now."""
    if settings.scheduled_rebalance_max_delay_ms == 0:
        return {}
    live = {c.process_id for c in group.clients}
    pending = dict(departures)
    for pid, ca in (previous.clients if previous else {}).items():
        if pid not in live and pid not in pending:
            pending[pid] = Departure(pid, now_ms, frozenset(ca.active))
    return {
        pid: d
        for pid, d in pending.items()
        if pid not in live and now_ms < d.departed_at_ms + settings.scheduled_rebalance_max_delay_ms
    }


def defer(
    previous: GroupAssignment,
    group: GroupState,
    configs: AssignmentConfigs,
    departures: Mapping[str, Departure],
    now_ms: int,
    settings: DeferralSettings,
) -> Deferral:
    """Keep every live member's previous tasks and place only the tasks nobody runs now (``departures`` pending)."""
    lags = LagIndex.of(group, configs)
    tasks = group.stateful_tasks | group.stateless_tasks
    live = sorted(c.process_id for c in group.clients)
    capacity = {c.process_id: c.capacity for c in group.clients}
    roles: dict[str, dict[str, set[TaskId]]] = {}
    for pid in live:
        kept = previous.clients.get(pid, ClientAssignment())
        roles[pid] = {
            "active": set(kept.active & tasks),
            "standby": set(kept.standby & group.stateful_tasks),
            "warmup": set(kept.warmup & group.stateful_tasks),
        }
    running = {t for r in roles.values() for t in r["active"]}
    away = {t for d in departures.values() for t in d.active}
    held: set[TaskId] = set()

    def load(pid: str) -> tuple[float, str]:
        return len(roles[pid]["active"]) / capacity[pid], pid

    for task in sorted(tasks - running):
        if task in group.stateful_tasks:
            caught_up = [pid for pid in live if lags.caught_up(pid, task)]
            if not caught_up and task in away and settings.hold_without_caught_up_copy:
                held.add(task)
                continue
            owner = min(caught_up, key=load) if caught_up else min(live, key=lambda p: (lags.owed(p, task), *load(p)))
        else:
            owner = min(live, key=load)
        roles[owner]["active"].add(task)
        roles[owner]["standby"].discard(task)
        roles[owner]["warmup"].discard(task)
    deadline = min(d.departed_at_ms for d in departures.values()) + settings.scheduled_rebalance_max_delay_ms
    assignment = GroupAssignment(
        {
            pid: ClientAssignment(
                active=frozenset(r["active"]), standby=frozenset(r["standby"]), warmup=frozenset(r["warmup"])
            )
            for pid, r in roles.items()
        },
        probing_rebalance_needed=True,
    )
    return Deferral(assignment, dict(departures), max(1, deadline - now_ms), frozenset(held))
