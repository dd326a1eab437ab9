"""A runtime leader that cannot read the plans topic: the plan it verified last stays honored while valid; else
every task is assigned (a departed member's too), and the reason says ``plans_unreadable``."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

from assignor import AssignmentConfigs, ClientState, GroupState, TaskId, plan_group
from assignor.protocol.plans import ApprovedPlan
from assignor.runtime.group_assignor import LeaderInputs, MemberView, PlanHonoringAssignor, Subtopology, Topology
from assignor.runtime.protocol import AssignmentInfo, Partition, Subscription
from tests.support.signing import SIGNER, VERIFIER

TOPOLOGY = Topology((Subtopology(0, ("in",), ("chg",)),))
TASKS = frozenset(TaskId(0, p) for p in range(4))
NOW = 1_700_000_000_000


class Cluster:
    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return {0, 1, 2, 3} if topic in ("in", "chg") else None


class Member:
    def __init__(self, member_id: str, process: str, active: Iterable[int]) -> None:
        sums = {TaskId(0, p): -2 for p in active}
        user_data = Subscription(process, previous_active=frozenset(sums), task_offset_sums=sums).encode()
        self.member_id = member_id
        self.metadata = ConsumerProtocolSubscription(version=2, topics=["in"], user_data=user_data)


class Plans:
    """The plans topic as the leader reads it: the records, or the error reading them gives."""

    def __init__(self) -> None:
        self.records: list[bytes] = []
        self.error: Exception | None = None

    def __call__(self, _group: str) -> list[bytes]:
        if self.error is not None:
            raise self.error
        return self.records


def _leader(plans: Plans) -> PlanHonoringAssignor:
    def ends(parts: Sequence[Partition]) -> Mapping[Partition, int]:
        return dict.fromkeys(parts, 0)

    inputs = LeaderInputs("g", AssignmentConfigs(), VERIFIER, ends, plans, lambda: NOW)
    return PlanHonoringAssignor(TOPOLOGY, MemberView("leader"), inputs)


def _infos(result: Mapping[str, object]) -> dict[str, AssignmentInfo]:
    return {m: AssignmentInfo.decode(a.user_data) for m, a in result.items()}  # type: ignore[attr-defined]


def test_unreadable_plans_without_a_verified_plan_assign_a_departed_members_tasks() -> None:
    plans = Plans()
    plans.error = PermissionError("TOPIC_AUTHORIZATION_FAILED: not authorized to read _rebalance_plans")
    leader = _leader(plans)
    # pc ran 2 and 3 and is gone: the survivors must get them, not keep only what they had.
    infos = _infos(leader.assign(Cluster(), [Member("m-a", "pa", [0]), Member("m-b", "pb", [1])]))
    held = {t for info in infos.values() for t in info.active_tasks}
    assert held == TASKS
    assert all(i.plan_id is None for i in infos.values())
    assert all((i.fallback_reason or "").startswith("plans_unreadable: PermissionError: ") for i in infos.values())


def test_unreadable_plans_keep_the_plan_verified_last() -> None:
    clients = [ClientState("pa", previous_active=frozenset({TaskId(0, 0), TaskId(0, 1)})), ClientState("pb")]
    planned = plan_group(GroupState(clients, TASKS, frozenset(), dict.fromkeys(TASKS, 0)), AssignmentConfigs())
    plan = ApprovedPlan(
        "plan-1", "g", "s", NOW - 10, NOW + 600_000, "alice", NOW - 5, AssignmentConfigs(), planned.target,
        tuple(planned.move_order),
    )  # fmt: skip
    plans = Plans()
    plans.records = [json.dumps(plan.to_record(SIGNER)).encode()]
    leader = _leader(plans)
    members = [Member("m-a", "pa", [0, 1]), Member("m-b", "pb", [2, 3])]
    assert all(i.plan_id == "plan-1" for i in _infos(leader.assign(Cluster(), members)).values())
    plans.error = TimeoutError("reading _rebalance_plans to its end took longer than 30 s")
    infos = _infos(leader.assign(Cluster(), members))
    assert all(i.plan_id == "plan-1" for i in infos.values())
    assert all((i.fallback_reason or "").startswith("plans_unreadable: TimeoutError") for i in infos.values())


def test_unreadable_end_offsets_keep_each_members_tasks_and_place_a_departed_members() -> None:
    def ends(_parts: Sequence[Partition]) -> Mapping[Partition, int]:
        raise TimeoutError("list_offsets timed out")

    inputs = LeaderInputs("g", AssignmentConfigs(), VERIFIER, ends, Plans(), lambda: NOW)
    leader = PlanHonoringAssignor(TOPOLOGY, MemberView("leader"), inputs)
    infos = _infos(leader.assign(Cluster(), [Member("m-a", "pa", [0]), Member("m-b", "pb", [1])]))
    assert TaskId(0, 0) in infos["m-a"].active_tasks and TaskId(0, 1) in infos["m-b"].active_tasks
    assert {t for info in infos.values() for t in info.active_tasks} == TASKS
    assert any(info.next_probing_rebalance_ms is not None for info in infos.values())  # a retry soon
