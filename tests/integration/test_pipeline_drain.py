"""Planned scale-in on Sail: a drain plan validates, records what it drains and gives that instance nothing."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as sf

from assignor import ClientAssignment
from jobs.lakehouse.lake import Lake
from jobs.local.synthetic import fleet_end_offsets, fleet_partitions, fleet_records, synthetic_group
from jobs.pipeline.approve import run_approve
from jobs.pipeline.broker_reads import BrokerState
from jobs.pipeline.extract import write_snapshot
from jobs.pipeline.intake import intake_records
from jobs.pipeline.lags import run_lags
from jobs.pipeline.plan import run_plan
from jobs.pipeline.stage import StageInputError
from jobs.pipeline.targets import plan_targets
from jobs.pipeline.validate import run_validate
from jobs.settings import Kip441Overrides, Settings

CAPTURED_AT = 1_700_000_000_000
DRAINED = "g0-p1"


def lagged_lake(spark: SparkSession, root: Path, settings: Settings) -> Lake:
    """Two balanced synthetic groups of four instances, extracted and lagged (not planned)."""
    rng = random.Random(5)
    fleet = [
        synthetic_group(f"g{i}", rng, subtopologies=2, partitions=6, instances=4, scenario="settled") for i in range(2)
    ]
    intake = intake_records(fleet_records(fleet), fleet_partitions(fleet), CAPTURED_AT, 10**13)
    lake = Lake(spark, root)
    write_snapshot(lake, "s1", CAPTURED_AT, intake, BrokerState(fleet_partitions(fleet), fleet_end_offsets(fleet), {}))
    run_lags(lake, settings, "s1")
    return lake


def test_a_drain_plan_validates_and_leaves_the_drained_instance_with_nothing(
    spark: SparkSession, tmp_path: Path
) -> None:
    settings = Settings(
        lake_root=tmp_path / "lake", kip441_overrides=Kip441Overrides.fleet(num_standby_replicas=1), planner_processes=1
    )
    lake = lagged_lake(spark, settings.lake_root, settings)
    drains = {"g0": frozenset({DRAINED}), "g1": frozenset({"nobody"})}

    run_plan(lake, settings, "s1", drains=drains)
    run_validate(lake, settings, "s1")

    plans = {r["group_id"]: r for r in lake.read("plans", "s1").collect()}
    assert plans["g0"]["status"] == "VALIDATED", plans["g0"]["reason"]
    assert plans["g0"]["draining"] == [DRAINED]
    # An impossible drain is a REJECTED plan that says why, not a failed run.
    assert plans["g1"]["status"] == "REJECTED"
    assert "cannot drain ['nobody']" in plans["g1"]["reason"]
    steps = lake.read("plan_assignments", "s1").where(sf.col("plan_id") == plans["g0"]["plan_id"])
    last = steps.where(sf.col("step") == plans["g0"]["rounds"])
    assert last.count() > 0
    assert last.where(sf.col("process_id") == DRAINED).count() == 0
    # It ran tasks at the snapshot; VALIDATED means each moved only to an instance caught up on it (warmed up).
    held = lake.read("member_reports", "s1").where(sf.col("process_id") == DRAINED).first()
    assert held is not None and held["active_tasks"]
    assert plans["g0"]["moves"] >= len(held["active_tasks"])
    target = plan_targets(lake, [plans["g0"]["plan_id"]])[plans["g0"]["plan_id"]]
    assert target.clients[DRAINED] == ClientAssignment()
    assert len(target.clients) == 4
    # Approval binds the digest validate recorded: the target read back names the drained instance both times.
    run_approve(lake, settings, by="alice", plan_ids=[plans["g0"]["plan_id"]], snapshot_id="s1")
    approved = lake.read("plans", "s1").where(sf.col("group_id") == "g0").first()
    assert approved is not None and approved["status"] == "APPROVED", approved and approved["reason"]


def test_a_different_drain_for_an_already_planned_group_is_refused(spark: SparkSession, tmp_path: Path) -> None:
    settings = Settings(lake_root=tmp_path / "lake", planner_processes=1)
    lake = lagged_lake(spark, settings.lake_root, settings)
    run_plan(lake, settings, "s1", drains={"g0": frozenset({DRAINED})})

    run_plan(lake, settings, "s1", drains={"g0": frozenset({DRAINED})})  # a retried run asks the same: fine
    with pytest.raises(StageInputError, match="already planned in snapshot s1"):
        run_plan(lake, settings, "s1", drains={"g1": frozenset({"g1-p0"})})
    with pytest.raises(StageInputError, match="no group"):
        run_plan(lake, settings, "s1", drains={"g9": frozenset({"g9-p0"})})
