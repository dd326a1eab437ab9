"""The convergence simulator and scenario documents: catch-up models, restarts, growth and bad input."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import jsonschema
import pytest
from hypothesis import given

from assignor import (
    LATEST_OFFSET,
    AssignmentConfigs,
    ClientAssignment,
    ClientState,
    GroupAssignment,
    GroupState,
    InvalidGroupState,
    TaskId,
    assign_high_availability,
)
from assignor.catch_up import catch_up_fully
from assignor.scenarios import BUILTIN_SCENARIOS, ScenarioError, builtin_scenario, scenario_from_dict
from assignor.simulation import MembershipEvent, RestoreRate, Scenario, simulate
from schemas import read_json
from tests.support.strategies import Case, cases

SCHEMA = read_json("scenario.schema.json")
T0, T1 = TaskId(0, 0), TaskId(0, 1)


@pytest.mark.parametrize("name", sorted(BUILTIN_SCENARIOS))
def test_builtin_scenarios_match_the_schema_and_converge(name: str) -> None:
    jsonschema.validate(BUILTIN_SCENARIOS[name], SCHEMA)
    result = simulate(builtin_scenario(name))
    assert result.converged
    assert not result.rounds[-1].assignment.probing_rebalance_needed


def test_scale_out_3_to_4_shows_the_baselines_extra_moves() -> None:
    result = simulate(builtin_scenario("scale-out-3-to-4"))
    # Dealing round-robin ignores ownership: 9 of 12 tasks move where 3 would do (issue 3's planner fixes it).
    assert result.total_moves == 9
    assert result.total_warmups == 9
    assert len(result.rounds) == 6


def _one_task_group(end: int) -> GroupState:
    return GroupState(
        [ClientState("a", previous_active=frozenset({T0}), task_offset_sums={T0: LATEST_OFFSET})],
        frozenset({T0}),
        changelog_end_offset_sums={T0: end},
    )


def test_restore_rate_spreads_a_warmup_over_several_probing_intervals() -> None:
    configs = AssignmentConfigs(probing_rebalance_interval_ms=10_000, acceptable_recovery_lag=0)
    group = GroupState(
        [ClientState("a", task_offset_sums={T0: LATEST_OFFSET, T1: LATEST_OFFSET}), ClientState("b")],
        frozenset({T0, T1}),
        changelog_end_offset_sums={T0: 35_000, T1: 35_000},
    )
    # b restores 1,000 offsets/s * 10 s = 10,000 per interval: 35,000 takes 4 intervals.
    result = simulate(Scenario("rate", group, configs, catch_up=RestoreRate(1_000)))
    assert result.converged
    assert [r.restored_offsets for r in result.rounds] == [10_000, 10_000, 10_000, 5_000, 0]
    assert [r.warmups for r in result.rounds] == [1, 1, 1, 1, 0]
    assert result.rounds[-1].assignment.clients["b"].active == {T1}


def test_restart_keeps_checkpointed_state_unless_wiped() -> None:
    configs = AssignmentConfigs(acceptable_recovery_lag=0)
    group = GroupState(
        [
            ClientState("a", previous_active=frozenset({T0}), task_offset_sums={T0: LATEST_OFFSET}),
            ClientState("b", previous_active=frozenset({T1}), task_offset_sums={T1: LATEST_OFFSET}),
        ],
        frozenset({T0, T1}),
        changelog_end_offset_sums={T0: 500, T1: 500},
    )
    kept = simulate(Scenario("restart", group, configs, events=(MembershipEvent(0, "restart", "a"),)))
    assert kept.rounds[0].group.client("a").task_offset_sums == {T0: 500}  # checkpoint, not LATEST_OFFSET
    assert kept.rounds[0].group.client("a").previous_active == frozenset()
    assert kept.total_moves == 0 and len(kept.rounds) == 1
    wiped = simulate(Scenario("wipe", group, configs, events=(MembershipEvent(0, "restart", "a", wipe_state=True),)))
    assert wiped.rounds[0].group.client("a").task_offset_sums == {}
    # Nobody is caught up on 0_0 any more and nobody lags less than 'a': it restores it as an active.
    assert wiped.rounds[0].assignment.clients["a"].active == {T0}
    assert wiped.converged and wiped.total_restored_offsets == 500


def test_changelog_growth_makes_stale_copies_fall_behind() -> None:
    configs = AssignmentConfigs(acceptable_recovery_lag=100)
    scenario = Scenario("growth", _one_task_group(1_000), configs, changelog_growth_per_round=1_000, max_rounds=3)
    result = simulate(scenario)
    assert result.final_group.changelog_end_offset_sums[T0] == 2_000
    assert result.final_group.client("a").task_offset_sums[T0] == LATEST_OFFSET


def test_events_are_applied_at_their_round_even_after_a_quiet_period() -> None:
    scenario = Scenario("later", _one_task_group(10), AssignmentConfigs(), events=(MembershipEvent(5, "add", "b"),))
    result = simulate(scenario)
    assert [r.index for r in result.rounds] == [0, 5]
    assert result.rounds[1].events == (MembershipEvent(5, "add", "b"),)


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (MembershipEvent(0, "add", "a"), "already in the group"),
        (MembershipEvent(0, "remove", "zz"), "not in the group"),
    ],
)
def test_impossible_events_are_rejected(event: MembershipEvent, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        simulate(Scenario("bad", _one_task_group(10), AssignmentConfigs(), events=(event,)))


def test_unknown_event_kind_is_rejected() -> None:
    with pytest.raises(ValueError, match="kind must be add, remove or restart"):
        MembershipEvent(0, "explode", "a")  # type: ignore[arg-type]


def _doc(**changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "tasks": {"stateful": ["0_0", "0_1"]},
        "clients": [{"process_id": "a", "active": ["0_0", "0_1"]}],
    }
    doc.update(changes)
    return doc


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"clients": "a"}, "scenario.clients must be list"),
        ({"clients": [{"capacity": 1}]}, r"scenario.clients\[0\].process_id is required"),
        ({"clients": [{"process_id": "a", "active": ["x"]}]}, r"scenario.clients\[0\].active: task id"),
        ({"tasks": None, "subtopologies": [{"id": 0}]}, r"scenario.subtopologies\[0\].partitions is required"),
        ({"catch_up": {"model": "warp"}}, "catch_up.model must be 'full' or 'rate'"),
        ({"configs": {"max_warmup_replicas": 0}}, r"max_warmup_replicas must be an integer in 1\.\.1000"),
        ({"configs": {"speed": 1}}, "scenario.configs: .*speed"),
        ({"events": [{"at_round": 0, "kind": "add"}]}, r"scenario.events\[0\].process_id is required"),
    ],
)
def test_bad_scenario_documents_name_the_field(changes: dict[str, Any], message: str) -> None:
    doc = _doc(**changes)
    if doc.get("tasks") is None:
        doc.pop("tasks")
    with pytest.raises(ValueError, match=message):
        scenario_from_dict(doc)


def test_unknown_builtin_scenario_lists_the_known_ones() -> None:
    with pytest.raises(ScenarioError, match="kip441-scaling-out"):
        builtin_scenario("nope")


def test_subtopology_documents_expand_to_tasks() -> None:
    doc = {
        "subtopologies": [{"id": 0, "partitions": 2}, {"id": 1, "partitions": 3, "stateful": False}],
        "default_end_offset_sum": 7,
        "clients": [{"process_id": "a"}],
    }
    scenario = scenario_from_dict(doc)
    assert scenario.group.stateful_tasks == {TaskId(0, 0), TaskId(0, 1)}
    assert len(scenario.group.stateless_tasks) == 3
    assert scenario.group.changelog_end_offset_sums == {TaskId(0, 0): 7, TaskId(0, 1): 7}


@given(cases(max_clients=8, max_tasks=40))
def test_full_catch_up_builds_the_state_the_checked_constructors_accept(case: Case) -> None:
    """catch_up_fully skips ClientState/GroupState validation (the planner replays it every step): rebuilding
    its result through the checked constructors gives the same state."""
    group = case.group
    for _ in range(3):
        group = catch_up_fully(group, assign_high_availability(group, case.configs))
        checked = GroupState(
            [replace(c, task_offset_sums=dict(c.task_offset_sums)) for c in group.clients],
            group.stateful_tasks,
            group.stateless_tasks,
            group.changelog_end_offset_sums,
        )
        assert checked == group


def test_full_catch_up_rejects_an_assignment_with_tasks_outside_the_group() -> None:
    group = GroupState([ClientState("a"), ClientState("b")], frozenset({T0}), changelog_end_offset_sums={T0: 5})
    stray = GroupAssignment(
        {"a": ClientAssignment(active=frozenset({T0})), "b": ClientAssignment(standby=frozenset({T1}))}
    )
    with pytest.raises(InvalidGroupState, match=r"'b'.*not in the group: 0_1"):
        catch_up_fully(group, stray)
