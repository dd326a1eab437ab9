"""Deferred resolution: while a departed member is within the delay, the others keep their tasks, its tasks fail
over to caught-up copies (or wait for it, when set so), and the leader rebalances at the deadline."""

from __future__ import annotations

import pytest

from assignor import (
    LATEST_OFFSET,
    AssignmentConfigs,
    ClientAssignment,
    ClientState,
    GroupAssignment,
    GroupState,
    TaskId,
)
from assignor.runtime.deferral import DeferralSettings, Departure, defer, pending_departures

T = [TaskId(0, p) for p in range(4)]
CONFIGS = AssignmentConfigs(acceptable_recovery_lag=10, num_standby_replicas=1)
END = 1_000
PREVIOUS = GroupAssignment(
    {
        "a": ClientAssignment(active=frozenset({T[0], T[1]}), standby=frozenset({T[2]})),
        "b": ClientAssignment(active=frozenset({T[2]}), standby=frozenset({T[0]})),
        "c": ClientAssignment(active=frozenset({T[3]}), standby=frozenset({T[1]})),
    }
)


def _group(*clients: ClientState) -> GroupState:
    return GroupState(list(clients), frozenset(T), frozenset(), dict.fromkeys(T, END))


# "a" left. "b" holds a caught-up standby of 0_0; nobody is caught up on 0_1 ("c"'s standby of it lags 500).
WITHOUT_A = _group(
    ClientState("b", previous_active=frozenset({T[2]}), task_offset_sums={T[2]: LATEST_OFFSET, T[0]: END}),
    ClientState("c", previous_active=frozenset({T[3]}), task_offset_sums={T[3]: LATEST_OFFSET, T[1]: 500}),
)
DELAY = DeferralSettings(scheduled_rebalance_max_delay_ms=30_000)


def test_no_delay_keeps_no_place() -> None:
    assert pending_departures(PREVIOUS, WITHOUT_A, {}, 0, DeferralSettings()) == {}


def test_a_departed_member_is_pending_until_its_deadline_or_its_return() -> None:
    pending = pending_departures(PREVIOUS, WITHOUT_A, {}, 1_000, DELAY)
    assert pending == {"a": Departure("a", 1_000, frozenset({T[0], T[1]}))}
    assert pending_departures(None, WITHOUT_A, pending, 30_999, DELAY) == pending
    assert pending_departures(None, WITHOUT_A, pending, 31_000, DELAY) == {}
    back = _group(ClientState("a"), *WITHOUT_A.clients)
    assert pending_departures(None, back, pending, 2_000, DELAY) == {}


@pytest.mark.parametrize("hold", [False, True])
def test_the_others_keep_their_tasks_and_only_the_departed_members_move_or_wait(hold: bool) -> None:
    settings = DeferralSettings(30_000, hold_without_caught_up_copy=hold)
    pending = pending_departures(PREVIOUS, WITHOUT_A, {}, 1_000, settings)
    deferral = defer(PREVIOUS, WITHOUT_A, CONFIGS, pending, 11_000, settings)
    clients = deferral.assignment.clients
    assert T[0] in clients["b"].active and T[0] not in clients["b"].standby  # failed over to its caught-up copy
    assert T[2] in clients["b"].active and T[3] in clients["c"].active  # nobody else moves
    if hold:
        assert deferral.held == {T[1]} and all(T[1] not in ca.active for ca in clients.values())
    else:  # to the most caught-up member
        assert deferral.held == frozenset() and T[1] in clients["c"].active
    assert deferral.assignment.probing_rebalance_needed and deferral.rebalance_in_ms == 20_000


def test_a_negative_delay_is_refused_naming_the_setting() -> None:
    with pytest.raises(ValueError, match="scheduled_rebalance_max_delay_ms"):
        DeferralSettings(-1)
