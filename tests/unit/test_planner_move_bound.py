"""When the least-restore target moves more tasks than KIP-441 would, the planner looks for a target within
KIP-441's move count before falling back to KIP-441's own end state."""

from __future__ import annotations

import random

from hypothesis import given

from assignor import LATEST_OFFSET, AssignmentConfigs, ClientState, GroupState, TaskId, plan_group
from assignor.end_state import plan_target, previous_owners, targets_within_moves
from assignor.high_availability import settled_assignment
from assignor.lags import LagIndex
from assignor.simulation import Scenario, simulate
from tests.support.strategies import Case, cases


def one_lagging(tasks: int = 64, clients: int = 6, subtopologies: int = 2, seed: int = 7) -> GroupState:
    """A running group with 1 standby whose first instance restarted 20k-400k offsets behind on every task it
    held; its actives failed over to the instances holding their standbys."""
    rng = random.Random(seed)
    ids = [TaskId(s, p) for s in range(subtopologies) for p in range(tasks // subtopologies)]
    ends = {t: rng.randint(1_000_000, 5_000_000) for t in ids}
    pids = [f"instance-{i:04d}" for i in range(clients)]
    active: dict[str, set[TaskId]] = {p: set() for p in pids}
    standby: dict[str, set[TaskId]] = {p: set() for p in pids}
    for i, task in enumerate(ids):
        active[pids[i % clients]].add(task)
        standby[pids[(i + 1) % clients]].add(task)
    gone = pids[0]
    members = []
    for pid in pids[1:]:
        took = active[gone] & standby[pid]
        sums = {t: ends[t] - rng.randint(0, 20_000) for t in standby[pid] - took}
        sums.update(dict.fromkeys(active[pid] | took, LATEST_OFFSET))
        members.append(ClientState(pid, 1, frozenset(active[pid] | took), frozenset(standby[pid] - took), sums))
    behind = {t: ends[t] - rng.randint(20_000, 400_000) for t in active[gone] | standby[gone]}
    return GroupState([ClientState(gone, task_offset_sums=behind), *members], frozenset(ids), frozenset(), ends)


def test_a_restarted_lagging_instance_gets_a_plan_that_beats_kip441_everywhere() -> None:
    group, configs = one_lagging(), AssignmentConfigs(num_standby_replicas=1)
    # The least-restore target reshuffles caught-up actives: more moves than KIP-441's end state.
    least_restore = plan_target(group, configs)
    settled = settled_assignment(group, configs)
    owners = previous_owners(group)

    def moves(target: dict[TaskId, str]) -> int:
        return sum(1 for t, p in target.items() if t in owners and p not in owners[t])

    assert moves(least_restore.active_owners()) > moves(settled.active_owners())
    plan = plan_group(group, configs)
    kip441 = simulate(Scenario("kip441", group, configs, max_rounds=500))
    assert kip441.converged
    assert plan.target != settled  # the planner's own plan, not the fallback to KIP-441's end state
    assert plan.cost.moves <= kip441.total_moves
    assert plan.cost.warmups <= kip441.total_warmups
    assert plan.cost.rounds <= len(kip441.rounds)
    assert plan.cost.restore_offsets < kip441.total_restored_offsets / 10


@given(cases(max_clients=8, max_tasks=60))
def test_targets_within_moves_move_no_more_than_allowed(case: Case) -> None:
    lags = LagIndex.of(case.group, case.configs)
    owners = previous_owners(case.group)
    bound = sum(
        1
        for t, p in settled_assignment(case.group, case.configs).active_owners().items()
        if p not in owners.get(t, frozenset()) and t in owners
    )
    for target in targets_within_moves(case.group, case.configs, lags, bound):
        moved = sum(1 for t, p in target.active_owners().items() if t in owners and p not in owners[t])
        assert moved <= bound
