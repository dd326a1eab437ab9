"""extract reads a streams-protocol group (KIP-1071) from the broker's description of it: two reference-app JVMs on
``--group-protocol streams`` against the embedded Kafka 4.4 broker, one standby replica set on the group by
IncrementalAlterConfigs; lags and plan work on it unchanged, and the plan is report-only, with the reason."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # public, not in __all__
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from pyspark.sql import SparkSession
from pyspark.sql import functions as sf

from assignor.runtime.kafka_io import read_latest_by_key
from jobs.lakehouse.lake import Lake
from jobs.local.broker import EmbeddedBroker
from jobs.local.streams_fleet import StreamsFleet, StreamsFleetConfig
from jobs.pipeline.broker_streams import BROKER_STREAMS, BrokerStreamsGroup, parse_reader_output
from jobs.pipeline.extract import run_extract
from jobs.pipeline.extract_streams import SUPERSEDED
from jobs.pipeline.lags import run_lags
from jobs.pipeline.plan import run_plan
from jobs.pipeline.plugin_groups import STREAMS_ASSIGNOR_MISSING
from jobs.pipeline.publish import run_publish
from jobs.pipeline.report_only import STREAMS_PROTOCOL_REASON
from jobs.pipeline.streams_reader import read_streams_groups_lines
from jobs.polling import wait_until
from jobs.report import build_report
from jobs.report.approval import summary_markdown
from jobs.report.gaps import reporting_gaps
from jobs.settings import Kip441Settings, Settings
from tests.support.kafka_isolation import delete_streams_group
from tests.support.pipeline_kafka import create_topics, publish_reports, stateful_topology
from tests.support.pipeline_kafka import report as plugin_report
from tests.support.signing import SIGNER, key_file

log = logging.getLogger(__name__)
APP = "refapp-streams-protocol"
PARTITIONS = 4
RECORDS = 2_000


def _group(bootstrap: str) -> BrokerStreamsGroup | None:
    read = parse_reader_output(read_streams_groups_lines(bootstrap, {}, 10.0), int(time.time() * 1000))
    assert read.complete and not read.quarantine, read.quarantine
    return next((g for g in read.groups if g.group_id == APP), None)


def _tasks(group: BrokerStreamsGroup | None, role: str) -> list[str]:
    return sorted(t for _, v in (group.reports if group else ()) for t in json.loads(v)[role])


@pytest.fixture
def streams_group(broker: EmbeddedBroker, tmp_path: Path) -> Iterator[StreamsFleet]:
    """Two instances on the streams protocol share the tasks; then the group gets one standby replica."""
    config = StreamsFleetConfig(
        bootstrap=broker.bootstrap,
        root=tmp_path / "fleet",
        application_id=APP,
        partitions=PARTITIONS,
        plugin=False,
        group_protocol="streams",
    )
    create_topics(broker.bootstrap, {"reports": 1}, compacted=["reports"])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with StreamsFleet(config) as fleet:
        fleet.produce(RECORDS, keys=RECORDS)
        fleet.start("a")
        fleet.start("b")
        every_task = sorted(config.tasks)

        def running(role: str, expected: list[str]) -> bool:
            assert all(i.alive for i in fleet.members()), [i.log_tail() for i in fleet.members()]
            return _tasks(_group(broker.bootstrap), role) == expected

        wait_until(lambda: running("active_tasks", every_task), 120, "both instances running every task", poll_s=1)
        wait_until(lambda: fleet.changelog_records() >= RECORDS, 120, "the input counted", poll_s=1)
        standbys = ConfigEntry("streams.num.standby.replicas", "1", incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ResourceType.GROUP, APP, incremental_configs=[standbys])
        admin.incremental_alter_configs([resource])[resource].result(30)
        # The broker rebalances on an assignment config change: each stateful task gets a standby elsewhere.
        stateful = sorted(config.stateful_tasks)
        wait_until(lambda: running("standby_tasks", stateful), 120, "a standby of every stateful task", poll_s=1)
        yield fleet
        fleet.close()
        delete_streams_group(admin, APP)


def test_extract_reads_a_streams_protocol_group_and_its_plan_is_report_only(
    spark: SparkSession, broker: EmbeddedBroker, streams_group: StreamsFleet, tmp_path: Path
) -> None:
    fleet = streams_group
    settings = Settings(
        lake_root=tmp_path / "lake",
        reports_topic="reports",
        plans_topic="plans",
        plan_signing_key_file=key_file(tmp_path),
        plan_key_id=SIGNER.key_id,
        planner_processes=1,
        kip441=Kip441Settings(num_standby_replicas=1),  # the group's own, until reports carry per-group settings
        # The shared broker has our assignor; as if it had not (tests/system/test_streams_protocol_plan.py: with it).
        broker_assignor="",
    )
    lake = Lake(spark, settings.lake_root)
    processes = {i.process_id for i in fleet.members()}
    config = fleet.config

    # The application ran our plugin on the classic protocol before it switched: its last report is still there.
    topology = stateful_topology(APP, 1)
    publish_reports(
        broker.bootstrap, "reports", [plugin_report(APP, "before-switch", active=["0_0"], topology=topology)]
    )

    snapshot = run_extract(lake, settings, broker.bootstrap).snapshot_id
    assert snapshot is not None

    # Members: one report per Kafka Streams client, read from the broker; the plugin's old report is set aside.
    reports = {r["process_id"]: r for r in lake.read("member_reports", snapshot).collect() if r["group_id"] == APP}
    assert set(reports) == processes
    (quarantined,) = lake.read("quarantine", snapshot).collect()
    assert quarantined["reason"].startswith(f"{SUPERSEDED}: group {APP} runs the streams protocol")
    # The report names the group: its plugin does nothing now, and the brokers lack our assignor.
    (gap,) = reporting_gaps(lake, snapshot)
    assert (gap.group_id, gap.code) == (APP, STREAMS_ASSIGNOR_MISSING)
    assert "the Kafka Streams plugin reported for this group" in gap.reason
    assert {(r["origin"], r["capacity"], r["stale"]) for r in reports.values()} == {(BROKER_STREAMS, 1, False)}
    # Tasks: every task active once, every stateful task's standby on the other instance.
    actives = sorted(t for r in reports.values() for t in r["active_tasks"])
    assert actives == sorted(config.tasks)
    for r in reports.values():
        assert set(r["standby_tasks"]) == config.stateful_tasks - set(r["active_tasks"])
        # Offsets: stateful tasks only; actives caught up (-2), standbys as the broker last heard (-3 until then).
        sums = dict(r["task_offset_sums"])
        assert set(sums) == config.stateful_tasks
        assert all(sums[t] == -2 for t in r["active_tasks"] if t in config.stateful_tasks)
        assert all(sums[t] == -3 or sums[t] >= 0 for t in r["standby_tasks"])
    # Topology: as the broker holds it (the repartition topic is subtopology 1's source).
    topology = json.loads(next(iter(reports.values()))["topology"])
    assert topology == {
        "0": {"source_topics": [config.input_topic], "changelog_topics": [], "stateful": False},
        "1": {
            "source_topics": [config.repartition_topic],
            "changelog_topics": [config.changelog_topic],
            "stateful": True,
        },
    }
    # End offsets come from the changelog topic itself.
    changelogs = lake.read("changelog_offsets", snapshot).where(sf.col("group_id") == APP).collect()
    assert {(r["topic"], r["partition"]) for r in changelogs} == {
        (config.changelog_topic, p) for p in range(PARTITIONS)
    }
    assert sum(r["end_offset"] for r in changelogs) >= RECORDS
    # Settings: the group's standby replica count, as the broker holds it.
    group = _group(broker.bootstrap)
    assert group is not None and group.settings.num_standby_replicas == 1
    assert group.settings.assignor_name == group.assignor_name == "sticky"
    assert {json.loads(v)["settings"]["num_standby_replicas"] for _, v in group.reports} == {1}

    # lags and plan run unchanged on it.
    run_lags(lake, settings, snapshot)
    lags = lake.read("task_lags", snapshot).where(sf.col("group_id") == APP).collect()
    assert {r["task_id"] for r in lags} == config.stateful_tasks
    assert all(r["caught_up"] for r in lags if r["offset_sum"] == -2)
    run_plan(lake, settings, snapshot)
    plan = lake.read("plans", snapshot).where(sf.col("group_id") == APP).first()
    assert plan is not None and plan["status"] in ("PENDING", "NOOP"), plan

    # The report and the approval page say, for this group, why no plan can reach it.
    report = build_report(lake, snapshot)
    (row,) = [r for r in report.rows if r.group_id == APP]
    assert row.report_only == STREAMS_PROTOCOL_REASON
    assert "report-only: streams protocol (KIP-1071)" in summary_markdown(report.fleet, report.rows)

    # Approved anyway, it is held, with the reason, and nothing is sent.
    now = int(time.time() * 1000)
    approved = lake.read("plans").where(sf.col("plan_id") == plan["plan_id"])
    lake.merge(
        "plans",
        approved.withColumn("status", sf.lit("APPROVED"))
        .withColumn("approved_by", sf.lit("alice"))
        .withColumn("approved_at", sf.lit(now)),
        update=["status", "approved_by", "approved_at"],
    )
    published = run_publish(lake, settings, broker.bootstrap, snapshot_id=snapshot)
    assert dict(published.counts) == {"report_only": 1}
    held = lake.read("plans").where(sf.col("plan_id") == plan["plan_id"]).first()
    assert held is not None and (held["status"], held["reason"]) == ("HELD", STREAMS_PROTOCOL_REASON)
    assert read_latest_by_key(broker.bootstrap, settings.plans_topic) == {}
    assert all(i.alive for i in fleet.members())
