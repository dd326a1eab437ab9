"""plan_target is optimal: brute force over every balanced target of small groups agrees.

(plan_group follows it unless that would be worse than KIP-441's end state on some metric; see planner.py.)

Independent of the planner's model: enumerate every per-(client, subtopology) count matrix the
contract's B1 and B2 allow, solve each exactly with the Hungarian method over count slots, keep the
lexicographic minimum of (restore offsets, each priced at least 1 off a caught-up client, moves). (Balance
violations are zero for both: balanced
targets always exist.) Standbys are off, so B1 also windows the stateful actives alone.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from fractions import Fraction

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linear_sum_assignment

from assignor import AssignmentConfigs, GroupState, TaskId, plan_group
from assignor.end_state import plan_target
from assignor.lags import LagIndex
from assignor.scenarios import builtin_scenario
from assignor.simulation import simulate
from tests.support.strategies import build_group


def restore(lags: LagIndex, group: GroupState, task: TaskId, pid: str) -> int:
    """Offsets to restore, priced at least 1 on a client that is not caught up, as the planner's objective says: such
    a placement costs a warmup round even with nothing to replay (an unknown position, -3, on an empty log)."""
    if task not in group.stateful_tasks or lags.caught_up(pid, task):
        return 0
    lag = lags.lag(pid, task)
    return max(1, lags.ends.get(task, 0) if lag < 0 else lag)


def moved(group: GroupState, task: TaskId, pid: str) -> int:
    owners = {c.process_id for c in group.clients if task in c.previous_active}
    return 1 if owners and pid not in owners else 0


def class_vectors(total: int, pids: list[str], capacity: dict[str, int]) -> Iterator[dict[str, int]]:
    """Every split of ``total`` over the clients that keeps equal-capacity clients within one (B2)."""
    classes: dict[int, list[str]] = {}
    for pid in pids:
        classes.setdefault(capacity[pid], []).append(pid)
    groups = list(classes.values())

    def split(index: int, left: int) -> Iterator[dict[str, int]]:
        if index == len(groups):
            if left == 0:
                yield {}
            return
        members = groups[index]
        for class_total in range(left + 1):
            base, extra = divmod(class_total, len(members))
            for plus in itertools.combinations(members, extra):
                here = {p: base + (1 if p in plus else 0) for p in members}
                for rest in split(index + 1, left - class_total):
                    yield {**here, **rest}

    yield from split(0, total)


def within_one(counts: dict[str, int], capacity: dict[str, int]) -> bool:
    ratios = [Fraction(counts[p], capacity[p]) for p in counts]
    return max(ratios) - min(ratios) <= 1


def brute_force_best(group: GroupState, configs: AssignmentConfigs) -> tuple[int, int]:
    lags = LagIndex.of(group, configs)
    pids = sorted(c.process_id for c in group.clients)
    capacity = {c.process_id: c.capacity for c in group.clients}
    tasks = sorted(group.all_tasks)
    subs = sorted({t.subtopology for t in tasks})
    by_sub = {s: [t for t in tasks if t.subtopology == s] for s in subs}
    weight = len(tasks) + 1
    best: tuple[int, int] | None = None
    for matrix in itertools.product(*(list(class_vectors(len(by_sub[s]), pids, capacity)) for s in subs)):
        totals = {p: sum(m[p] for m in matrix) for p in pids}
        stateful = {
            p: sum(m[p] for s, m in zip(subs, matrix, strict=True) if by_sub[s][0] in group.stateful_tasks)
            for p in pids
        }
        if not within_one(totals, capacity) or not within_one(stateful, capacity):
            continue
        slots = [(s, p) for s, m in zip(subs, matrix, strict=True) for p in pids for _ in range(m[p])]
        cost = np.full((len(tasks), len(slots)), 1e12)
        for i, task in enumerate(tasks):
            for j, (sub, pid) in enumerate(slots):
                if sub == task.subtopology:
                    cost[i, j] = restore(lags, group, task, pid) * weight + moved(group, task, pid)
        rows, cols = linear_sum_assignment(cost)
        total = int(cost[rows, cols].sum())
        score = (total // weight, total % weight)
        best = score if best is None or score < best else best
    assert best is not None
    return best


def planner_score(group: GroupState, configs: AssignmentConfigs) -> tuple[int, int]:
    lags = LagIndex.of(group, configs)
    owners = plan_target(group, configs).active_owners()
    return (
        sum(restore(lags, group, t, p) for t, p in owners.items()),
        sum(moved(group, t, p) for t, p in owners.items()),
    )


@st.composite
def small_groups(draw: st.DrawFn) -> tuple[GroupState, AssignmentConfigs]:
    n_clients = draw(st.integers(1, 6))
    n_subs = draw(st.integers(1, 2))
    partitions = draw(st.lists(st.integers(1, 12 // n_subs), min_size=n_subs, max_size=n_subs))
    stateful = draw(st.lists(st.booleans(), min_size=n_subs, max_size=n_subs))
    configs = AssignmentConfigs(acceptable_recovery_lag=draw(st.sampled_from((0, 10_000))))
    group = build_group(
        random.Random(draw(st.integers(0, 2**32 - 1))),
        n_clients,
        partitions,
        stateful,
        equal_capacity=draw(st.booleans()),
    )
    return group, configs


@settings(max_examples=40)
@given(small_groups())
def test_plan_target_matches_the_brute_force_optimum(case: tuple[GroupState, AssignmentConfigs]) -> None:
    group, configs = case
    assert planner_score(group, configs) == brute_force_best(group, configs)


def test_scale_out_3_to_4_plans_exactly_3_moves() -> None:
    scenario = builtin_scenario("scale-out-3-to-4")
    group = simulate(scenario).rounds[0].group  # I4 has joined
    plan = plan_group(group, scenario.configs)
    assert plan.cost.moves == 3
    assert plan.cost.rounds == 3  # two probing rebalances (warmups 2 + 1), then the target
    assert plan.max_load_skew_after == 0
    assert {len(ca.active) for ca in plan.target.clients.values()} == {3}
