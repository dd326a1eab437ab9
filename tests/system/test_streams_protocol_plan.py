"""A streams-protocol group (KIP-1071) steered end to end on real parts: the embedded Kafka 4.4 broker with our
broker-side assignor (KIP-1357) installed and trusting the test key, two reference-app JVMs on
``--group-protocol streams``, and every pipeline stage in-process (extract → lags → plan → validate → approve →
publish). Publish selects our assignor for the group and triggers an assignment; the group then runs the plan's
target. The plan adds a standby of every stateful task, which the group's own config (no standbys) would not; the
members' restore listeners report the standbys' loading, which observe records as what the plan restored."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType  # type: ignore[attr-defined]
from pyspark.sql import SparkSession
from pyspark.sql import functions as sf

from assignor import GroupAssignment
from assignor.runtime.kafka_io import read_latest_by_key
from jobs.kafka_topics import TopicSpec, ensure_topics
from jobs.lakehouse.lake import Lake
from jobs.local.broker import BrokerAssignor, EmbeddedBroker, broker_assignor_jar
from jobs.local.streams_fleet import StreamsFleet, StreamsFleetConfig, standby_restored_records
from jobs.pipeline.approve import run_approve
from jobs.pipeline.broker_streams import parse_reader_output
from jobs.pipeline.extract import run_extract
from jobs.pipeline.lags import run_lags
from jobs.pipeline.observe import run_observe
from jobs.pipeline.plan import run_plan
from jobs.pipeline.plugin_groups import STREAMS_ASSIGNOR_MISSING
from jobs.pipeline.publish import run_publish
from jobs.pipeline.report_only import STREAMS_PROTOCOL_REASON
from jobs.pipeline.streams_assignor import ASSIGNOR_CONFIG, ASSIGNOR_NAME, SOURCE_SELECTED, TRIGGER_CONFIG
from jobs.pipeline.streams_reader import read_streams_groups_lines
from jobs.pipeline.targets import plan_targets
from jobs.pipeline.validate import run_validate
from jobs.polling import wait_until
from jobs.report import build_report
from jobs.report.gaps import gaps_markdown, reporting_gaps
from jobs.settings import Kip441Overrides, Settings
from tests.support.restored_reports import restored_reports, restored_since
from tests.support.signing import SIGNER, VERIFY_KEYS, key_file

APP = "streams-planned"
PARTITIONS = 4
RECORDS = 2_000
PLANS, REPORTS, DECISIONS = "plans", "reports", "_rebalance_assignor_decisions"


def live(bootstrap: str) -> tuple[int, dict[str, tuple[set[str], set[str]]]]:
    """The group's epoch and, per process id, its (active, standby) tasks as the broker describes them."""
    read = parse_reader_output(read_streams_groups_lines(bootstrap, {}, 10.0), int(time.time() * 1000))
    group = next((g for g in read.groups if g.group_id == APP), None)
    if group is None:
        return -1, {}
    out = {}
    for _, value in group.reports:
        r = json.loads(value)
        out[r["process_id"]] = (set(r["active_tasks"]), set(r["standby_tasks"]))
    return group.group_epoch, out


def at_target(bootstrap: str, target: GroupAssignment) -> bool:
    _, now = live(bootstrap)
    want = {p: ({str(t) for t in c.active}, {str(t) for t in c.standby}) for p, c in target.clients.items()}
    return now == want


def group_config(bootstrap: str, name: str) -> str | None:
    """The group config's value as the broker describes it (its default when not set on the group)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.GROUP, APP)
    return str(admin.describe_configs([resource])[resource].result(30)[name].value or "") or None


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    """Its own broker: our assignor verifying with the test key and reading this test's plans topic."""
    assignor = BrokerAssignor(broker_assignor_jar(), VERIFY_KEYS.render(), PLANS)
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("kafka"), assignor=assignor) as running:
        yield running


@pytest.fixture(scope="module")
def fleet(broker: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[StreamsFleet]:
    """Two instances on the streams protocol share every task; the group has no standbys."""
    config = StreamsFleetConfig(
        bootstrap=broker.bootstrap,
        root=tmp_path_factory.mktemp("fleet"),
        application_id=APP,
        partitions=PARTITIONS,
        plugin=False,
        group_protocol="streams",
        reports_topic=REPORTS,  # where each member's restore listener publishes what it restored
    )
    with StreamsFleet(config) as running:
        running.produce(RECORDS, keys=RECORDS)
        running.start("a")
        running.start("b")
        every = sorted(config.tasks)

        def settled() -> bool:
            assert all(i.alive for i in running.members()), [i.log_tail() for i in running.members()]
            _, now = live(broker.bootstrap)
            return len(now) == 2 and sorted(t for a, _ in now.values() for t in a) == every

        wait_until(settled, 180, "both instances running every task", poll_s=1)
        wait_until(lambda: running.changelog_records() >= RECORDS, 120, "the input counted", poll_s=1)
        yield running


def settings_for(root: Path, **extra: object) -> Settings:
    return Settings(
        lake_root=root / "lake",
        reports_topic=REPORTS,
        plans_topic=PLANS,
        plan_signing_key_file=key_file(root),
        plan_key_id=SIGNER.key_id,
        planner_processes=1,
        # One standby per stateful task where the group runs none: an explicit override, so the plan changes it.
        kip441_overrides=Kip441Overrides.fleet(num_standby_replicas=1),
        **extra,  # type: ignore[arg-type]
    )


def plan_and_approve(lake: Lake, settings: Settings, bootstrap: str) -> str:
    snapshot = run_extract(lake, settings, bootstrap).snapshot_id
    assert snapshot is not None
    run_lags(lake, settings, snapshot)
    run_plan(lake, settings, snapshot)
    run_validate(lake, settings, snapshot)
    run_approve(lake, settings, by="tester", snapshot_id=snapshot)
    row = lake.read("plans", snapshot).where(sf.col("group_id") == APP).first()
    assert row is not None and row["status"] == "APPROVED", row
    return snapshot


def test_without_our_assignor_on_the_brokers_the_plan_stays_held(
    spark: SparkSession, broker: EmbeddedBroker, fleet: StreamsFleet, tmp_path: Path
) -> None:
    # RBP_BROKER_ASSIGNOR empty says the brokers lack it (test_broker.py reads a broker that really lacks it).
    settings = settings_for(tmp_path, broker_assignor="")
    lake = Lake(spark, settings.lake_root)
    snapshot = plan_and_approve(lake, settings, broker.bootstrap)
    assert dict(run_publish(lake, settings, broker.bootstrap, snapshot_id=snapshot).counts) == {"report_only": 1}
    held = lake.read("plans", snapshot).where(sf.col("group_id") == APP).first()
    assert held is not None and (held["status"], held["reason"]) == ("HELD", STREAMS_PROTOCOL_REASON)
    assert group_config(broker.bootstrap, ASSIGNOR_CONFIG) == "sticky"
    # The report and the approval page name the group and why no plan can reach it.
    (shown,) = [r for r in build_report(lake, snapshot).rows if r.group_id == APP]
    assert shown.report_only == STREAMS_PROTOCOL_REASON and not shown.steered_streams
    assert [g.code for g in reporting_gaps(lake, snapshot) if g.group_id == APP] == [STREAMS_ASSIGNOR_MISSING]
    page = "\n".join(gaps_markdown(reporting_gaps(lake, snapshot)))
    assert f"* {APP}: the brokers do not list our broker-side assignor" in page


def test_publish_selects_our_assignor_and_the_group_runs_the_plan(
    spark: SparkSession, broker: EmbeddedBroker, fleet: StreamsFleet, tmp_path: Path
) -> None:
    settings = settings_for(tmp_path)
    lake = Lake(spark, settings.lake_root)
    snapshot = plan_and_approve(lake, settings, broker.bootstrap)
    # The brokers have our assignor: the report says the group is steered through it, not report-only.
    (shown,) = [r for r in build_report(lake, snapshot).rows if r.group_id == APP]
    assert shown.steered_streams and shown.report_only is None
    assert shown.source_note.startswith("streams protocol (KIP-1071): planned from the broker's description")
    assert not [g for g in reporting_gaps(lake, snapshot) if g.group_id == APP]
    epoch_before, _ = live(broker.bootstrap)
    assert dict(run_publish(lake, settings, broker.bootstrap, snapshot_id=snapshot).counts) == {"published": 1}
    row = lake.read("plans", snapshot).where(sf.col("group_id") == APP).first()
    assert row is not None and row["status"] == "PUBLISHED"
    plan_id = row["plan_id"]
    assert read_latest_by_key(broker.bootstrap, PLANS)[APP.encode()] is not None
    # Publish selected our assignor for the group, and recorded it.
    assert group_config(broker.bootstrap, ASSIGNOR_CONFIG) == ASSIGNOR_NAME
    history = lake.read("assignment_history").where(sf.col("source") == SOURCE_SELECTED).collect()
    assert [(h["group_id"], h["plan_id"]) for h in history] == [(APP, plan_id)]

    # The trigger made the broker assign again, with our assignor, which honored the plan.
    def honored() -> bool:
        decision = read_latest_by_key(broker.bootstrap, DECISIONS).get(APP.encode())
        return decision is not None and json.loads(decision)["plan_id"] == plan_id

    wait_until(honored, 120, "our assignor's decision to honor the plan", poll_s=1)
    decision = json.loads(read_latest_by_key(broker.bootstrap, DECISIONS)[APP.encode()] or b"{}")
    assert (decision["outcome"], decision["fallback_reason"]) == ("plan", None), decision
    assert live(broker.bootstrap)[0] > epoch_before
    # The plan only adds standbys, which need no caught-up owner: its first step is its whole target.
    target = plan_targets(lake, [plan_id])[plan_id]
    wait_until(lambda: at_target(broker.bootstrap, target), 120, "the group to run the plan's target", poll_s=1)
    assert all(i.alive for i in fleet.members())

    # The new standbys load their stores: each member's restore listener publishes that loading while it goes on
    # (a hot standby's loading never ends), within rebalance.planner.restored.publish.interval.ms.
    published_at = int(row["published_at"])

    def listeners_saw_the_loading() -> bool:
        loaded = sum(standby_restored_records(fleet.members(), published_at).values())
        return 0 < loaded == restored_since(restored_reports(broker.bootstrap, REPORTS, APP), published_at)

    wait_until(listeners_saw_the_loading, 60, "the listeners to publish the standbys' loading", poll_s=1)
    loaded = sum(standby_restored_records(fleet.members(), published_at).values())

    # observe reads the group from the broker, marks the plan REALIZED and hands the group back to the default.
    ensure_topics({"bootstrap.servers": broker.bootstrap}, [TopicSpec(REPORTS, compacted=True)])
    assert run_observe(lake, settings, broker.bootstrap).counts["realized"] == 1
    row = lake.read("plans").where(sf.col("plan_id") == plan_id).first()
    assert row is not None and row["status"] == "REALIZED"
    # What the plan restored: both members reported (their process ids are the ones the broker describes).
    assert (row["restored_offsets"], row["restored_reporting"], row["restored_members"]) == (loaded, 2, 2), row
    assert group_config(broker.bootstrap, ASSIGNOR_CONFIG) == "sticky"
    assert group_config(broker.bootstrap, TRIGGER_CONFIG) is None  # the group's own rack tags (none) again
