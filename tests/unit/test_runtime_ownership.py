"""KIP-429 ownership: a member's subscription claims the partitions the group gave it, not those its tasks were
meant to have. A partition withheld from it (its old owner had to revoke it first) is not claimed, or the leader
would wait for a revocation that never comes and leave the partition unassigned."""

from __future__ import annotations

from typing import Any, cast

from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

from assignor import TaskId
from assignor.assignment import GroupAssignment
from assignor.protocol.decision import LeaderDecision
from assignor.runtime.group_assignor import LeaderInputs, MemberView, PlanHonoringAssignor, Subtopology, Topology
from assignor.runtime.protocol import AssignmentInfo

TOPOLOGY = Topology((Subtopology(0, ("in",), ("chg",)),))


def _given(partitions: list[int], user_data: bytes) -> ConsumerProtocolAssignment:
    return ConsumerProtocolAssignment(version=0, assigned_partitions=[("in", partitions)], user_data=user_data)


def _claimed(assignor: PlanHonoringAssignor) -> list[tuple[str, int]]:
    subscription: Any = assignor.metadata(["in"])
    return [(tp.topic, p) for tp in subscription.owned_partitions for p in tp.partitions]


def test_a_member_claims_only_the_partitions_it_was_given() -> None:
    member = MemberView("p1")
    assignor = PlanHonoringAssignor(TOPOLOGY, member, cast(LeaderInputs, None))  # member side: no leader inputs
    assert _claimed(assignor) == []
    info = AssignmentInfo(active_tasks={TaskId(0, 0): (("in", 0),), TaskId(0, 1): (("in", 1),)})
    # Task 0_0 is this member's now, but its partition is withheld until the old owner revokes it.
    assignor.on_assignment(
        ConsumerProtocolAssignment(version=0, assigned_partitions=[("in", [1])], user_data=info.encode()), 4
    )
    assert _claimed(assignor) == [("in", 1)]
    assignor.on_assignment(
        ConsumerProtocolAssignment(version=0, assigned_partitions=[("in", [0, 1])], user_data=info.encode()), 5
    )
    assert _claimed(assignor) == [("in", 0), ("in", 1)]


def test_unreadable_user_data_still_records_what_was_given() -> None:
    member = MemberView("p1")
    assignor = PlanHonoringAssignor(TOPOLOGY, member, cast(LeaderInputs, None))
    assignor.on_assignment(
        ConsumerProtocolAssignment(version=0, assigned_partitions=[("in", [2])], user_data=b"\xff"), 3
    )
    assert _claimed(assignor) == [("in", 2)] and member.rejoin_requested


def test_a_plan_check_asks_once_per_new_record_and_only_of_a_member_that_has_led() -> None:
    view = MemberView(process_id="p1")
    assert view.plan_changed(b"plan-1") is None  # never led: the leader checks, not this member
    view.decisions.append(LeaderDecision(GroupAssignment({}), None, None))
    view.plan_seen = None  # the leader read the plans topic in its rebalance: nothing for the group
    assert view.plan_changed(None) is False  # still nothing: no rebalance
    assert view.plan_changed(b"plan-1") is True  # published since: one rebalance
    assert view.plan_changed(b"plan-1") is False  # told once, even if another member leads the next rebalance
    assert view.plan_changed(None) is True  # withdrawn (a tombstone folds to None): the leader must hear of it
