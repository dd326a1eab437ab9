"""What leaving a group to Kafka's own assignor would cost: its rounds replayed to convergence, in plan metrics."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from assignor.assignment import GroupAssignment
from assignor.configs import AssignmentConfigs
from assignor.cost import PlanCost
from assignor.estimate import DEFAULT_RESTORE_RATE, estimated_seconds
from assignor.high_availability import assign_high_availability
from assignor.lags import LagIndex
from assignor.simulation import Assignor, Scenario, simulate
from assignor.state import GroupState
from assignor.streams_broker import assign_streams_broker

BASELINE_ASSIGNORS: Mapping[str, Assignor] = MappingProxyType(
    {"kip441": assign_high_availability, "streams_broker": assign_streams_broker}
)
"""The assignors a plan is compared with, by the name the plan_baselines table records."""


@dataclass(frozen=True)
class BaselineCost:
    """One baseline assignor's cost on one group, from its first rebalance until it stops probing (its moves: active
    owner changes summed over every round)."""

    assignor: str
    cost: PlanCost
    converged: bool


def round_restore(step: GroupAssignment, state: GroupState, lags: LagIndex) -> int:
    """Offsets the replicas of one round replay before they are caught up, measured as plans measure theirs
    (LagIndex.owed): caught-up copies count nothing, so a baseline is not charged for lag a plan ignores."""
    return sum(
        lags.owed(pid, task)
        for pid, ca in step.clients.items()
        for task in (ca.active | ca.standby | ca.warmup) & state.stateful_tasks
    )


def round_limit(group: GroupState, configs: AssignmentConfigs) -> int:
    """Rounds allowed before a replay counts as not converged: well past the contract's convergence bound."""
    replicas = len(group.stateful_tasks) * (1 + configs.num_standby_replicas)
    return 2 * (math.ceil(replicas / configs.max_warmup_replicas) + 2) + 10


def baseline_cost(
    group: GroupState, configs: AssignmentConfigs, assignor: str, *, restore_rate: float | None = None
) -> BaselineCost:
    """Replay ``assignor`` (a BASELINE_ASSIGNORS name) with full catch-up between rebalances and total its cost."""
    if assignor not in BASELINE_ASSIGNORS:
        raise ValueError(f"unknown baseline assignor {assignor!r}; known: {', '.join(sorted(BASELINE_ASSIGNORS))}")
    result = simulate(
        Scenario(assignor, group, configs, max_rounds=round_limit(group, configs)), BASELINE_ASSIGNORS[assignor]
    )
    steps = [r.assignment for r in result.rounds]
    states = [(r.group, LagIndex.of(r.group, configs)) for r in result.rounds]
    cost = PlanCost(
        moves=result.total_moves,
        warmups=result.total_warmups,
        rounds=len(result.rounds),
        restore_offsets=sum(round_restore(step, *state) for step, state in zip(steps, states, strict=True)),
        estimated_seconds=estimated_seconds(steps, states, configs, restore_rate or DEFAULT_RESTORE_RATE),
    )
    return BaselineCost(assignor=assignor, cost=cost, converged=result.converged)
