"""Inputs that once broke the planner, honor_plan or the rack-aware standbys (found in review)."""

from __future__ import annotations

from assignor import (
    LATEST_OFFSET,
    UNKNOWN_OFFSET_SUM,
    AssignmentConfigs,
    ClientAssignment,
    ClientState,
    GroupAssignment,
    GroupState,
    TaskId,
    assign_high_availability,
    honor_plan,
    plan_group,
)
from assignor.invariants import balance_violations, validity_violations

t = TaskId.parse


def test_plan_group_survives_a_model_highs_presolve_misreports() -> None:
    group = GroupState(
        [
            ClientState("c0", 7, previous_active=frozenset({t("0_1"), t("0_2")})),
            ClientState("c1", 1, frozenset({t("0_2")}), task_offset_sums={t("0_1"): 50, t("0_4"): 20010, t("0_0"): -2}),
            ClientState("c2", 5, frozenset({t("0_1")}), task_offset_sums={t("0_4"): 20000, t("0_0"): 110}),
            ClientState("c3", 6, task_offset_sums={t("0_0"): 100}),
            ClientState("c4", 2, previous_active=frozenset({t("0_0"), t("0_2"), t("0_4")})),
            ClientState("c5", 5, previous_active=frozenset({t("0_2")})),
        ],
        frozenset(map(t, ["0_0", "0_1", "0_2", "0_4"])),
        frozenset(),
        {t("0_0"): 100, t("0_1"): 50, t("0_4"): 20000},
    )
    configs = AssignmentConfigs(acceptable_recovery_lag=0)
    plan = plan_group(group, configs)
    assert validity_violations(plan.target, group, configs) == []
    assert balance_violations(plan.target, group) == []


def test_an_unknown_offset_on_an_empty_changelog_still_costs_a_warmup_round() -> None:
    # 'a' reports -3 for 0_1 (never caught up), although the log is empty: KIP-441 moves it in one round.
    group = GroupState(
        [
            ClientState("a", previous_active=frozenset({t("0_1")}), task_offset_sums={t("0_1"): UNKNOWN_OFFSET_SUM}),
            ClientState("b", previous_active=frozenset({t("0_0")}), task_offset_sums={t("0_0"): LATEST_OFFSET}),
        ],
        frozenset({t("0_0"), t("0_1")}),
    )
    configs = AssignmentConfigs()
    assert not assign_high_availability(group, configs).probing_rebalance_needed
    assert plan_group(group, configs).cost.rounds == 1


def test_rack_tags_yield_to_balance() -> None:
    zones = {"c0": "b", "c1": "a", "c2": "a"}
    group = GroupState(
        [
            ClientState(
                p,
                previous_active=frozenset({t(f"0_{i}")}),
                task_offset_sums={t(f"0_{i}"): -2},
                client_tags={"zone": zones[p]},
            )
            for i, p in enumerate(sorted(zones))
        ],
        frozenset(t(f"0_{i}") for i in range(3)),
    )
    configs = AssignmentConfigs(num_standby_replicas=1, rack_aware_assignment_tags=("zone",))
    for assignment in (assign_high_availability(group, configs), plan_group(group, configs).target):
        assert not assignment.probing_rebalance_needed
        assert balance_violations(assignment, group) == []


def test_honor_plan_replans_targets_that_are_not_valid_end_states() -> None:
    tasks = frozenset({t("0_0"), t("0_1")})
    group = GroupState([ClientState("a"), ClientState("b")], tasks)
    configs = AssignmentConfigs(num_standby_replicas=1)
    broken = [
        GroupAssignment({"a": ClientAssignment(active=tasks), "b": ClientAssignment()}),  # no standbys
        GroupAssignment(
            {
                "a": ClientAssignment(active=tasks, standby=frozenset({t("0_0")})),
                "b": ClientAssignment(standby=frozenset({t("0_1")})),
            }
        ),  # active and standby on one client
        GroupAssignment(
            {
                "a": ClientAssignment(active=frozenset({t("0_0")}), warmup=frozenset({t("0_1")})),
                "b": ClientAssignment(active=frozenset({t("0_1")}), standby=frozenset({t("0_0")})),
            }
        ),
    ]
    for target in broken:
        live = honor_plan(target, group, configs)
        assert validity_violations(live, group, configs) == []
        assert not live.probing_rebalance_needed  # nothing to restore: the re-planned target is reached at once
