"""extract reads the broker's consumer-group membership into group_members and checks it against the reports: a
live member that does not report, a report whose member has left, a report of a group the broker does not have.
Real Apache Kafka, real consumers as members; the reports stay usable whatever the check finds."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient
from pyspark.sql import SparkSession

from jobs.lakehouse.lake import Lake
from jobs.local.broker import EmbeddedBroker
from jobs.pipeline.extract import run_extract
from jobs.pipeline.intake import (
    GROUP_NOT_ON_BROKER,
    MEMBER_NOT_IN_GROUP,
    MEMBER_NOT_REPORTING,
    MEMBERSHIP_UNKNOWN,
    BrokerGroup,
    BrokerMember,
    Intake,
    Quarantined,
    Report,
    check_membership,
)
from jobs.polling import wait_until
from jobs.settings import Settings
from tests.support.pipeline_kafka import create_topics, fill_changelog, publish_reports, report, stateful_topology

GROUP = "live"
TWENTY_MINUTES_MS = 20 * 60 * 1000


def _consumer(bootstrap: str, name: str) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "client.id": name,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([f"{GROUP}-in0"])
    return consumer


def _broker_members(admin: AdminClient) -> tuple[str, set[str]]:
    description = admin.describe_consumer_groups([GROUP], request_timeout=10)[GROUP].result()
    return description.state.name, {m.member_id for m in description.members}


def _stable_with(admin: AdminClient, consumers: Sequence[Consumer]) -> bool:
    """Polls every consumer (their rebalance callbacks run in poll) and asks the broker whether exactly they form
    the group, settled."""
    for consumer in consumers:
        consumer.poll(0.1)
    ids = {consumer.memberid() for consumer in consumers}
    if None in ids or "" in ids:
        return False
    state, members = _broker_members(admin)
    return state == "STABLE" and members == ids


@pytest.fixture
def consumers(broker: EmbeddedBroker) -> Iterator[list[Consumer]]:
    """Four members of the live group, c1..c4; whichever are still open are closed afterwards."""
    started = [_consumer(broker.bootstrap, f"{GROUP}-c{i}") for i in range(1, 5)]
    open_ones = list(started)
    try:
        yield open_ones
    finally:
        for consumer in open_ones:
            consumer.close()


def test_members_that_do_not_report_and_reports_whose_member_is_gone_are_recorded_and_reports_kept(
    spark: SparkSession, broker: EmbeddedBroker, consumers: list[Consumer], tmp_path: Path
) -> None:
    bootstrap = broker.bootstrap
    settings = Settings(lake_root=tmp_path / "lake", reports_topic="reports", planner_processes=1)
    create_topics(
        bootstrap,
        {"reports": 1, f"{GROUP}-in0": 4, f"{GROUP}-store0-changelog": 4, "ghost-in0": 2, "ghost-store0-changelog": 2},
        compacted=["reports"],
    )
    fill_changelog(bootstrap, f"{GROUP}-store0-changelog", [2, 2, 2, 2])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wait_until(lambda: _stable_with(admin, consumers), 60, "four consumers forming the live group")
    c1, c2, c3, c4 = consumers
    topology = stateful_topology(GROUP, 1)
    now = int(time.time() * 1000)

    def live_report(consumer: Consumer, process_id: str, tasks: list[str], reported_at: int) -> dict[str, object]:
        fields = report(GROUP, process_id, active=tasks, topology=topology, reported_at=reported_at)
        return {**fields, "member_id": consumer.memberid(), "client_id": f"{GROUP}-{process_id}"}

    # c1, c2 and c4 report; c3 never does. c4's report is old and c4 then leaves the group.
    gone_member = c4.memberid()
    publish_reports(
        bootstrap,
        "reports",
        [
            live_report(c1, "p1", ["0_0", "0_1"], now),
            live_report(c2, "p2", ["0_2", "0_3"], now),
            live_report(c4, "p4", [], now - TWENTY_MINUTES_MS),
            report("ghost", "g1", topology=stateful_topology("ghost", 1)),  # a group the broker never saw
        ],
    )
    c4.close()
    consumers.remove(c4)
    wait_until(lambda: _stable_with(admin, consumers), 60, "the live group settled without c4")
    lake = Lake(spark, settings.lake_root)

    result = run_extract(lake, settings, bootstrap)
    snapshot = result.snapshot_id

    # What the broker says, member by member, and which process reports each.
    members = {r["member_id"]: r for r in lake.read("group_members", snapshot).collect()}
    assert set(members) == {c1.memberid(), c2.memberid(), c3.memberid()}
    assert {m: (r["client_id"], r["process_id"]) for m, r in members.items()} == {
        c1.memberid(): (f"{GROUP}-c1", "p1"),
        c2.memberid(): (f"{GROUP}-c2", "p2"),
        c3.memberid(): (f"{GROUP}-c3", None),
    }
    assert sorted(p for r in members.values() for p in r["assigned_partitions"]) == [
        f"{GROUP}-in0-{p}" for p in range(4)
    ]
    assert {(r["group_id"], r["group_state"], r["group_type"], r["partition_assignor"]) for r in members.values()} == {
        (GROUP, "Stable", "Classic", "range")
    }
    assert all(r["host"] and r["coordinator"].startswith("127.0.0.1:") for r in members.values())

    # The disagreements, each with its reason; nothing else.
    checks = lake.read("membership_checks", snapshot).collect()
    assert {(r["code"], r["group_id"], r["member_id"], r["process_id"]) for r in checks} == {
        (MEMBER_NOT_REPORTING, GROUP, c3.memberid(), None),
        (MEMBER_NOT_IN_GROUP, GROUP, gone_member, "p4"),
        (GROUP_NOT_ON_BROKER, "ghost", "g1-m", "g1"),
    }
    by_code = {r["code"]: r for r in checks}
    silent = by_code[MEMBER_NOT_REPORTING]
    assert f"client {GROUP}-c3" in silent["reason"] and "no report names it" in silent["reason"]
    assert silent["client_id"] == f"{GROUP}-c3" and silent["report_key"] is None
    gone = by_code[MEMBER_NOT_IN_GROUP]
    assert gone["reason"].startswith(f"{MEMBER_NOT_IN_GROUP}: the broker lists 3 member(s) in 'live' (Stable)")
    assert gone["report_key"] == f"{GROUP}/p4" and gone["reported_at"] == now - TWENTY_MINUTES_MS
    assert "'ghost'" in by_code[GROUP_NOT_ON_BROKER]["reason"]
    assert (
        dict(result.counts).items()
        >= {
            "broker_members": 3,
            f"membership[{MEMBER_NOT_REPORTING}]": 1,
            f"membership[{MEMBER_NOT_IN_GROUP}]": 1,
            f"membership[{GROUP_NOT_ON_BROKER}]": 1,
        }.items()
    )

    # Reports keep flowing: every report is in the snapshot (p4's flagged stale by age), nothing quarantined.
    kept = {(r["group_id"], r["process_id"]): r["stale"] for r in lake.read("member_reports", snapshot).collect()}
    assert kept == {(GROUP, "p1"): False, (GROUP, "p2"): False, (GROUP, "p4"): True, ("ghost", "g1"): False}
    assert lake.read("quarantine", snapshot).count() == 0


# The cross-check itself, on hand-made broker answers (pure Python).


def _report(process_id: str, member_id: str, reported_at: int = 1_000) -> Report:
    fields = report("g", process_id, topology=stateful_topology("g", 1), reported_at=reported_at)
    fields["member_id"] = member_id
    return Report(f"g/{process_id}", json.dumps(fields), fields)


def _group(*member_ids: str, error: str | None = None) -> BrokerGroup:
    members = tuple(BrokerMember(m, f"client-{m}", "/10.0.0.1", None, ("g-in0-0",)) for m in member_ids)
    return BrokerGroup("g", "Stable", "Classic", "range", "b:9092 (id 1)", members, error)


def test_a_member_whose_report_was_quarantined_says_so() -> None:
    bad = {**_report("p2", "m2").fields, "capacity": 0}
    quarantined = Quarantined("reports", "g/p2", json.dumps(bad), "schema_violation: at capacity: 0 < 1", "g")
    intake = check_membership([_report("p1", "m1")], {"g": _group("m1", "m2")}, ["g"], Intake(quarantine=[quarantined]))
    (finding,) = intake.findings
    assert finding.member_id == "m2" and finding.reason.startswith(MEMBER_NOT_REPORTING)
    assert "its report g/p2 was quarantined (schema_violation)" in finding.reason
    assert intake.reporting == {("g", "m1"): "p1"}


def test_two_reports_naming_one_member_the_newest_says_which_process_it_is() -> None:
    reports = [_report("new", "m1", reported_at=2_000), _report("old", "m1", reported_at=1_000)]
    intake = check_membership(reports, {"g": _group("m1")}, ["g"], Intake())
    assert intake.reporting == {("g", "m1"): "new"} and intake.findings == []


def test_a_report_sent_before_joining_and_a_group_the_broker_would_not_describe() -> None:
    intake = check_membership([_report("p1", "")], {"g": _group("m1")}, ["g"], Intake())
    assert [f.reason.split(":")[0] for f in intake.findings] == [MEMBER_NOT_IN_GROUP, MEMBER_NOT_REPORTING]
    assert "names no member id" in intake.findings[0].reason

    denied = _group(error="Broker: Group authorization failed")
    intake = check_membership([_report("p1", "m1")], {"g": denied}, ["g"], Intake())
    (finding,) = intake.findings
    assert finding.member_id is None and finding.reason.startswith(f"{MEMBERSHIP_UNKNOWN}: ")
    assert "authorization" in finding.reason
