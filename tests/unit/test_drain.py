"""Planned scale-in: a drain plan empties the drained processes by safe steps, so they stop with nothing to restore."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from assignor import (
    LATEST_OFFSET,
    AssignmentConfigs,
    ClientAssignment,
    ClientState,
    GroupAssignment,
    GroupState,
    TaskId,
    honor_plan,
    plan_group,
)
from assignor.end_state import target_fits, without_clients
from assignor.invariants import balance_violations, k1_violations
from assignor.protocol.plans import ApprovedPlan
from assignor.simulation import catch_up_fully
from jobs.pipeline.intake import BrokerGroup, BrokerMember, Report, parse_report
from jobs.pipeline.observe import drained_departures, is_realized
from jobs.pipeline.registry import drain_requests
from jobs.pipeline.stage import StageInputError
from tests.support.pipeline_kafka import report, stateful_topology
from tests.support.plan_checks import assert_safe_steps
from tests.support.signing import SIGNER, VERIFIER, decide_on
from tests.support.strategies import Case, cases, replica_balance_feasible

NOW = 1_700_000_000_000


def _drainable(case: Case, index: int, count: int = 1) -> frozenset[str]:
    """``count`` processes to drain from ``index`` on, skipping cases where the drain is impossible by construction."""
    pids = sorted(c.process_id for c in case.group.clients)
    assume(len(pids) > count)
    remaining = len(pids) - count
    assume(not case.group.stateful_tasks or min(len(pids) - 1, case.configs.num_standby_replicas) <= remaining - 1)
    return frozenset(pids[(index + i) % len(pids)] for i in range(count))


@given(cases(max_clients=8, max_tasks=60), st.integers(0, 7), st.integers(1, 3))
def test_every_drain_step_is_safe_and_the_drained_processes_end_with_nothing(
    case: Case, index: int, count: int
) -> None:
    drained = _drainable(case, index, count)
    plan = plan_group(case.group, case.configs, draining=drained)
    assert all(plan.target.clients[pid] == ClientAssignment() for pid in drained)
    assert_safe_steps(plan, case.group, case.configs)
    assert plan.drained_processes == count


@given(cases(max_clients=8, max_tasks=60), st.integers(0, 7), st.integers(1, 3))
def test_the_drained_group_is_balanced_over_the_remaining_processes(case: Case, index: int, count: int) -> None:
    drained = _drainable(case, index, count)
    plan = plan_group(case.group, case.configs, draining=drained)
    rest = without_clients(case.group, drained)
    staying = type(plan.target)({p: ca for p, ca in plan.target.clients.items() if p not in drained})
    replicas = replica_balance_feasible(rest, case.configs)
    assert balance_violations(staying, rest, replicas=replicas) == []
    assert plan.max_load_skew_after <= 1


@given(cases(max_clients=6, max_tasks=40), st.integers(0, 5))
def test_a_live_group_honors_a_drain_target_as_it_stands(case: Case, index: int) -> None:
    plan = plan_group(case.group, case.configs, draining=_drainable(case, index))
    # The leader adapts a target that does not fit its group; a drain target with an empty process must fit.
    assert target_fits(plan.target, case.group, case.configs)
    assert honor_plan(plan.target, case.group, case.configs, order=plan.move_order) == plan.steps[0]


def _group(clients: int, standbys_of: dict[str, set[TaskId]] | None = None) -> GroupState:
    tasks = [TaskId(0, p) for p in range(clients)]
    pids = [f"p{i}" for i in range(clients)]
    return GroupState(
        [
            ClientState(
                pid,
                previous_active=frozenset({task}),
                previous_standby=frozenset((standbys_of or {}).get(pid, set())),
                task_offset_sums={task: LATEST_OFFSET},
            )
            for pid, task in zip(pids, tasks, strict=True)
        ],
        frozenset(tasks),
        frozenset(),
        dict.fromkeys(tasks, 1_000_000),
    )


def test_the_drained_task_warms_up_elsewhere_before_it_moves() -> None:
    group = _group(3)
    plan = plan_group(group, AssignmentConfigs(), draining=frozenset({"p2"}))
    first = plan.steps[0]
    assert TaskId(0, 2) in first.clients["p2"].active
    assert any(TaskId(0, 2) in ca.warmup for ca in first.clients.values())
    assert plan.target.clients["p2"].active == frozenset()
    assert len(plan.steps) == 2


@pytest.mark.parametrize(
    ("draining", "standbys", "reason"),
    [
        (frozenset({"p0", "p1", "p2"}), 0, "every process"),
        (frozenset({"nobody"}), 0, "not processes of the group"),
        (frozenset({"p2"}), 2, "needs 2 standbys"),
    ],
)
def test_an_impossible_drain_is_refused_naming_why(draining: frozenset[str], standbys: int, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        plan_group(_group(3), AssignmentConfigs(num_standby_replicas=standbys), draining=draining)


def test_drain_requests_group_processes_by_group_and_split_at_the_last_slash() -> None:
    assert drain_requests(["orders/p1", "orders/p2", "team/billing/p9"]) == {
        "orders": frozenset({"p1", "p2"}),
        "team/billing": frozenset({"p9"}),
    }


@pytest.mark.parametrize("value", ["orders", "/p1", "orders/"])
def test_a_malformed_drain_request_is_refused_naming_it(value: str) -> None:
    with pytest.raises(StageInputError, match=re.escape(repr(value))):
        drain_requests([value])


def test_a_leader_honors_a_signed_drain_plan_until_the_drained_instance_holds_nothing() -> None:
    group, configs = _group(3, {"p0": {TaskId(0, 2)}}), AssignmentConfigs(num_standby_replicas=1)
    plan = plan_group(group, configs, draining=frozenset({"p2"}))
    record = ApprovedPlan(
        "s/orders",
        "orders",
        "s",
        NOW - 10,
        NOW + 3_600_000,
        "alice",
        NOW - 5,
        configs,
        plan.target,
        tuple(plan.move_order),
    ).to_record(SIGNER)
    state = group
    for _ in range(len(plan.steps)):
        decision = decide_on("orders", state, configs, json.dumps(record).encode(), VERIFIER, NOW)
        assert decision.fallback_reason is None and decision.plan_id == "s/orders"
        assert k1_violations(decision.assignment, state, configs) == []
        state = catch_up_fully(state, decision.assignment)
    assert decision.assignment.clients == plan.target.clients
    assert decision.assignment.clients["p2"] == ClientAssignment()

    # Stopped now: the plan still fits the others (it gives p2 nothing), so nothing moves and nothing follows up;
    # falling back to KIP-441 instead could reshuffle (and restore) what the drain just settled.
    stopped = replace(state, clients=tuple(c for c in state.clients if c.process_id != "p2"))
    after = decide_on("orders", stopped, configs, json.dumps(record).encode(), VERIFIER, NOW)
    assert after.fallback_reason is None and after.plan_id == "s/orders"
    assert dict(after.assignment.clients) == {p: ca for p, ca in plan.target.clients.items() if p != "p2"}
    assert not after.assignment.probing_rebalance_needed
    # One that still has tasks in the target and left is another matter: that plan no longer fits.
    p1_gone = replace(state, clients=tuple(c for c in state.clients if c.process_id != "p1"))
    fallback = decide_on("orders", p1_gone, configs, json.dumps(record).encode(), VERIFIER, NOW)
    assert fallback.plan_id is None and str(fallback.fallback_reason).startswith("departed_instances")


def test_observe_marks_a_drain_realized_while_the_drained_instance_still_runs_with_nothing() -> None:
    plan = plan_group(_group(3), AssignmentConfigs(), draining=frozenset({"p2"}))
    assert is_realized(plan.target, GroupAssignment(dict(plan.target.clients)))
    # Stopped before the plan was realized: observe cannot tell it finished, so the report never says "safe".
    gone = GroupAssignment({p: ca for p, ca in plan.target.clients.items() if p != "p2"})
    assert not is_realized(plan.target, gone)


_TOPOLOGY = stateful_topology("orders", 1)


def _reported(group_id: str, pid: str) -> Report:
    parsed = parse_report(f"{group_id}/{pid}".encode(), json.dumps(report(group_id, pid, topology=_TOPOLOGY)).encode())
    assert isinstance(parsed, Report), parsed
    return parsed


def _members(*pids: str, error: str | None = None) -> BrokerGroup:
    """The group as the broker describes it: the members whose ids the reports of ``pids`` name."""
    listed = tuple(BrokerMember(f"{p}-m", f"{p}-c", "localhost", None, ()) for p in pids)
    return BrokerGroup("orders", "Stable", "Classic", "stream", "", listed, error)


def test_a_drained_instance_counts_as_gone_once_the_broker_no_longer_lists_its_member() -> None:
    reports = [_reported("orders", p) for p in ("p0", "p1", "p2")]
    drains, published = {"plan": ["p2"]}, {"plan": "orders"}
    # Still a member (it runs, holding nothing or not yet): observe may mark the plan REALIZED.
    assert drained_departures(drains, published, reports, {"orders": _members("p0", "p1", "p2")}) == {"plan": []}
    # Its last report is still there (and fresh), but the broker lists its member no more: it left.
    assert drained_departures(drains, published, reports, {"orders": _members("p0", "p1")}) == {"plan": ["p2"]}
    assert drained_departures(drains, published, reports, {}) == {"plan": ["p2"]}  # the group is gone
    assert drained_departures(drains, published, reports[:2], {"orders": _members("p0", "p1", "p2")}) == {
        "plan": ["p2"]
    }  # no report names its member
    # The broker did not describe the group: nobody can tell, so observe decides nothing about the plan.
    unknown = {"orders": _members(error="GROUP_AUTHORIZATION_FAILED")}
    assert drained_departures(drains, published, reports, unknown) == {"plan": None}
