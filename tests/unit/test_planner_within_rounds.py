"""plan_group against brute force on small groups: never more rounds (nor moves, warmups, restore) than following
KIP-441's end state, and the least restore among the targets that keep within those.

The target space, the same definition the planner searches (planner.plan_group, end_state.balanced_placements):
KIP-441's end state (high_availability.settled_assignment), and every map of the group's tasks to its clients whose
actives meet B1 and B2 (invariants.balance_violations with replicas=False) and that moves no more actives than
KIP-441's end state, each completed with the planner's standbys (end_state.with_standbys) and then meeting B1 over
stateful replicas too where that can hold (invariants.target_balance_violations). A target keeps within
KIP-441 when the schedule to it (planner.plan_towards) needs no more moves, warmups, rounds and restore than the
schedule to KIP-441's end state. Here every map is enumerated (itertools.product), each target scheduled.
"""

from __future__ import annotations

import itertools
import random

from hypothesis import assume, given, settings

from assignor import AssignmentConfigs, ClientAssignment, GroupAssignment, GroupState, plan_group
from assignor.end_state import active_costs, balanced_placements, with_standbys
from assignor.high_availability import settled_assignment
from assignor.invariants import balance_violations, target_balance_violations, validity_violations
from assignor.lags import LagIndex
from assignor.planner import GroupPlan, plan_towards
from tests.support.strategies import build_group, small_groups

METRICS = ("moves", "warmups", "rounds", "restore_offsets")


def within(plan: GroupPlan, kip441: GroupPlan) -> bool:
    return all(getattr(plan.cost, m) <= getattr(kip441.cost, m) for m in METRICS)


def brute_force(group: GroupState, configs: AssignmentConfigs, kip441: GroupPlan) -> list[GroupPlan]:
    """The schedule to every target of the space that keeps within KIP-441's figures, KIP-441's own first."""
    tasks = sorted(group.all_tasks)
    pids = sorted(c.process_id for c in group.clients)
    costs = active_costs(group, LagIndex.of(group, configs))
    found = [kip441]
    for owners in itertools.product(pids, repeat=len(tasks)):
        placement = dict(zip(tasks, owners, strict=True))
        actives = {p: ClientAssignment(active=frozenset(t for t, o in placement.items() if o == p)) for p in pids}
        if balance_violations(GroupAssignment(actives), group, replicas=False):
            continue
        target = with_standbys(placement, group, configs, costs)
        if validity_violations(target, group, configs) or target_balance_violations(target, group, configs):
            continue
        candidate = plan_towards(target, group, configs)
        if within(candidate, kip441):
            found.append(candidate)
    return found


Small = tuple[GroupState, AssignmentConfigs]


@settings(max_examples=60, deadline=None)
@given(small_groups())
def test_the_plan_restores_least_among_targets_within_kip441s_rounds(case: Small) -> None:
    group, configs = case
    settled = settled_assignment(group, configs)
    # The planner only compares with a balanced KIP-441 end state (planner._baseline_target).
    assume(not validity_violations(settled, group, configs))
    assume(not balance_violations(settled, group, replicas=False))
    kip441 = plan_towards(settled, group, configs)
    plan = plan_group(group, configs)
    assert plan.cost.rounds <= kip441.cost.rounds
    assert within(plan, kip441)
    # At most: the joint model (joint_target) may place standbys where with_standbys would not and restore less.
    assert plan.cost.restore_offsets <= min(p.cost.restore_offsets for p in brute_force(group, configs, kip441))


def test_small_groups_are_searched_whole() -> None:
    # The property above holds for the planner's whole search only when it can list every placement: 3 ** 6.
    rng = random.Random(3)
    group = build_group(rng, 3, [3, 3], [True, True])
    lags = LagIndex.of(group, AssignmentConfigs())
    placements = balanced_placements(group, lags, max_moves=6, max_restore=10**12)
    assert placements is not None and len(placements) > 0
