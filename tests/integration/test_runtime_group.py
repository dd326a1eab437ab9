"""The plan-honoring group assignor on the real group protocol: real broker, real kafka-python members.

Members run as threads of this process (one KafkaConsumer each); the multi-process fleet and the
stateful task runtime are separate (issue 4 continues). Offset sums are what the members report.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

from assignor import LATEST_OFFSET, AssignmentConfigs, ClientState, GroupState, TaskId, plan_group
from assignor.protocol.plans import ApprovedPlan
from assignor.runtime.group_assignor import LeaderInputs, MemberView, PlanHonoringAssignor, Subtopology, Topology
from assignor.runtime.kafka_io import ChangelogEndOffsets, PlanSource
from assignor.runtime.protocol import ErrorCode, Partition
from jobs.local.broker import EmbeddedBroker
from tests.support.runtime_harness import Group, Member, wait_for
from tests.support.signing import FORGER, SIGNER, VERIFIER

TOPOLOGY = Topology((Subtopology(0, ("in-0",), ("chg-0",)),))
TASKS = [TaskId(0, p) for p in range(4)]
END = 50_000
# Kafka completes a rebalance round as soon as every member has rejoined (well under a second here): a
# probing rebalance every 2 s finishes a move soon after its warmup caught up, and leaves the group time to work.
CONFIGS = AssignmentConfigs(probing_rebalance_interval_ms=2_000, acceptable_recovery_lag=100)


def topics(broker: EmbeddedBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    created = admin.create_topics(
        [NewTopic("in-0", 4, 1), NewTopic("chg-0", 4, 1, config={"cleanup.policy": "compact"})]
    )
    for future in created.values():
        future.result(10)


def leader(plan: dict[str, bytes | None]) -> LeaderInputs:
    def ends(parts: Sequence[Partition]) -> Mapping[Partition, int]:
        return dict.fromkeys(parts, END)

    return LeaderInputs("orders", CONFIGS, VERIFIER, ends, lambda g: [plan.get(g)], lambda: int(time.time() * 1000))


def running(view: MemberView) -> MemberView:
    """A member whose actives report LATEST_OFFSET and whose other copies are fully restored."""

    def sums() -> dict[TaskId, int]:
        info = view.info
        if info is None:
            return {}
        out = dict.fromkeys([*info.standby_tasks, *info.warmup_tasks], END)
        out.update(dict.fromkeys(info.active_tasks, LATEST_OFFSET))
        return out

    view.offset_sums = sums
    return view


def tasks_of(member: Member) -> set[TaskId]:
    return set(member.view.info.active_tasks) if member.view.info else set()


def settled(members: Mapping[str, Member], count: int) -> bool:
    """Every member holds its tasks' partitions, each partition once, with no warmup or probing rebalance pending."""
    held = [tp for m in members.values() for tp in m.partitions]
    return (
        len(members) == count
        and all(
            m.view.info and not m.view.info.next_probing_rebalance_ms and not m.view.info.warmup_tasks
            for m in members.values()
        )
        and len(held) == len(set(held)) == 4
        and all({tp.partition for tp in m.partitions} == {t.partition for t in tasks_of(m)} for m in members.values())
    )


def overlapping_owners(
    members: Mapping[str, Member], idle: Mapping[str, tuple[float, float]] | None = None
) -> list[str]:
    """Partitions two members held during overlapping intervals (cooperative must never allow it). ``idle``: a
    member's window without polls (monotonic start, end), in which it holds partitions but processes nothing."""
    end = time.monotonic()
    spans: list[tuple[object, str, float, float]] = []
    for pid, m in members.items():
        for i, (start, parts) in enumerate(m.held):
            stop = m.held[i + 1][0] if i + 1 < len(m.held) else end
            pieces = [(start, stop)]
            if idle and pid in idle:
                quiet_from, quiet_to = idle[pid]
                pieces = [(a, b) for a, b in ((start, min(stop, quiet_from)), (max(start, quiet_to), stop)) if a < b]
            spans.extend((tp, pid, a, b) for tp in parts for a, b in pieces)
    return [
        f"{a[0]} held by {a[1]} and {b[1]}"
        for i, a in enumerate(spans)
        for b in spans[i + 1 :]
        if a[0] == b[0] and a[1] != b[1] and a[2] < b[3] and b[2] < a[3]
    ]


def test_two_members_split_the_tasks_and_their_partitions(broker: EmbeddedBroker) -> None:
    topics(broker)
    with Group(broker.bootstrap, "orders", TOPOLOGY, leader({})) as group:
        for pid in ("p1", "p2"):
            group.add(running(MemberView(pid)))
        wait_for(lambda: settled(group.members, 2), 60, "two members to settle")
        assert all(m.error is None for m in group.members.values())
        assert tasks_of(group.members["p1"]) | tasks_of(group.members["p2"]) == set(TASKS)
        assert all(len(tasks_of(m)) == 2 for m in group.members.values())
        assert all(m.view.info and m.view.info.version == 2 for m in group.members.values())


def test_scale_out_follows_the_signed_plan_warming_up_before_moving(broker: EmbeddedBroker) -> None:
    topics(broker)
    plan: dict[str, bytes | None] = {}
    with Group(broker.bootstrap, "orders", TOPOLOGY, leader(plan)) as group:
        for pid in ("p1", "p2"):
            group.add(running(MemberView(pid)))
        wait_for(lambda: settled(group.members, 2), 60, "two members to settle")
        # The nightly plan for three instances, approved and signed.
        live = [
            ClientState(pid, previous_active=frozenset(tasks_of(m)), task_offset_sums=dict.fromkeys(tasks_of(m), -2))
            for pid, m in group.members.items()
        ]
        planned = plan_group(
            GroupState([*live, ClientState("p3")], frozenset(TASKS), frozenset(), dict.fromkeys(TASKS, END)), CONFIGS
        )
        now = int(time.time() * 1000)
        record = ApprovedPlan(
            "plan-7",
            "orders",
            "snap",
            now,
            now + 600_000,
            "alice",
            now,
            CONFIGS,
            planned.target,
            tuple(planned.move_order),
        ).to_record(SIGNER)
        plan["orders"] = json.dumps(record).encode()
        moving = set(planned.target.clients["p3"].active)
        assert moving
        restored: dict[TaskId, int] = {}
        newcomer = MemberView("p3", offset_sums=lambda: dict(restored))
        group.add(newcomer)
        # First it only warms up (or restores in a standby slot); it processes nothing yet.
        wait_for(lambda: newcomer.info is not None and bool(newcomer.info.warmup_tasks), 60, "warmups on p3")
        assert newcomer.info is not None and not newcomer.info.active_tasks
        assert newcomer.info.plan_id == "plan-7", newcomer.info
        assert not group.members["p3"].partitions
        caught_up_at = time.monotonic()
        restored.update(dict.fromkeys(newcomer.info.warmup_tasks, END))  # the warmups have restored
        restored.update(dict.fromkeys(moving, END - 50))  # within acceptable_recovery_lag
        wait_for(lambda: settled(group.members, 3) and tasks_of(group.members["p3"]) == moving, 90, "the plan")
        first_held = next(t for t, parts in group.members["p3"].held if parts)
        assert first_held >= caught_up_at  # active only once caught up
        assert overlapping_owners(group.members) == []
        assert all(m.view.info and m.view.info.plan_id == "plan-7" for m in group.members.values())


def test_a_plan_with_a_bad_signature_is_not_applied_and_the_reason_is_reported(broker: EmbeddedBroker) -> None:
    topics(broker)
    planned = plan_group(
        GroupState([ClientState("p1"), ClientState("p2")], frozenset(TASKS), frozenset(), dict.fromkeys(TASKS, END)),
        CONFIGS,
    )
    now = int(time.time() * 1000)
    record = ApprovedPlan(
        "plan-x", "orders", "snap", now, now + 600_000, "alice", now, CONFIGS, planned.target, ()
    ).to_record(FORGER)
    with Group(broker.bootstrap, "orders", TOPOLOGY, leader({"orders": json.dumps(record).encode()})) as group:
        for pid in ("p1", "p2"):
            group.add(running(MemberView(pid)))
        wait_for(lambda: settled(group.members, 2), 60, "two members to settle")
        infos = [m.view.info for m in group.members.values()]
        assert all(
            i is not None and i.plan_id is None and (i.fallback_reason or "").startswith("bad_signature: ")
            for i in infos
        )


def test_mixed_versions_work_and_the_group_switches_up_after_the_upgrade(broker: EmbeddedBroker) -> None:
    topics(broker)
    with Group(broker.bootstrap, "orders", TOPOLOGY, leader({})) as group:
        old = running(MemberView("p1", version=1, latest_supported_version=1))
        group.add(old)
        group.add(running(MemberView("p2")))
        wait_for(lambda: settled(group.members, 2), 60, "a mixed group to settle")
        assert all(m.view.info and m.view.info.version == 1 for m in group.members.values())
        with old.lock:
            old.latest_supported_version = 2  # rolled to the new release
        old.request_rejoin()
        wait_for(
            lambda: (
                all(m.view.info and m.view.info.version == 2 for m in group.members.values())
                and old.version == 2
                and settled(group.members, 2)
            ),
            60,
            "the group to switch to version 2",
        )


def test_a_member_newer_than_the_leader_is_probed_and_downgrades(broker: EmbeddedBroker) -> None:
    topics(broker)
    with Group(broker.bootstrap, "orders", TOPOLOGY, leader({})) as group:
        group.add(running(MemberView("p1")))
        wait_for(lambda: settled(group.members, 1), 60, "the first member")
        future = running(MemberView("p2", version=3, latest_supported_version=3))
        group.add(future)
        wait_for(lambda: future.version == 2 and settled(group.members, 2), 60, "the newer member to downgrade")


class _Garbled(PlanHonoringAssignor):
    def metadata(self, topics):  # type: ignore[no-untyped-def]
        good = super().metadata(topics)
        return ConsumerProtocolSubscription(
            version=good.version, topics=good.topics, user_data=b"{not json", owned_partitions=good.owned_partitions
        )


def test_malformed_user_data_gets_an_error_code_and_the_others_keep_working(broker: EmbeddedBroker) -> None:
    topics(broker)
    with Group(broker.bootstrap, "orders", TOPOLOGY, leader({})) as group:
        for pid in ("p1", "p2"):
            group.add(running(MemberView(pid)))
        wait_for(lambda: settled(group.members, 2), 60, "two members to settle")
        group.assignor_factory = _Garbled
        bad = group.add(MemberView("p3"))
        wait_for(lambda: bad.view.last_error_code is ErrorCode.MALFORMED_SUBSCRIPTION, 60, "the leader's error code")
        wait_for(
            lambda: len({tp for pid in ("p1", "p2") for tp in group.members[pid].partitions}) == 4, 60, "all tasks"
        )
        assert not bad.partitions and bad.view.info is None
        assert tasks_of(group.members["p1"]) | tasks_of(group.members["p2"]) == set(TASKS)


def test_the_leader_reads_the_plan_and_end_offsets_from_kafka(broker: EmbeddedBroker) -> None:
    topics(broker)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    created = admin.create_topics([NewTopic("_rebalance_plans", 1, 1, config={"cleanup.policy": "compact"})])
    for future in created.values():
        future.result(10)
    planned = plan_group(
        GroupState([ClientState("p1"), ClientState("p2")], frozenset(TASKS), frozenset(), dict.fromkeys(TASKS, 0)),
        CONFIGS,
    )
    now = int(time.time() * 1000)
    record = ApprovedPlan(
        "plan-k", "orders", "snap", now, now + 600_000, "alice", now, CONFIGS, planned.target, tuple(planned.move_order)
    ).to_record(SIGNER)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("_rebalance_plans", key=b"orders", value=json.dumps(record).encode())
    assert producer.flush(10) == 0
    ends = ChangelogEndOffsets(broker.bootstrap)
    inputs = LeaderInputs(
        "orders",
        CONFIGS,
        VERIFIER,
        ends,
        PlanSource(broker.bootstrap, "_rebalance_plans").records,
        lambda: int(time.time() * 1000),
    )
    try:
        with Group(broker.bootstrap, "orders", TOPOLOGY, inputs) as group:
            for pid in ("p1", "p2"):
                group.add(running(MemberView(pid)))
            wait_for(lambda: settled(group.members, 2), 60, "two members to settle")
            assert all(m.view.info and m.view.info.plan_id == "plan-k" for m in group.members.values())
            for pid, member in group.members.items():
                assert tasks_of(member) == set(planned.target.clients[pid].active)
    finally:
        ends.close()
