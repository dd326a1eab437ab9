"""One measure of restore for plans, baselines and time estimates (LagIndex.owed): offsets a replica replays before
it is caught up. Copies already within acceptable.recovery.lag count nothing anywhere, so the report compares like
with like."""

from __future__ import annotations

from hypothesis import given

from assignor import AssignmentConfigs, ClientState, GroupState, TaskId, assign_high_availability, plan_group
from assignor.baselines import BASELINE_ASSIGNORS, baseline_cost, round_limit
from assignor.lags import LagIndex
from assignor.simulation import Scenario, simulate
from tests.support.strategies import Case, cases

TASKS = (TaskId(0, 0), TaskId(0, 1), TaskId(0, 2), TaskId(0, 3))


def _settled_with_lagging_standbys(lag: int) -> GroupState:
    a, b = frozenset(TASKS[:2]), frozenset(TASKS[2:])
    ends = dict.fromkeys(TASKS, 100_000)
    return GroupState(
        clients=[
            ClientState("a", previous_active=a, previous_standby=b,
                        task_offset_sums={**dict.fromkeys(a, -2), **dict.fromkeys(b, 100_000 - lag)}),
            ClientState("b", previous_active=b, previous_standby=a,
                        task_offset_sums={**dict.fromkeys(b, -2), **dict.fromkeys(a, 100_000 - lag)}),
        ],
        stateful_tasks=frozenset(TASKS),
        changelog_end_offset_sums=ends,
    )  # fmt: skip


def test_caught_up_copies_cost_no_restore_for_the_plan_or_either_baseline() -> None:
    configs = AssignmentConfigs(num_standby_replicas=1)  # acceptable.recovery.lag 10,000
    group = _settled_with_lagging_standbys(5_000)
    assert plan_group(group, configs).cost.restore_offsets == 0
    for name in BASELINE_ASSIGNORS:
        assert baseline_cost(group, configs, name).cost.restore_offsets == 0, name
    # Past the acceptable lag the same copies do cost restore, to the baselines as to a plan's own measure.
    lagging = _settled_with_lagging_standbys(20_000)
    lags = LagIndex.of(lagging, configs)
    assert lags.owed("a", TASKS[2]) == 20_000 and lags.owed("a", TASKS[0]) == 0


@given(cases())
def test_a_baselines_restore_covers_what_its_final_replicas_owed_at_the_start(case: Case) -> None:
    # A replica's state moves only while it is held: each replica of the last round replayed, at its first
    # placement, at least what it owed at the start.
    result = simulate(
        Scenario("p", case.group, case.configs, max_rounds=round_limit(case.group, case.configs)),
        assign_high_availability,
    )
    lags = LagIndex.of(case.group, case.configs)
    final = result.rounds[-1].assignment
    owed = sum(
        lags.owed(pid, t)
        for pid, ca in final.clients.items()
        for t in (ca.active | ca.standby | ca.warmup) & case.group.stateful_tasks
    )
    assert baseline_cost(case.group, case.configs, "kip441").cost.restore_offsets >= owed
