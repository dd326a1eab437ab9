"""Planned scale-in on a live Kafka Streams group: the real pipeline plans a drain of one reference-app instance
(extract -> lags -> plan --drain -> validate -> approve -> publish), the plugin honors it, `observe` marks it
REALIZED while the drained instance still runs with nothing, and the instance then stops with nothing to restore
anywhere. A drain whose instance leaves before it was seen realized is EXPIRED instead.

A Kafka Streams group because the plugin reads plans at its plan-check rebalances: a settled Python runtime group
rebalances only when its membership changes, so it would not read a plan published to it until then.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as sf

from assignor.configs import AssignmentConfigs
from jobs.lakehouse.lake import Lake
from jobs.local.broker import EmbeddedBroker
from jobs.local.fleet_events import double_processing, processing
from jobs.local.streams_fleet import (
    StreamsFleet,
    StreamsFleetConfig,
    assignment,
    at_target,
    generation,
    restores,
    settled,
    standby_restored_records,
    stopped_tasks,
)
from jobs.pipeline.approve import run_approve
from jobs.pipeline.broker_reads import read_membership
from jobs.pipeline.extract import run_extract
from jobs.pipeline.lags import run_lags
from jobs.pipeline.observe import run_observe
from jobs.pipeline.plan import run_plan
from jobs.pipeline.publish import run_publish
from jobs.pipeline.targets import plan_targets
from jobs.pipeline.validate import run_validate
from jobs.polling import wait_until
from jobs.settings import Kip441Settings, Settings
from tests.support.signing import SIGNER, VERIFY_KEYS, key_file

APP = "drain"
PARTITIONS = 4  # 4 stateless re-keying tasks (0_*) and 4 counting tasks (1_*)
RECORDS = 20_000  # ~5,000 changelog records per counting task: far more than the acceptable lag
CONFIGS = AssignmentConfigs(acceptable_recovery_lag=100, max_warmup_replicas=2, probing_rebalance_interval_ms=10_000)
PLAN_CHECK_MS = 5_000
REPORTS, PLANS = "drain-reports", "drain-plans"


def plan_and_publish(lake: Lake, settings: Settings, bootstrap: str, drains: Mapping[str, frozenset[str]]) -> str:
    """Every stage in-process, as an Airflow run would, approved by 'tester'; the published drain plan's id."""
    snapshot = run_extract(lake, settings, bootstrap).snapshot_id
    run_lags(lake, settings, snapshot)
    run_plan(lake, settings, snapshot, drains=drains)
    run_validate(lake, settings, snapshot)
    run_approve(lake, settings, by="tester", snapshot_id=snapshot)
    run_publish(lake, settings, bootstrap, snapshot_id=snapshot)
    row = lake.read("plans", snapshot).where(sf.col("group_id") == APP).first()
    assert row is not None and row["status"] == "PUBLISHED", row
    assert sorted(row["draining"]) == sorted(drains[APP])
    return str(row["plan_id"])


def plan_row(lake: Lake, plan_id: str) -> dict[str, object]:
    row = lake.read("plans").where(sf.col("plan_id") == plan_id).first()
    assert row is not None
    return row.asDict()


def is_member(settings: Settings, fleet: StreamsFleet, process_id: str) -> bool:
    """Whether the broker lists the member the newest report of ``process_id`` names."""
    report = fleet.reports().get(process_id)
    group = read_membership(settings, fleet.config.bootstrap, {APP}).get(APP)
    return report is not None and group is not None and report["member_id"] in {m.member_id for m in group.members}


def test_a_drained_streams_instance_ends_with_nothing_is_realized_while_running_and_stops_with_nothing_to_restore(
    broker: EmbeddedBroker, spark: SparkSession, tmp_path: Path
) -> None:
    config = StreamsFleetConfig(
        broker.bootstrap, tmp_path / "fleet", APP, PARTITIONS, VERIFY_KEYS.render(), configs=CONFIGS,
        reports_topic=REPORTS, plans_topic=PLANS, plan_check_interval_ms=PLAN_CHECK_MS,
    )  # fmt: skip
    settings = Settings(
        lake_root=tmp_path / "lake", kafka_bootstrap=broker.bootstrap, plan_signing_key_file=key_file(tmp_path),
        plan_key_id=SIGNER.key_id, kip441=Kip441Settings.of(CONFIGS), planner_processes=1,
        reports_topic=REPORTS, plans_topic=PLANS,
    )  # fmt: skip
    lake = Lake(spark, settings.lake_root)
    with StreamsFleet(config) as fleet:
        fleet.start_settled(["i1", "i2", "i3"], RECORDS)
        live = {i.process_id for i in fleet.live()}
        wait_until(lambda: live <= set(fleet.reports()), 60, "a report for every instance")
        drained = fleet.instances["i3"]
        others = [i for i in fleet.live() if i is not drained]
        assert any(t.startswith("1_") for t in (assignment(drained) or (set(), set()))[0]), "it must hold state"

        published_at = int(time.time() * 1000)
        plan_id = plan_and_publish(lake, settings, broker.bootstrap, {APP: frozenset({drained.process_id})})
        target = plan_targets(lake, [plan_id])[plan_id]
        wait_until(lambda: at_target(fleet, target), 240, "the group to reach the drain's target", poll_s=1)

        # The drained instance runs, holding and processing nothing; nothing became active far behind.
        assert drained.alive and assignment(drained) == (set(), set()) and processing(drained) == set()
        too_far = [r for r in restores(fleet.members(), published_at) if r.records > CONFIGS.acceptable_recovery_lag]
        assert not too_far, too_far
        wait_until(
            lambda: fleet.reports().get(drained.process_id, {}).get("plan_id") == plan_id, 30, "its report to name it"
        )
        run_observe(lake, settings, broker.bootstrap)
        assert plan_row(lake, plan_id)["status"] == "REALIZED"

        # Safe to stop: it leaves, and nothing anywhere restores or stops because of it.
        stopped_at = int(time.time() * 1000)
        fleet.stop(drained.name)
        wait_until(lambda: not is_member(settings, fleet, drained.process_id), 60, "the group to drop it")
        before = generation(others)
        wait_until(lambda: generation(others) > before, 60, "a rebalance without it")
        wait_until(lambda: settled(fleet), 60, "the group to settle without it", poll_s=1)
        assert restores(fleet.members(), stopped_at) == []
        assert sum(standby_restored_records(others, stopped_at).values()) == 0
        assert all(not stopped_tasks(i, stopped_at) for i in others), [stopped_tasks(i, stopped_at) for i in others]
        run_observe(lake, settings, broker.bootstrap)
        assert plan_row(lake, plan_id)["status"] == "REALIZED"  # what was seen stays so

        # A second drain (i2; i3 too, whose last report the snapshot still holds) whose instance stops before
        # the drain could be seen realized: observe does not call it REALIZED but EXPIRED, saying why.
        leaving = fleet.instances["i2"]
        second = plan_and_publish(
            lake, settings, broker.bootstrap, {APP: frozenset({leaving.process_id, drained.process_id})}
        )
        fleet.stop(leaving.name)
        wait_until(lambda: not is_member(settings, fleet, leaving.process_id), 60, "the group to drop i2")
        run_observe(lake, settings, broker.bootstrap)
        row = plan_row(lake, second)
        assert row["status"] == "EXPIRED", row
        assert leaving.process_id in str(row["reason"]) and "left the group before" in str(row["reason"])
    assert double_processing(fleet.members()) == []
