"""How long a sequence of rebalances takes: probing intervals, stretched while the slowest instance restores."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from assignor.assignment import ClientAssignment, GroupAssignment
from assignor.configs import AssignmentConfigs
from assignor.lags import LagIndex
from assignor.state import GroupState

DEFAULT_RESTORE_RATE = 10_000.0
"""Offsets/second one instance replays when nothing better is known: a conservative figure for RocksDB stores
restored from a changelog (operators set their own, or the pipeline passes what it observed)."""


def estimated_seconds(
    steps: Sequence[GroupAssignment],
    states: Sequence[tuple[GroupState, LagIndex]],
    configs: AssignmentConfigs,
    restore_rate: float,
    *,
    full_catch_up: bool = False,
) -> float:
    """Each step lasts at least one probing interval, longer while its slowest instance restores.

    ``states``: the input each step was computed from, with its lags. With ``full_catch_up`` each state is the one
    before it after every replica of its step caught up, so a client holding just what it held a step before owes
    nothing and is skipped (late in a long schedule, most clients).
    """
    if restore_rate <= 0:
        raise ValueError(f"restore_rate must be > 0 offsets/second/instance, got {restore_rate}")
    interval = configs.probing_rebalance_interval_ms / 1000
    seconds = 0.0
    before: Mapping[str, ClientAssignment] = {}
    for step, (state, lags) in zip(steps, states, strict=True):
        slowest = 0
        stateful = state.stateful_tasks
        mixed = bool(state.stateless_tasks)  # else every task held is stateful: no intersection per client and step
        for pid, ca in step.clients.items():
            held_then = before.get(pid)
            if held_then is not None and _same_replicas(ca, held_then):
                continue
            held = ca.active | ca.standby | ca.warmup
            owed = lags.owed_total(pid, held & stateful if mixed else held)
            slowest = max(slowest, owed)
        if full_catch_up:
            before = step.clients
        restore = slowest / restore_rate
        seconds += max(interval, restore) if step.probing_rebalance_needed else restore
    return seconds


def _same_replicas(ca: ClientAssignment, then: ClientAssignment) -> bool:
    """Whether a client holds the same tasks in the same roles (the same objects, late in a planner's schedule)."""
    return ca is then or (ca.active == then.active and ca.standby == then.standby and ca.warmup == then.warmup)
