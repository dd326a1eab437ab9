"""The demo's live groups (jobs/demo/live.py): every one a Kafka Streams application, the reference app's JVMs with
the light footprint (small heap, C1 only, one bounded RocksDB budget per JVM), on a real broker with our broker-side
assignor installed, as the demo starts it. Three groups run the classic protocol with the plugin; one runs the
streams protocol (KIP-1071), assigned by the broker.

The whole demo (Airflow, the pipeline, the approval) is `make demo`; this checks the parts it adds to the fleets: that
the light JVMs settle, report through the plugin, restore state from the changelog, and that the streams-protocol
group is planned, approved, published, honored by the broker and marked REALIZED by observe (the stages in-process,
with the demo's KIP-441 settings as the planning DAG passes them)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import ExitStack

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as sf

from jobs.demo.live import CLASSIC_GROUPS, INSTANCES, LIVE_GROUPS, RECORDS, STREAMS_GROUP, STREAMS_INSTANCES, LiveGroups
from jobs.demo.start import KIP441, STEP_MIN_INTERVAL_MS
from jobs.lakehouse.lake import Lake
from jobs.local.broker import BrokerAssignor, EmbeddedBroker, broker_assignor_jar
from jobs.local.streams_fleet import (
    LIGHT,
    StreamsFleet,
    at_target,
    processed_once,
    restored_records,
    standby_restored_records,
)
from jobs.pipeline.approve import run_approve
from jobs.pipeline.extract import run_extract
from jobs.pipeline.lags import run_lags
from jobs.pipeline.observe import run_observe
from jobs.pipeline.plan import run_plan
from jobs.pipeline.publish import run_publish
from jobs.pipeline.status import PlanStatus
from jobs.pipeline.streams_assignor import ASSIGNOR_NAME, selecting_assignor
from jobs.pipeline.targets import plan_targets
from jobs.pipeline.validate import run_validate
from jobs.polling import wait_until
from jobs.provisioning import ensure_product_topics, product_topics
from jobs.settings import Kip441Overrides, Settings
from tests.support.signing import SIGNER, VERIFY_KEYS, key_file

REPORTS, PLANS = "demo-live-reports", "demo-live-plans"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LiveGroups, Settings]]:
    """The demo's live groups, settled and with their changelogs written, on a broker whose assignor trusts the key
    (as the demo's does its generated key)."""
    root = tmp_path_factory.mktemp("demo-live")
    assignor = BrokerAssignor(broker_assignor_jar(), VERIFY_KEYS.render(), PLANS)
    with EmbeddedBroker(data_dir=root / "kafka", assignor=assignor) as broker, ExitStack() as stack:
        settings = Settings(
            lake_root=root / "lake", kafka_bootstrap=broker.bootstrap, plan_verify_keys=VERIFY_KEYS.render(),
            kip441=KIP441, reports_topic=REPORTS, plans_topic=PLANS, plan_signing_key_file=key_file(root),
            plan_key_id=SIGNER.key_id, planner_processes=1, step_min_interval_ms=STEP_MIN_INTERVAL_MS,
            # The planning DAG passes the demo's KIP-441 settings as its run's parameters: fleet-wide overrides.
            kip441_overrides=Kip441Overrides.fleet(**KIP441.columns()),
        )  # fmt: skip
        ensure_product_topics({"bootstrap.servers": broker.bootstrap}, product_topics(REPORTS, PLANS))
        groups = LiveGroups(settings, root / "fleet")
        groups.start(stack)
        wait_until(groups.processed_once, 300, "the live groups to settle", poll_s=1)
        fleets = groups.fleets.values()
        wait_until(lambda: all(f.changelog_records() >= RECORDS for f in fleets), 180, "the input to be counted")
        yield groups, settings


def reports_show_every_task_running(fleet: StreamsFleet) -> bool:
    """The plugin's newest reports name every live instance, and their active tasks are all the group's tasks."""
    reports = fleet.reports()
    pids = {i.process_id for i in fleet.live()}
    held = sorted(t for p in pids if p in reports for t in reports[p]["active_tasks"])
    return pids <= set(reports) and held == sorted(fleet.config.tasks)


def test_every_live_group_is_a_kafka_streams_application_that_reports_through_the_plugin(
    demo: tuple[LiveGroups, Settings],
) -> None:
    live, _ = demo
    assert set(live.fleets) == set(LIVE_GROUPS)
    for fleet in live.fleets.values():
        assert (fleet.config.jvm_options, fleet.config.rocksdb_memory_mb) == (
            LIGHT.jvm_options,
            LIGHT.rocksdb_memory_mb,
        )
    classic = [live.fleets[g] for g in CLASSIC_GROUPS]
    assert all(len(f.live()) == len(INSTANCES) for f in classic)
    wait_until(lambda: all(reports_show_every_task_running(f) for f in classic), 90, "reports of the settled groups")
    origins = {r["origin"] for f in classic for r in f.reports().values()}
    assert origins == {"kafka-streams"}
    streams = live.fleets[STREAMS_GROUP]
    assert (streams.config.group_protocol, streams.config.plugin) == ("streams", False)
    assert len(streams.live()) == len(STREAMS_INSTANCES) and processed_once(streams)
    assert streams.reports() == {}, "no plugin runs under the streams protocol"


def test_a_light_instance_that_lost_its_state_loads_it_again_from_the_changelog(
    demo: tuple[LiveGroups, Settings],
) -> None:
    fleet = demo[0].fleets[CLASSIC_GROUPS[-1]]
    fleet.kill("i3")
    shutil.rmtree(fleet.state_dir("i3"))
    restarted = fleet.start("i3")

    def loaded() -> bool:
        return sum(restored_records([restarted]).values()) + sum(standby_restored_records([restarted]).values()) > 0

    wait_until(loaded, 120, "the emptied instance to load state from the changelog", poll_s=1)
    wait_until(lambda: processed_once(fleet), 120, "the group to process every task once again", poll_s=1)


def test_the_streams_protocol_group_is_planned_approved_and_realized(
    spark: SparkSession, demo: tuple[LiveGroups, Settings]
) -> None:
    live, settings = demo
    bootstrap = str(settings.kafka_bootstrap)
    lake = Lake(spark, settings.lake_root)
    snapshot = run_extract(lake, settings, bootstrap).snapshot_id
    assert snapshot is not None
    run_lags(lake, settings, snapshot)
    run_plan(lake, settings, snapshot)
    run_validate(lake, settings, snapshot)
    row = lake.read("plans", snapshot).where(sf.col("group_id") == STREAMS_GROUP).first()
    # The group runs no standbys (the broker's group config); the demo's settings ask one per stateful task.
    assert row is not None and row["status"] == PlanStatus.VALIDATED, row
    assert "num_standby_replicas 0 -> 1" in str(row["settings_changes"]), row
    plan_id = row["plan_id"]
    run_approve(lake, settings, by="tester", plan_ids=[plan_id])
    assert dict(run_publish(lake, settings, bootstrap, plan_ids=[plan_id]).counts) == {"published": 1}
    assert selecting_assignor(settings, bootstrap, {STREAMS_GROUP}) == {STREAMS_GROUP}, ASSIGNOR_NAME
    target = plan_targets(lake, [plan_id])[plan_id]
    wait_until(
        lambda: at_target(live.fleets[STREAMS_GROUP], target), 180, "the streams group to run its plan", poll_s=1
    )

    def realized() -> bool:
        run_observe(lake, settings, bootstrap)  # also triggers a later step, had the plan one
        status = lake.read("plans").where(sf.col("plan_id") == plan_id).first()
        assert status is not None and status["status"] in (PlanStatus.PUBLISHED, PlanStatus.REALIZED), status
        return bool(status["status"] == PlanStatus.REALIZED)

    wait_until(realized, 240, "observe to mark the streams group's plan REALIZED", poll_s=2)
    # Realized: the group is handed back to the broker's default assignor.
    assert selecting_assignor(settings, bootstrap, {STREAMS_GROUP}) == set()
    assert processed_once(live.fleets[STREAMS_GROUP])
