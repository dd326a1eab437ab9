"""Deferred resolution: while a departed member is within the delay, the others keep their tasks, its tasks fail
over to caught-up copies (or wait for it, when set so), and the leader rebalances at the deadline."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

from assignor import (
    LATEST_OFFSET,
    AssignmentConfigs,
    ClientAssignment,
    ClientState,
    GroupAssignment,
    GroupState,
    TaskId,
)
from assignor.protocol.deferral import DeferralSettings, Departure, defer, pending_departures
from assignor.runtime.group_assignor import LeaderInputs, MemberView, PlanHonoringAssignor
from assignor.runtime.protocol import AssignmentInfo, Partition
from tests.support.signing import VERIFIER
from tests.unit.test_runtime_claims import NOW, TOPOLOGY, Cluster, joining

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


def _leader(delay_ms: int) -> PlanHonoringAssignor:
    def ends(parts: Sequence[Partition]) -> Mapping[Partition, int]:
        return dict.fromkeys(parts, 0)

    inputs = LeaderInputs(
        "g", AssignmentConfigs(), VERIFIER, ends, lambda _: (), lambda: NOW, DeferralSettings(delay_ms)
    )
    return PlanHonoringAssignor(TOPOLOGY, MemberView("leader"), inputs)


def _tasks(result: Mapping[str, ConsumerProtocolAssignment]) -> dict[str, tuple[frozenset[TaskId], int | None]]:
    infos = {m: AssignmentInfo.decode(a.user_data) for m, a in result.items()}
    return {m: (frozenset(i.active_tasks), i.next_probing_rebalance_ms) for m, i in infos.items()}


def test_the_leader_keeps_a_departed_members_place_and_gives_its_tasks_back_on_return() -> None:
    leader = _leader(30_000)
    both = [joining("m-a", "pa", 3, [0, 1]), joining("m-b", "pb", 3, [2, 3])]
    before = _tasks(leader.assign(Cluster(), both))
    away = _tasks(leader.assign(Cluster(), [joining("m-b", "pb", 4, [2, 3])]))
    assert away["m-b"][0] == frozenset(T)  # it keeps 0_2 and 0_3, and 0_0 and 0_1 fail over to it
    assert away["m-b"][1] == NOW + 30_000  # the rebalance at the deadline
    assert sorted(leader.departures) == ["pa"]
    back = _tasks(leader.assign(Cluster(), [joining("m-a2", "pa", -1, []), joining("m-b", "pb", 5, [0, 1, 2, 3])]))
    assert back["m-a2"][0] == before["m-a"][0] and back["m-b"][0] == before["m-b"][0]
    assert leader.departures == {}


def test_without_a_delay_the_leader_defers_nothing() -> None:
    leader = _leader(0)
    leader.assign(Cluster(), [joining("m-a", "pa", 3, [0, 1]), joining("m-b", "pb", 3, [2, 3])])
    alone = _tasks(leader.assign(Cluster(), [joining("m-b", "pb", 4, [2, 3])]))
    assert alone["m-b"] == (frozenset(T), None) and leader.departures == {}


def test_a_fault_while_deferring_never_escapes_the_leader(monkeypatch: pytest.MonkeyPatch) -> None:
    leader = _leader(30_000)
    leader.assign(Cluster(), [joining("m-a", "pa", 3, [0, 1]), joining("m-b", "pb", 3, [2, 3])])

    def broken(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("a bug in the deferral rules")

    monkeypatch.setattr("assignor.runtime.group_assignor.defer", broken)
    alone = _tasks(leader.assign(Cluster(), [joining("m-b", "pb", 4, [2, 3])]))
    assert alone["m-b"][0] == frozenset(T)  # the ordinary decision: every task on the member that is left
    assert leader.departures == {}
