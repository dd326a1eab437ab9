"""Plans topic reader and state reports against the real embedded broker."""

from __future__ import annotations

import json

import jsonschema
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from assignor import AssignmentConfigs, TaskId
from assignor.runtime.group_assignor import MemberView, Subtopology, Topology
from assignor.runtime.kafka_io import ChangelogEndOffsets, PlanSource, ReportPublisher, read_latest_by_key
from assignor.runtime.protocol import AssignmentInfo
from assignor.runtime.reports import build_state_report
from jobs.local.broker import EmbeddedBroker
from schemas import read_json

SCHEMA = read_json("state_report.schema.json")


def compacted(broker: EmbeddedBroker, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1, config={"cleanup.policy": "compact"})]).values():
        future.result(10)


def test_plan_source_returns_the_latest_record_per_group_and_honours_tombstones(broker: EmbeddedBroker) -> None:
    compacted(broker, "_rebalance_plans", 3)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for key, value in [
        (b"orders", b'{"plan_id": "1"}'),
        (b"payments", b'{"plan_id": "2"}'),
        (b"orders", b'{"plan_id": "3"}'),
        (b"payments", None),  # withdrawn
    ]:
        producer.produce("_rebalance_plans", key=key, value=value)
    assert producer.flush(10) == 0
    source = PlanSource(broker.bootstrap, "_rebalance_plans")
    assert source("orders") == b'{"plan_id": "3"}'
    assert source("payments") is None
    assert source("unknown") is None


def test_an_absent_topic_reads_as_empty(broker: EmbeddedBroker) -> None:
    assert read_latest_by_key(broker.bootstrap, "_missing", timeout_s=5) == {}


def test_state_reports_match_the_schema_and_fold_to_the_latest_per_instance(broker: EmbeddedBroker) -> None:
    compacted(broker, "_rebalance_reports", 2)
    topology = Topology((Subtopology(0, ("in-0",), ("chg-0",)), Subtopology(1, ("clicks",))))
    member = MemberView("p1", capacity=2, client_tags={"zone": "a"}, offset_sums=lambda: {TaskId(0, 1): -2})
    member.info = AssignmentInfo(active_tasks={TaskId(0, 1): (("in-0", 1),)}, plan_id="plan-9")
    publisher = ReportPublisher(broker.bootstrap, "_rebalance_reports")
    for generation in (3, 4):
        report = build_state_report(
            "orders",
            member,
            topology,
            member_id="m-1",
            client_id="c",
            host="h",
            generation=generation,
            reported_at=1_700_000_000_000 + generation,
            configs=AssignmentConfigs(num_standby_replicas=1),
        )
        jsonschema.validate(report.to_json(), SCHEMA)
        publisher.publish(report)
    latest = read_latest_by_key(broker.bootstrap, "_rebalance_reports")
    assert list(latest) == [b"orders/p1"]
    folded = json.loads(latest[b"orders/p1"] or b"null")
    assert folded["generation"] == 4
    assert folded["active_tasks"] == ["0_1"] and folded["task_offset_sums"] == {"0_1": -2}
    assert folded["plan_id"] == "plan-9" and folded["topology"]["1"]["stateful"] is False


def test_changelog_end_offsets_are_the_high_watermarks(broker: EmbeddedBroker) -> None:
    compacted(broker, "chg-0", 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(7):
        producer.produce("chg-0", key=f"k{i}".encode(), value=b"v", partition=i % 2)
    assert producer.flush(10) == 0
    ends = ChangelogEndOffsets(broker.bootstrap)
    try:
        assert ends([("chg-0", 0), ("chg-0", 1)]) == {("chg-0", 0): 4, ("chg-0", 1): 3}
    finally:
        ends.close()
