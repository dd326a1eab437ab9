"""The broker-side streams assignment model (KIP-1071): stickiness, staged warmups, validity and convergence."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assignor import (
    LATEST_OFFSET,
    AssignmentConfigs,
    ClientState,
    GroupAssignment,
    GroupState,
    Role,
    TaskId,
)
from assignor.invariants import balance_violations, validity_violations
from assignor.simulation import MembershipEvent, Scenario, catch_up_fully, simulate
from assignor.streams_broker import assign_streams_broker
from jobs.cli.main import main
from tests.support.strategies import Case, build_group, cases

END = 100_000


def tasks(n: int, sub: int = 0) -> list[TaskId]:
    return [TaskId(sub, p) for p in range(n)]


def running(pid: str, owned: list[TaskId], *, standby: tuple[TaskId, ...] = (), capacity: int = 1) -> ClientState:
    """A client running ``owned`` (caught up by definition) and holding caught-up standbys."""
    sums = {t: LATEST_OFFSET for t in owned} | dict.fromkeys(standby, END)
    return ClientState(
        pid,
        capacity=capacity,
        previous_active=frozenset(owned),
        previous_standby=frozenset(standby),
        task_offset_sums=sums,
    )


def group_of(clients: list[ClientState], stateful: list[TaskId], stateless: Sequence[TaskId] = ()) -> GroupState:
    return GroupState(clients, frozenset(stateful), frozenset(stateless), dict.fromkeys(stateful, END))


def owners(assignment: GroupAssignment) -> dict[TaskId, str]:
    return assignment.active_owners()


def bound(group: GroupState, configs: AssignmentConfigs) -> int:
    """The contract's convergence bound after one membership change: ceil(S * (1 + R) / W) + 2."""
    return math.ceil(len(group.stateful_tasks) * (1 + configs.num_standby_replicas) / configs.max_warmup_replicas) + 2


def invalid(assignment: GroupAssignment, group: GroupState, configs: AssignmentConfigs) -> list[str]:
    """V1-V4, except V4's standby count while a staged move holds a standby back (the broker does that too)."""
    found = validity_violations(assignment, group, configs)
    if assignment.probing_rebalance_needed:
        found = [v for v in found if not (v.startswith("V4") and "standbys, expected" in v)]
    return found


def test_a_settled_group_is_returned_unchanged_and_not_probing() -> None:
    t = tasks(9)
    group = group_of([running("a", t[0:3]), running("b", t[3:6]), running("c", t[6:9])], t)
    assignment = assign_streams_broker(group, AssignmentConfigs())
    assert {pid: ca.active for pid, ca in assignment.clients.items()} == {
        "a": frozenset(t[0:3]),
        "b": frozenset(t[3:6]),
        "c": frozenset(t[6:9]),
    }
    assert assignment.count(Role.STANDBY) == assignment.count(Role.WARMUP) == 0
    assert not assignment.probing_rebalance_needed


def test_the_target_keeps_a_lopsided_subtopology_spread_because_it_is_sticky() -> None:
    # KIP-441 would rebalance each subtopology; the broker keeps previous owners while the totals are balanced.
    zero, one = tasks(4, 0), tasks(4, 1)
    group = group_of([running("a", zero), running("b", one)], zero + one)
    assignment = assign_streams_broker(group, AssignmentConfigs())
    assert assignment.clients["a"].active == frozenset(zero)
    assert any(v.startswith("B2") for v in balance_violations(assignment, group))


def test_scale_out_moves_only_what_balance_needs_and_stages_each_move_behind_a_warmup() -> None:
    t = tasks(12)
    group = group_of([running("a", t[0:4]), running("b", t[4:8]), running("c", t[8:12]), ClientState("d")], t)
    configs = AssignmentConfigs(max_warmup_replicas=3)
    before = owners(assign_streams_broker(group_of(list(group.clients[:3]), t), configs))
    first = assign_streams_broker(group, configs)
    assert owners(first) == before  # every task keeps running where it ran
    assert len(first.clients["d"].warmup) == 3
    assert first.probing_rebalance_needed
    second = assign_streams_broker(catch_up_fully(group, first), configs)
    moved = {x for x in t if owners(second)[x] != before[x]}
    assert moved == first.clients["d"].warmup
    assert {pid: len(ca.active) for pid, ca in second.clients.items()} == {"a": 3, "b": 3, "c": 3, "d": 3}
    assert not second.probing_rebalance_needed


def test_warmup_moves_only_after_catch_up_and_the_task_keeps_running_meanwhile() -> None:
    t = tasks(6)
    group = group_of([running("a", t[0:3]), running("b", t[3:6]), ClientState("c")], t)
    configs = AssignmentConfigs()
    first = assign_streams_broker(group, configs)
    warming = first.clients["c"].warmup
    assert warming and not first.clients["c"].active
    assert all(owners(first)[x] in ("a", "b") for x in warming)
    # Nothing caught up between rounds: the broker keeps waiting instead of moving the task cold.
    assert assign_streams_broker(group, configs) == first
    second = assign_streams_broker(catch_up_fully(group, first), configs)
    assert second.clients["c"].active == warming
    assert not second.probing_rebalance_needed


def test_moves_beyond_the_warmup_budget_wait_in_place_without_a_warmup() -> None:
    t = tasks(12)
    group = group_of([running("a", t[0:4]), running("b", t[4:8]), running("c", t[8:12]), ClientState("d")], t)
    first = assign_streams_broker(group, AssignmentConfigs(max_warmup_replicas=1))
    assert sum(len(ca.warmup) for ca in first.clients.values()) == 1
    assert not first.clients["d"].active
    assert first.probing_rebalance_needed


def test_a_departed_member_s_tasks_go_to_the_survivors_at_once() -> None:
    t = tasks(6)
    before = group_of([running("a", t[0:2]), running("b", t[2:4]), running("c", t[4:6])], t)
    group = GroupState(
        before.clients[:2], before.stateful_tasks, before.stateless_tasks, before.changelog_end_offset_sums
    )
    assignment = assign_streams_broker(group, AssignmentConfigs())
    assert set(owners(assignment)) == set(t)
    assert assignment.clients["a"].active >= frozenset(t[0:2])
    assert assignment.clients["b"].active >= frozenset(t[2:4])
    # No caught-up copy of c's tasks exists, so there is nothing to keep them running on: granted cold.
    assert not assignment.probing_rebalance_needed
    assert not any(ca.warmup for ca in assignment.clients.values())


def test_a_standby_with_room_takes_over_a_departed_member_s_task() -> None:
    t = tasks(4)  # c ran t2 and t3 and left; a holds a caught-up standby of t2
    group = group_of([running("a", t[0:1], standby=(t[2],)), running("b", t[1:2])], t)
    assignment = assign_streams_broker(group, AssignmentConfigs(num_standby_replicas=1))
    assert owners(assignment)[t[2]] == "a"
    assert owners(assignment)[t[3]] == "b"
    assert not assignment.probing_rebalance_needed


def test_a_caught_up_standby_runs_a_departed_member_s_task_while_the_target_warms_up() -> None:
    t = tasks(4)  # a is at its quota, so the lag-blind target sends t2 to b, which has no state for it
    group = group_of([running("a", t[0:2], standby=(t[2],)), running("b", t[3:4], standby=(t[0],))], t)
    assignment = assign_streams_broker(group, AssignmentConfigs(num_standby_replicas=1))
    assert owners(assignment)[t[2]] == "a"
    assert t[2] in assignment.clients["b"].warmup
    assert assignment.probing_rebalance_needed


def test_standbys_never_sit_on_the_active_s_process() -> None:
    t = tasks(6)
    group = group_of([running("a", t[0:2]), running("b", t[2:4]), running("c", t[4:6])], t)
    assignment = assign_streams_broker(group, AssignmentConfigs(num_standby_replicas=2))
    for pid, ca in assignment.clients.items():
        assert not ca.active & ca.standby, pid
        assert ca.standby == frozenset(t) - ca.active
    assert not assignment.probing_rebalance_needed


def test_a_standby_on_the_process_that_keeps_a_waiting_active_is_held_back() -> None:
    # The target gives the moved task's standby to its previous owner, which still runs it while d warms up.
    t = tasks(6)
    group = group_of([running("a", t[0:2]), running("b", t[2:4]), running("c", t[4:6]), ClientState("d")], t)
    configs = AssignmentConfigs(num_standby_replicas=1)
    first = assign_streams_broker(group, configs)
    waiting = {x for ca in first.clients.values() for x in ca.warmup}
    assert waiting
    for x in waiting:
        holder = owners(first)[x]
        assert x not in first.clients[holder].standby
    assert invalid(first, group, configs) == []


def test_more_threads_take_a_bigger_share() -> None:
    t = tasks(12)
    group = group_of([ClientState("big", capacity=3), ClientState("small", capacity=1)], t)
    assignment = assign_streams_broker(group, AssignmentConfigs())
    assert len(assignment.clients["big"].active) == 9
    assert len(assignment.clients["small"].active) == 3


@given(cases(max_clients=12, max_tasks=80), st.randoms(use_true_random=False))
def test_the_result_does_not_depend_on_client_order(case: Case, rng: random.Random) -> None:
    shuffled = list(case.group.clients)
    rng.shuffle(shuffled)
    permuted = GroupState(
        shuffled, case.group.stateful_tasks, case.group.stateless_tasks, case.group.changelog_end_offset_sums
    )
    assert assign_streams_broker(permuted, case.configs) == assign_streams_broker(case.group, case.configs)


@given(cases(max_clients=12, max_tasks=120))
def test_every_assignment_is_valid(case: Case) -> None:
    assignment = assign_streams_broker(case.group, case.configs)
    assert invalid(assignment, case.group, case.configs) == []
    if not assignment.probing_rebalance_needed:
        assignment.validate(case.group, case.configs)


@given(cases(max_clients=10, max_tasks=60))
def test_random_histories_settle_and_then_keep_every_active_in_place(case: Case) -> None:
    # From any history, each round either completes a staged move (its warmup caught up), funds up to W new
    # warmups, or grants cold; staged moves never exceed the stateful tasks, so ceil(S / W) + 2 rounds suffice.
    group, configs = case.group, case.configs
    limit = math.ceil(len(group.stateful_tasks) / configs.max_warmup_replicas) + 2
    for _ in range(limit):
        assignment = assign_streams_broker(group, configs)
        assert invalid(assignment, group, configs) == []
        group = catch_up_fully(group, assignment)
        if not assignment.probing_rebalance_needed:
            break
    assert not assignment.probing_rebalance_needed, f"still probing after {limit} rounds"
    # Fed back, the sticky target keeps every active; standbys may still be re-placed (the broker would not
    # recompute its target at all without a membership change).
    again = assign_streams_broker(group, configs)
    assert again.active_owners() == assignment.active_owners()
    assert not again.probing_rebalance_needed


@st.composite
def settled_groups(draw: st.DrawFn) -> tuple[GroupState, AssignmentConfigs]:
    """A group the broker model has settled (equal capacities, stateful only) and its settings."""
    n_clients = draw(st.integers(2, 8))
    n_subs = draw(st.integers(1, 3))
    partitions = draw(st.lists(st.integers(1, 20), min_size=n_subs, max_size=n_subs))
    configs = AssignmentConfigs(
        max_warmup_replicas=draw(st.integers(1, 4)),
        num_standby_replicas=draw(st.integers(0, 2)),
        acceptable_recovery_lag=draw(st.sampled_from((0, 10_000))),
    )
    start = build_group(
        random.Random(draw(st.integers(0, 2**32 - 1))),
        n_clients,
        partitions,
        [True] * n_subs,
        equal_capacity=True,
        with_history=False,
    )
    settled = simulate(Scenario("settle", start, configs), assign_streams_broker)
    assert settled.converged
    return settled.final_group, configs


@given(settled_groups(), st.sampled_from(("add", "remove")), st.integers(0, 100), st.integers(1, 3))
def test_one_membership_change_converges_within_the_contract_bound(
    settled: tuple[GroupState, AssignmentConfigs], kind: str, pick: int, capacity: int
) -> None:
    # Each staged move costs one warmup, funded W at a time, and completes the round after its warmup caught up;
    # standbys are never staged. So the moves (at most S) take ceil(S / W) + 1 rounds, within ceil(S(1+R)/W) + 2.
    group, configs = settled
    pid = "zz-new" if kind == "add" else group.clients[pick % len(group.clients)].process_id
    event = MembershipEvent(0, "add" if kind == "add" else "remove", pid, capacity=capacity)
    limit = bound(group, configs)
    result = simulate(Scenario(kind, group, configs, events=(event,), max_rounds=limit + 5), assign_streams_broker)
    assert result.converged
    assert len(result.rounds) <= limit
    for r in result.rounds:
        assert invalid(r.assignment, r.group, configs) == [], f"round {r.index}"
    last = result.rounds[-1]
    assert not [v for v in balance_violations(last.assignment, last.group, replicas=False) if v.startswith("B1")]


def test_simulate_command_replays_the_broker_model(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "scale-out-3-to-4", "--assignor", "streams_broker", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[0]["probing_rebalance_needed"] is True
    assert rows[-1]["probing_rebalance_needed"] is False
    assert rows[0]["moves"] == 0 < sum(r["moves"] for r in rows)
