"""The planner's shortcuts on long schedules and large standby models decide exactly what the plain computations do:
Honoring.next_step against step() at every step of a schedule, the estimate skipping clients that hold what they
held, and the pooled standby model's start on blank clients against the full model's optimum."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pytest
from hypothesis import given, settings

from assignor.assignment import GroupAssignment
from assignor.catch_up import roles_after
from assignor.end_state import active_costs, plan_target
from assignor.estimate import estimated_seconds
from assignor.honor import Honoring, move_order
from assignor.lags import LagIndex
from assignor.state import GroupState
from assignor.target import ActiveCosts, _BlankStart, solve_active_target, solve_standby_target
from assignor.task import TaskId
from tests.support.plan_corpus import planner_bench
from tests.support.strategies import Case, cases

pytestmark = pytest.mark.unit


def _walk_both_ways(case: Case, keep: float) -> None:
    """Every step of the schedule to the plan's target, by next_step and by step(), with the warm-up order cut to
    its first ``keep`` share (a shorter order leaves tasks whose owner is not caught up outside it: next_step must
    then fall back to step())."""
    group, configs = case.group, case.configs
    lags = LagIndex.of(group, configs)
    target = plan_target(group, configs, lags)
    full_order = move_order(target, group, configs, lags)
    order = full_order[: math.floor(len(full_order) * keep)]
    incremental, plain = Honoring(target, group, order), Honoring(target, group, order)
    state, state_lags = group, lags
    steps: list[GroupAssignment] = []
    states: list[tuple[GroupState, LagIndex]] = []
    for _ in range(4 * len(group.stateful_tasks) + 4):
        step, waiting = incremental.next_step(state, configs, state_lags)
        assert (step, waiting) == plain.step(state, configs, state_lags)
        if keep == 1.0:  # the planner's own order: every task outside it has a caught-up owner, the shortcut applies
            assert incremental.uses_settled_tasks()
        steps.append(step)
        states.append((state, state_lags))
        if not step.probing_rebalance_needed:
            break
        state = roles_after(state, step)
        state_lags = state_lags.after_catch_up(step, state.stateful_tasks)
    else:  # pragma: no cover - a schedule always ends
        pytest.fail("the schedule did not end")
    rate = 5_000.0
    assert estimated_seconds(steps, states, configs, rate, full_catch_up=True) == estimated_seconds(
        steps, states, configs, rate
    )


@settings(max_examples=60, deadline=None)
@given(cases(max_clients=8, max_tasks=60))
def test_next_step_places_every_step_of_a_schedule_as_step_does(case: Case) -> None:
    _walk_both_ways(case, keep=1.0)


@settings(max_examples=40, deadline=None)
@given(cases(max_clients=8, max_tasks=60))
def test_next_step_with_a_partial_order_falls_back_to_step(case: Case) -> None:
    _walk_both_ways(case, keep=0.5)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_the_pooled_model_started_on_a_blank_client_finds_the_full_models_optimum(seed: int) -> None:
    """A long-lived group that gained an instance (bench/planner_bench.py's partial-state shape, small): the pooled
    model starts with copies on the new instance (a positive price) and restores exactly as little, with as few
    new copies, as the model with an edge per task and client."""
    group, configs = planner_bench().partial_state_group(120, 12, 4, seed=seed)
    lags = LagIndex.of(group, configs)
    costs = active_costs(group, lags)
    owners = solve_active_target(costs)
    held = {c.process_id: c.previous_standby | c.previous_active for c in group.clients}
    full = solve_standby_target(costs, owners, 1, held)
    pooled = solve_standby_target(costs, owners, 1, held, full_model_max_edges=0)
    assert full is not None and pooled is not None
    stateful = sorted(group.stateful_tasks)
    weight = len(stateful) + 1

    def cost(standbys: dict[str, frozenset[TaskId]]) -> int:
        return sum(
            costs.restore(t, p) * weight + (0 if t in held[p] else 1) for p, tasks in standbys.items() for t in tasks
        )

    assert cost(pooled) == cost(full)
    assert "instance-new" in _blank_room(costs, owners, held), "the new instance is blank: the start prices it"
    for task in stateful:
        holders = [p for p, tasks in pooled.items() if task in tasks]
        assert len(holders) == 1 and owners[task] not in holders


def _blank_room(costs: ActiveCosts, owners: dict[TaskId, str], held: dict[str, frozenset[TaskId]]) -> Mapping[str, int]:
    """The blank clients _BlankStart finds for this model (with a positive price)."""
    stateful = [t for t in costs.tasks if t in costs.stateful]
    known: dict[TaskId, set[str]] = {}
    for task in stateful:
        found = set(costs.restore_prices(task)[1]) | {p for p, tasks in held.items() if task in tasks}
        found.discard(owners[task])
        known[task] = found
    weight = len(stateful) + 1
    ranked = {  # each task's known clients' costs, cheapest first
        t: sorted(costs.restore(t, p) * weight + (0 if t in held[p] else 1) for p in costs.process_ids if p in known[t])
        for t in stateful
    }
    active_count = dict.fromkeys(costs.process_ids, 0)
    for task in stateful:
        active_count[owners[task]] += 1
    start = _BlankStart.of(costs, owners, 1, stateful, known, ranked, active_count, weight)
    assert start.price > 0
    return start.room
