"""Property tests of the KIP-441 baseline over random groups: validity, H1, stability, determinism, balance."""

from __future__ import annotations

import math
import random

from hypothesis import given

from assignor import AssignmentConfigs, ClientState, GroupAssignment, GroupState, assign_high_availability
from assignor.invariants import balance_violations, h1_violations, k1_violations, validity_violations
from tests.support.strategies import Case, cases, caught_up_feedback, replica_balance_feasible


def converge(group: GroupState, configs: AssignmentConfigs, limit: int) -> tuple[GroupState, GroupAssignment, int]:
    """Feed assignments back with every holder caught up until no probing is needed; return the last round."""
    for rounds in range(1, limit + 1):
        assignment = assign_high_availability(group, configs)
        assert validity_violations(assignment, group, configs) == []
        assert h1_violations(assignment, group, configs) == []
        assert k1_violations(assignment, group, configs) == []  # Kafka's assignor never drops a caught-up copy
        if not assignment.probing_rebalance_needed:
            return group, assignment, rounds
        group = caught_up_feedback(group, assignment)
    raise AssertionError(f"no convergence within {limit} rounds")


def bound(group: GroupState, configs: AssignmentConfigs) -> int:
    """The contract's convergence bound: ceil(S * (1 + R) / W) + 2."""
    s = len(group.stateful_tasks)
    return math.ceil(s * (1 + configs.num_standby_replicas) / configs.max_warmup_replicas) + 2


@given(cases())
def test_every_assignment_is_valid_and_high_availability(case: Case) -> None:
    assignment = assign_high_availability(case.group, case.configs)
    assert validity_violations(assignment, case.group, case.configs) == []
    assert h1_violations(assignment, case.group, case.configs) == []
    assert k1_violations(assignment, case.group, case.configs) == []


@given(cases())
def test_validate_accepts_what_the_assignor_returns(case: Case) -> None:
    assign_high_availability(case.group, case.configs).validate(case.group, case.configs)


@given(cases())
def test_converged_assignment_is_stable_when_fed_back(case: Case) -> None:
    group, final, _ = converge(case.group, case.configs, limit=bound(case.group, case.configs) + 50)
    again = assign_high_availability(caught_up_feedback(group, final), case.configs)
    assert again == final
    assert not again.probing_rebalance_needed


@given(cases(tags=False))
def test_converged_assignment_is_balanced(case: Case) -> None:
    group, final, _ = converge(case.group, case.configs, limit=bound(case.group, case.configs) + 50)
    assert balance_violations(final, group, replicas=replica_balance_feasible(group, case.configs)) == []


@given(cases(equal_capacity=True, tags=False))
def test_converged_assignment_balances_standbys_for_equal_capacities(case: Case) -> None:
    group, final, _ = converge(case.group, case.configs, limit=bound(case.group, case.configs) + 50)
    assert balance_violations(final, group, replicas=True) == []


@given(cases(tags=True))
def test_rack_tags_never_break_balance(case: Case) -> None:
    group, final, _ = converge(case.group, case.configs, limit=bound(case.group, case.configs) + 50)
    assert balance_violations(final, group, replicas=replica_balance_feasible(group, case.configs)) == []


@given(cases())
def test_converges_from_any_state_within_the_contract_bound(case: Case) -> None:
    _, _, rounds = converge(case.group, case.configs, limit=bound(case.group, case.configs))
    assert rounds <= bound(case.group, case.configs)


@given(cases())
def test_same_output_whatever_the_input_order(case: Case) -> None:
    rng = random.Random(len(case.group.clients))
    expected = assign_high_availability(case.group, case.configs)
    shuffled_clients = []
    for client in rng.sample(list(case.group.clients), len(case.group.clients)):
        sums = list(client.task_offset_sums.items())
        rng.shuffle(sums)
        shuffled_clients.append(
            ClientState(
                process_id=client.process_id,
                capacity=client.capacity,
                previous_active=frozenset(rng.sample(sorted(client.previous_active), len(client.previous_active))),
                previous_standby=client.previous_standby,
                task_offset_sums=dict(sums),
                client_tags=client.client_tags,
            )
        )
    stateful = sorted(case.group.stateful_tasks)
    rng.shuffle(stateful)
    shuffled = GroupState(
        shuffled_clients,
        frozenset(stateful),
        case.group.stateless_tasks,
        dict(reversed(list(case.group.changelog_end_offset_sums.items()))),
    )
    assert assign_high_availability(shuffled, case.configs) == expected
