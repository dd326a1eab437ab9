"""Convergence of the baseline under membership changes, replayed by the simulator (contract bound)."""

from __future__ import annotations

import math
import random

from hypothesis import given
from hypothesis import strategies as st

from assignor import AssignmentConfigs, GroupState
from assignor.invariants import balance_violations, h1_violations, validity_violations
from assignor.simulation import FullCatchUp, MembershipEvent, RestoreRate, Scenario, SimulationResult, simulate
from tests.support.strategies import build_group, replica_balance_feasible


def bound(group: GroupState, configs: AssignmentConfigs) -> int:
    s = len(group.stateful_tasks)
    return math.ceil(s * (1 + configs.num_standby_replicas) / configs.max_warmup_replicas) + 2


def check(
    result: SimulationResult, configs: AssignmentConfigs, last_event_round: int, *, full_catch_up: bool = True
) -> None:
    assert result.converged, f"{result.scenario}: not converged after {len(result.rounds)} rounds"
    for r in result.rounds:
        assert validity_violations(r.assignment, r.group, configs) == [], f"round {r.index}"
        assert h1_violations(r.assignment, r.group, configs) == [], f"round {r.index}"
    last = result.rounds[-1]
    replicas = replica_balance_feasible(last.group, configs)
    assert balance_violations(last.assignment, last.group, replicas=replicas) == []
    if full_catch_up:  # the contract's bound assumes every replica catches up between two rebalances
        assert result.rounds_after(last_event_round) <= bound(last.group, configs)


@st.composite
def stable_scenarios(draw: st.DrawFn) -> tuple[GroupState, AssignmentConfigs]:
    """A converged group (equal capacities, so replica balance is always feasible) and its settings."""
    n_clients = draw(st.integers(2, 10))
    n_subs = draw(st.integers(1, 3))
    partitions = draw(st.lists(st.integers(1, 30), min_size=n_subs, max_size=n_subs))
    configs = AssignmentConfigs(
        max_warmup_replicas=draw(st.integers(1, 5)),
        num_standby_replicas=draw(st.integers(0, 2)),
        acceptable_recovery_lag=draw(st.sampled_from((0, 10_000))),
    )
    seed = draw(st.integers(0, 2**32 - 1))
    start = build_group(
        random.Random(seed), n_clients, partitions, [True] * n_subs, equal_capacity=True, with_history=False
    )
    settled = simulate(Scenario("settle", start, configs))
    assert settled.converged
    return settled.final_group, configs


@given(stable_scenarios(), st.integers(1, 3))
def test_adding_an_instance_converges_balanced_within_the_bound(
    stable: tuple[GroupState, AssignmentConfigs], capacity: int
) -> None:
    group, configs = stable
    event = MembershipEvent(0, "add", "zz-new", capacity=capacity)
    result = simulate(Scenario("add", group, configs, events=(event,), max_rounds=bound(group, configs) + 5))
    check(result, configs, 0)
    assert "zz-new" in result.rounds[-1].assignment.clients


@given(stable_scenarios(), st.integers(0, 100))
def test_removing_an_instance_converges_balanced_within_the_bound(
    stable: tuple[GroupState, AssignmentConfigs], pick: int
) -> None:
    group, configs = stable
    victim = group.clients[pick % len(group.clients)].process_id
    events = (MembershipEvent(0, "remove", victim),)
    result = simulate(Scenario("remove", group, configs, events=events, max_rounds=bound(group, configs) + 5))
    check(result, configs, 0)
    assert victim not in result.rounds[-1].assignment.clients


@given(
    stable_scenarios(),
    st.lists(
        st.tuples(st.integers(0, 6), st.sampled_from(("add", "remove", "restart")), st.integers(0, 50), st.booleans()),
        max_size=6,
    ),
)
def test_random_event_sequences_end_balanced_with_every_round_valid(
    stable: tuple[GroupState, AssignmentConfigs], raw_events: list[tuple[int, str, int, bool]]
) -> None:
    group, configs = stable
    members = sorted(c.process_id for c in group.clients)
    events = []
    added = 0
    for at_round, kind, pick, wipe in sorted(raw_events):
        if kind == "add":
            added += 1
            pid = f"new-{added}"
            members.append(pid)
            events.append(MembershipEvent(at_round, "add", pid))
        elif len(members) > 1 and members:
            pid = members[pick % len(members)]
            if kind == "remove":
                members.remove(pid)
                events.append(MembershipEvent(at_round, "remove", pid))
            else:
                events.append(MembershipEvent(at_round, "restart", pid, wipe_state=wipe))
    # Several events may hit one process in the same round; keep the first of each (process, round).
    unique = {(e.process_id, e.at_round): e for e in reversed(events)}
    limit = 10 + bound(group, configs) * (1 + len(unique))
    result = simulate(Scenario("random", group, configs, events=tuple(unique.values()), max_rounds=limit))
    check(result, configs, max((e.at_round for e in unique.values()), default=0))


def test_restore_rate_model_takes_more_rounds_for_bigger_changelogs() -> None:
    rng = random.Random(3)
    configs = AssignmentConfigs(probing_rebalance_interval_ms=60_000)
    group = build_group(rng, 3, [6], [True], equal_capacity=True, with_history=False)
    settled = simulate(Scenario("settle", group, configs)).final_group
    add = (MembershipEvent(0, "add", "zz-new"),)
    fast = simulate(Scenario("fast", settled, configs, add, RestoreRate(10**9)))
    slow = simulate(Scenario("slow", settled, configs, add, RestoreRate(1_000)))
    full = simulate(Scenario("full", settled, configs, add, FullCatchUp()))
    assert fast.converged and slow.converged
    assert len(fast.rounds) == len(full.rounds)
    assert len(slow.rounds) >= len(fast.rounds)
    assert slow.total_restored_offsets == fast.total_restored_offsets == full.total_restored_offsets
    check(slow, configs, 0, full_catch_up=False)
