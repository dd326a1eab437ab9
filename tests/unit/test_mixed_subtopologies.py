"""Subtopologies that mix stateful and stateless tasks: Kafka Streams never builds them, the API accepts them.

The contract reads B1 and B2 there as: B1's stateful load counts stateful tasks only; B2 holds when either the
stateful actives alone or all actives of a subtopology are spread within one.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from assignor import (
    ClientAssignment,
    ClientState,
    GroupAssignment,
    GroupState,
    TaskId,
    honor_plan,
    plan_group,
)
from assignor.invariants import balance_violations, k1_violations, validity_violations
from assignor.simulation import catch_up_fully
from tests.support.strategies import Case, cases, replica_balance_feasible
from tests.unit.test_planner_properties import check_steps


def merged(group: GroupState, into: int) -> GroupState:
    """The group with every subtopology's tasks renumbered into subtopology ``into``: one mixed subtopology."""
    order = sorted(group.all_tasks)
    renumber = {task: TaskId(into, index) for index, task in enumerate(order)}

    def tasks(values: frozenset[TaskId]) -> frozenset[TaskId]:
        return frozenset(renumber[t] for t in values)

    clients = tuple(
        replace(
            c,
            previous_active=tasks(c.previous_active),
            previous_standby=tasks(c.previous_standby),
            task_offset_sums={renumber[t]: s for t, s in c.task_offset_sums.items()},
        )
        for c in group.clients
    )
    return GroupState(
        clients,
        tasks(group.stateful_tasks),
        tasks(group.stateless_tasks),
        {renumber[t]: e for t, e in group.changelog_end_offset_sums.items()},
    )


@st.composite
def mixed_cases(draw: st.DrawFn, max_clients: int = 10, max_tasks: int = 80) -> Case:
    """A random group whose subtopologies are merged into one (or two) that mix stateful and stateless tasks."""
    case = draw(cases(max_clients=max_clients, max_tasks=max_tasks))
    group = merged(case.group, into=draw(st.integers(0, 3)))
    return Case(group, case.configs, case.params + ", merged into one subtopology")


def _mixed(group: GroupState) -> bool:
    kinds: dict[int, set[bool]] = {}
    for task in group.all_tasks:
        kinds.setdefault(task.subtopology, set()).add(task in group.stateful_tasks)
    return any(len(k) == 2 for k in kinds.values())


@given(mixed_cases())
def test_the_planners_target_is_balanced_on_mixed_subtopologies(case: Case) -> None:
    plan = plan_group(case.group, case.configs)
    assert validity_violations(plan.target, case.group, case.configs) == []
    replicas = replica_balance_feasible(case.group, case.configs)
    assert balance_violations(plan.target, case.group, replicas=replicas) == []


@given(mixed_cases())
def test_every_step_is_safe_on_mixed_subtopologies(case: Case) -> None:
    check_steps(case)


@given(mixed_cases(max_clients=8, max_tasks=60))
def test_honor_plan_settles_balanced_on_mixed_subtopologies(case: Case) -> None:
    target = plan_group(case.group, case.configs).target
    group = case.group
    for _ in range(200):
        live = honor_plan(target, group, case.configs)
        assert k1_violations(live, group, case.configs) == []
        if not live.probing_rebalance_needed:
            break
        group = catch_up_fully(group, live)
    assert not live.probing_rebalance_needed
    assert balance_violations(live, group, replicas=replica_balance_feasible(group, case.configs)) == []


def _one(active: set[TaskId]) -> ClientAssignment:
    return ClientAssignment(frozenset(active), frozenset())


def test_b2_accepts_a_mixed_subtopology_whose_stateful_actives_are_spread_within_one() -> None:
    # Subtopology 0: two stateful tasks, four stateless ones. The stateful actives are one each while all
    # actives are 1 against 5 (which B1 rejects; only B2 is looked at here).
    stateful = {TaskId(0, 0), TaskId(0, 1)}
    stateless = {TaskId(0, p) for p in range(2, 6)}
    group = GroupState(
        [ClientState("a"), ClientState("b")], frozenset(stateful), frozenset(stateless), dict.fromkeys(stateful, 0)
    )
    assignment = GroupAssignment({"a": _one({TaskId(0, 0)}), "b": _one({TaskId(0, 1)} | stateless)})
    assert [v for v in balance_violations(assignment, group) if v.startswith("B2")] == []
    assert _mixed(group)


def test_b2_rejects_a_mixed_subtopology_spread_unevenly_both_ways() -> None:
    stateful = {TaskId(0, 0), TaskId(0, 1)}
    stateless = {TaskId(0, p) for p in range(2, 5)}
    group = GroupState(
        [ClientState("a"), ClientState("b")], frozenset(stateful), frozenset(stateless), dict.fromkeys(stateful, 0)
    )
    # Both stateful actives on b (2 against 0) and all actives 0 against 5.
    assignment = GroupAssignment({"a": _one(set()), "b": _one(stateful | stateless)})
    assert any(v.startswith("B2: subtopology 0") for v in balance_violations(assignment, group))


def test_b2_still_checks_all_actives_of_a_stateless_subtopology() -> None:
    stateless = {TaskId(1, p) for p in range(3)}
    group = GroupState([ClientState("a"), ClientState("b")], frozenset(), frozenset(stateless), {})
    assignment = GroupAssignment({"a": _one(set()), "b": _one(stateless)})
    assert any(v.startswith("B2: subtopology 1") for v in balance_violations(assignment, group))
