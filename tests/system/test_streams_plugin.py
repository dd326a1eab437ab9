"""The Kafka Streams plugin on real JVMs: a 3 -> 4 scale-out of the reference app that honors a plan made by the
real pipeline stages (extract -> lags -> plan -> validate -> approve -> publish), then plans it must refuse.

The plan is published before the fourth instance starts: the plugin reads plans only during rebalances, and the
fourth instance's join is the rebalance that must already honor it (see StreamsFleet.announce).
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as sf

from assignor.configs import AssignmentConfigs
from assignor.protocol.plans import ApprovedPlan, read_record
from assignor.runtime.kafka_io import read_latest_by_key
from jobs.lakehouse.lake import Lake
from jobs.local.broker import EmbeddedBroker
from jobs.local.direct_plan import publish_record
from jobs.local.fleet_events import double_processing
from jobs.local.streams_fleet import (
    StreamsFleet,
    StreamsFleetConfig,
    assignment,
    at_target,
    processed_once,
    restored_records,
    restores,
    standby_restored_records,
    stopped_tasks,
)
from jobs.pipeline.approve import run_approve
from jobs.pipeline.extract import run_extract
from jobs.pipeline.lags import run_lags
from jobs.pipeline.observe import run_observe
from jobs.pipeline.plan import run_plan
from jobs.pipeline.publish import run_publish
from jobs.pipeline.validate import run_validate
from jobs.polling import wait_until
from jobs.report.collect import group_rows
from jobs.settings import Kip441Settings, Settings
from tests.support.kafka_isolation import isolated
from tests.support.restored_reports import restored_reports, restored_since
from tests.support.signing import SIGNER, VERIFY_KEYS, key_file

APP = "counter"
PARTITIONS = 10  # 10 stateless re-keying tasks (0_*) and 10 counting tasks (1_*) with a changelog each
RECORDS = 200_000  # ~20,000 changelog records per counting task: far more than the acceptable lag
CONFIGS = AssignmentConfigs(acceptable_recovery_lag=100, max_warmup_replicas=2, probing_rebalance_interval_ms=10_000)
REPORTS, PLANS = "streams-reports", "streams-plans"


@dataclass
class ScaleOut:
    fleet: StreamsFleet
    plan: ApprovedPlan
    record: bytes
    started_at: int  # when the fourth instance started
    before: dict[str, set[str]]  # process id -> active tasks before the scale-out
    settings: Settings


def run_pipeline(spark: SparkSession, settings: Settings, bootstrap: str) -> str:
    """Every stage in-process, as an Airflow run would, approved by 'tester'; the published plan's id."""
    lake = Lake(spark, settings.lake_root)
    snapshot = run_extract(lake, settings, bootstrap).snapshot_id
    run_lags(lake, settings, snapshot)
    run_plan(lake, settings, snapshot)
    run_validate(lake, settings, snapshot)
    run_approve(lake, settings, by="tester", snapshot_id=snapshot)
    run_publish(lake, settings, bootstrap, snapshot_id=snapshot)
    row = lake.read("plans", snapshot).where(sf.col("group_id") == APP).first()
    assert row is not None and row["status"] == "PUBLISHED", row
    return str(row["plan_id"])


@pytest.fixture(scope="module")
def scale_out(
    tmp_path_factory: pytest.TempPathFactory, kafka: EmbeddedBroker, spark: SparkSession
) -> Iterator[ScaleOut]:
    """Three instances settle with state; the pipeline plans for four; the fourth starts."""
    root = tmp_path_factory.mktemp("streams")
    with isolated(kafka) as broker:
        config = StreamsFleetConfig(
            broker.bootstrap, root / "fleet", APP, PARTITIONS, VERIFY_KEYS.render(), configs=CONFIGS,
            reports_topic=REPORTS, plans_topic=PLANS,
        )  # fmt: skip
        with StreamsFleet(config) as fleet:
            fleet.start_settled(["i1", "i2", "i3"], RECORDS)
            live = {i.process_id for i in fleet.live()}
            wait_until(lambda: live <= set(fleet.reports()), 60, "a report for every instance")
            template = next(iter(fleet.reports().values()))
            newcomer = fleet.announce("i4", template)

            settings = Settings(
                lake_root=root / "lake", kafka_bootstrap=broker.bootstrap, plan_signing_key_file=key_file(root),
                plan_key_id=SIGNER.key_id, kip441=Kip441Settings.of(CONFIGS), planner_processes=1,
                reports_topic=REPORTS, plans_topic=PLANS,
            )  # fmt: skip
            plan_id = run_pipeline(spark, settings, broker.bootstrap)
            record = read_latest_by_key(broker.bootstrap, PLANS)[APP.encode()]
            assert record is not None
            plan = read_record(record, VERIFY_KEYS)
            assert isinstance(plan, ApprovedPlan) and plan.plan_id == plan_id
            moved = {t for t in plan.target.clients[newcomer].active if t.subtopology == 1}
            assert moved, "the plan must move counting tasks (with state) to the new instance"

            before = {i.process_id: (assignment(i) or (set(), set()))[0] for i in fleet.live()}
            started_at = int(time.time() * 1000)
            fleet.start("i4")
            wait_until(lambda: at_target(fleet, plan.target), 240, "the group to reach the plan's target", poll_s=1)
            yield ScaleOut(fleet, plan, record, started_at, before, settings)


def reports_say(fleet: StreamsFleet, since_ms: int, check: str) -> bool:
    """Whether every live instance has a report newer than ``since_ms`` whose fallback reason starts so."""
    reports = fleet.reports()
    for instance in fleet.live():
        report = reports.get(instance.process_id)
        if report is None or report["reported_at"] <= since_ms:
            return False
        if not (report["fallback_reason"] or "").startswith(check) or report["plan_id"] is not None:
            return False
    return True


def test_scale_out_converges_to_the_plan_and_reports_name_it(scale_out: ScaleOut) -> None:
    fleet = scale_out.fleet
    assert at_target(fleet, scale_out.plan.target)
    live = {i.process_id for i in fleet.live()}
    wait_until(
        lambda: all(fleet.reports().get(p, {}).get("plan_id") == scale_out.plan.plan_id for p in live),
        30,
        "every report to name the plan",
    )


def test_no_active_task_starts_with_more_than_the_acceptable_lag_to_restore(scale_out: ScaleOut) -> None:
    since = scale_out.started_at
    found = restores(scale_out.fleet.members(), since)
    assert found, "moved tasks restore their (small) remaining lag when they become active"
    too_far = [r for r in found if r.records > CONFIGS.acceptable_recovery_lag]
    assert not too_far, too_far


def test_tasks_that_do_not_move_are_never_stopped(scale_out: ScaleOut) -> None:
    target = scale_out.plan.target
    for instance in scale_out.fleet.members():
        if instance.process_id not in scale_out.before:
            continue
        kept = scale_out.before[instance.process_id] & {str(t) for t in target.clients[instance.process_id].active}
        assert kept, f"{instance.name} keeps some of its tasks"
        assert not kept & stopped_tasks(instance, scale_out.started_at), instance.name


def test_no_task_is_processed_by_two_instances_at_once(scale_out: ScaleOut) -> None:
    assert double_processing(scale_out.fleet.members()) == []


def test_observe_records_the_offsets_the_moved_tasks_restored_as_the_listener_saw_them(
    scale_out: ScaleOut, spark: SparkSession
) -> None:
    fleet, plan = scale_out.fleet, scale_out.plan
    live = {i.process_id for i in fleet.live()}
    # Each member publishes its restores when one ends or is suspended (a warmup promoted).
    wait_until(
        lambda: live <= set(restored_reports(fleet.config.bootstrap, REPORTS, APP)),
        60,
        "a restored-offsets report from every member",
    )
    lake = Lake(spark, scale_out.settings.lake_root)
    observed = run_observe(lake, scale_out.settings, fleet.config.bootstrap)
    assert observed.counts["realized"] == 1
    row = lake.read("plans").where(sf.col("plan_id") == plan.plan_id).first()
    assert row is not None and row["status"] == "REALIZED"
    published_at = int(row["published_at"])
    reported = restored_since(restored_reports(fleet.config.bootstrap, REPORTS, APP), published_at)
    # The reference app's own listeners (the plugin's delegates) log the same loading as events: warmups' (no
    # standbys here, so every standby load since publish is a warmup's) and the actives' restores.
    active = sum(restored_records(fleet.members(), published_at).values())
    warmups = sum(standby_restored_records(fleet.members(), published_at).values())
    assert warmups > 0, "the moved counting tasks load their state on their new instances"
    assert (row["restored_offsets"], reported) == (active + warmups, active + warmups)
    assert (row["restored_reporting"], row["restored_members"]) == (len(live), len(live))
    shown = group_rows(lake, str(row["snapshot_id"]), [APP])[0]
    assert shown.restored_text == f"{active + warmups:,} offsets (all {len(live)} instances reported)"


def test_a_tampered_then_an_expired_plan_fall_back_with_the_reason(scale_out: ScaleOut) -> None:
    fleet = scale_out.fleet
    tampered = json.loads(scale_out.record)
    tampered["approved_by"] = "mallory"  # covered by the signature
    published = int(time.time() * 1000)
    publish_record(fleet.config.bootstrap, PLANS, APP, json.dumps(tampered).encode("utf-8"))
    # The plugin reads plans during rebalances: a member joining makes one. The honored plan stays the verified
    # one (a record that does not verify undoes nothing), but it does not know i5: the group falls back, and the
    # reason is the refused newest record's.
    fleet.start("i5")
    wait_until(lambda: reports_say(fleet, published, "bad_signature: "), 120, "bad_signature in every report")
    wait_until(lambda: processed_once(fleet), 120, "every task processed once under the fallback", poll_s=1)

    # A newer record (a higher sequence than the honored plan's, so not a replay), signed with the real key, valid
    # only until just after approval.
    honored_sequence = json.loads(scale_out.record)["sequence"]
    expired = dataclasses.replace(scale_out.plan, valid_until=scale_out.plan.approved_at + 1)
    published = int(time.time() * 1000)
    publish_record(fleet.config.bootstrap, PLANS, APP, expired.to_record(SIGNER, honored_sequence + 1))
    fleet.start("i6")
    wait_until(lambda: reports_say(fleet, published, "expired: "), 120, "expired in every report")
    wait_until(lambda: processed_once(fleet), 120, "every task processed once under the fallback", poll_s=1)
    assert double_processing(fleet.members()) == []
