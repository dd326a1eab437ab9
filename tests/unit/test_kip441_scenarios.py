"""KIP-441's three example scenarios, round by round (T1..T4 of the KIP are tasks 0_0..0_3 here).

Actives follow the KIP's tables exactly. The baseline's standbys follow Kafka's least-loaded rule, so
in a few rounds they sit on another instance than in the KIP's illustration; the assertions say where.
K1 (caught-up copies kept) changes none of the baseline's tables: Kafka's assignor never breaks it. The
planner's first step of "Scaling Out" is now the KIP's table too.
"""

from __future__ import annotations

import pytest

from assignor import AssignmentConfigs, GroupAssignment, GroupState, Role, TaskId, plan_group
from assignor.invariants import balance_violations, h1_violations, k1_violations
from assignor.scenarios import builtin_scenario
from assignor.simulation import SimulationResult, simulate


def tasks(*numbers: int) -> frozenset[TaskId]:
    return frozenset(TaskId(0, n - 1) for n in numbers)


def held(result: SimulationResult, round_index: int, role: Role) -> dict[str, frozenset[TaskId]]:
    return {pid: ca.tasks(role) for pid, ca in result.rounds[round_index].assignment.clients.items()}


def check_rounds_are_valid(result: SimulationResult, name: str) -> None:
    configs = builtin_scenario(name).configs
    for r in result.rounds:
        r.assignment.validate(r.group, configs)
        assert h1_violations(r.assignment, r.group, configs) == []


def test_scaling_out_warms_up_the_new_instance_before_giving_it_an_active() -> None:
    result = simulate(builtin_scenario("kip441-scaling-out"))
    check_rounds_are_valid(result, "kip441-scaling-out")
    assert len(result.rounds) == 2 and result.converged

    # First rebalance (catching up): nothing moves yet; I3 only restores, as warmups.
    first = result.rounds[0]
    assert held(result, 0, Role.ACTIVE) == {"I1": tasks(1, 3), "I2": tasks(2), "I3": tasks()}
    assert held(result, 0, Role.STANDBY) == {"I1": tasks(2), "I2": tasks(1, 3), "I3": tasks()}
    assert len(held(result, 0, Role.WARMUP)["I3"]) == 2
    assert tasks(3) <= held(result, 0, Role.WARMUP)["I3"]  # the task I3 will take over
    assert first.assignment.probing_rebalance_needed and first.moves == 0

    # Second rebalance (stable): one task each; T3 moved to I3 once it had caught up.
    assert held(result, 1, Role.ACTIVE) == {"I1": tasks(1), "I2": tasks(2), "I3": tasks(3)}
    assert all(len(s) == 1 for s in held(result, 1, Role.STANDBY).values())
    assert result.rounds[1].moves == 1 and result.total_warmups == 2
    assert not result.rounds[1].assignment.probing_rebalance_needed
    assert balance_violations(result.rounds[1].assignment, result.rounds[1].group) == []


def test_scaling_in_with_in_sync_standbys_takes_over_at_once() -> None:
    result = simulate(builtin_scenario("kip441-scaling-in-standbys-in-sync"))
    check_rounds_are_valid(result, "kip441-scaling-in-standbys-in-sync")

    # First rebalance: exactly the KIP's table; processing resumes at once, nothing restores as an active.
    assert held(result, 0, Role.ACTIVE) == {"I2": tasks(1, 4), "I3": tasks(2, 3)}
    assert held(result, 0, Role.STANDBY) == {"I2": tasks(2, 3), "I3": tasks(1, 4)}
    assert held(result, 0, Role.WARMUP) == {"I2": tasks(), "I3": tasks()}
    assert balance_violations(result.rounds[0].assignment, result.rounds[0].group) == []
    # The KIP stops here. The baseline, blind to history, then swaps towards its round-robin target
    # (free: every replica is in sync), one probing rebalance later; the planner removes that round.
    assert len(result.rounds) == 2
    assert result.total_warmups == 0
    assert not result.rounds[-1].assignment.probing_rebalance_needed


def test_scaling_in_with_lagging_standbys_restores_on_the_most_caught_up_instance_first() -> None:
    result = simulate(builtin_scenario("kip441-scaling-in-lagging-standbys"))
    check_rounds_are_valid(result, "kip441-scaling-in-lagging-standbys")

    # First rebalance (catching up): exactly the KIP's table. Nobody is caught up on I1's T1 and T4,
    # so they go to the most caught-up instance, I2, which also keeps T2: I2 carries the load for a round.
    assert held(result, 0, Role.ACTIVE) == {"I2": tasks(1, 2, 4), "I3": tasks(3)}
    assert held(result, 0, Role.STANDBY) == {"I2": tasks(3), "I3": tasks(1, 2, 4)}
    assert result.rounds[0].assignment.probing_rebalance_needed

    # Second rebalance (stable): two actives and two standbys each.
    final = result.rounds[1]
    assert {pid: len(a) for pid, a in held(result, 1, Role.ACTIVE).items()} == {"I2": 2, "I3": 2}
    assert {pid: len(s) for pid, s in held(result, 1, Role.STANDBY).items()} == {"I2": 2, "I3": 2}
    assert not final.assignment.probing_rebalance_needed
    assert balance_violations(final.assignment, final.group) == []


def planner_step(group: GroupState, configs: AssignmentConfigs) -> GroupAssignment:
    """A leader that re-plans at every rebalance and applies the plan's first step."""
    return plan_group(group, configs).steps[0]


@pytest.mark.parametrize(
    "name", ["kip441-scaling-out", "kip441-scaling-in-standbys-in-sync", "kip441-scaling-in-lagging-standbys"]
)
def test_no_round_drops_a_caught_up_copy_with_either_assignor(name: str) -> None:
    scenario = builtin_scenario(name)
    for result in (simulate(scenario), simulate(scenario, assignor=planner_step)):
        assert result.converged
        for r in result.rounds:
            assert k1_violations(r.assignment, r.group, scenario.configs) == []


def test_the_planner_scales_out_as_the_kip_does_keeping_every_in_sync_standby() -> None:
    result = simulate(builtin_scenario("kip441-scaling-out"), assignor=planner_step)
    check_rounds_are_valid(result, "kip441-scaling-out")
    assert len(result.rounds) == 2 and result.converged

    # The KIP's first table exactly (K1): I1 keeps its in-sync T2 standby and I2 its T1 and T3 standbys
    # while I3 only warms up; the planner used to hand I3 two cold standbys in their place.
    assert held(result, 0, Role.ACTIVE) == {"I1": tasks(1, 3), "I2": tasks(2), "I3": tasks()}
    assert held(result, 0, Role.STANDBY) == {"I1": tasks(2), "I2": tasks(1, 3), "I3": tasks()}
    assert len(held(result, 0, Role.WARMUP)["I3"]) == 2
    assert result.rounds[0].moves == 0

    # Stable: one active and one standby each; the task I3 takes over is one it warmed up.
    final = result.rounds[1]
    assert all(len(a) == 1 for a in held(result, 1, Role.ACTIVE).values())
    assert all(len(s) == 1 for s in held(result, 1, Role.STANDBY).values())
    assert held(result, 1, Role.ACTIVE)["I3"] <= held(result, 0, Role.WARMUP)["I3"]
    assert not final.assignment.probing_rebalance_needed
    assert balance_violations(final.assignment, final.group) == []
