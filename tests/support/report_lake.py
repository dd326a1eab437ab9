"""A small planned lake for the report's tests: synthetic groups extracted, lagged, planned and validated, with the
plan_baselines rows the plan stage will write written here so the comparison is exercised."""

from __future__ import annotations

import random
from pathlib import Path

from pyspark.sql import SparkSession

from jobs.lakehouse.lake import Lake
from jobs.lakehouse.tables import table_schema
from jobs.local.synthetic import fleet_end_offsets, fleet_partitions, fleet_records, synthetic_group
from jobs.pipeline.broker_reads import BrokerState
from jobs.pipeline.extract import write_snapshot
from jobs.pipeline.intake import intake_records
from jobs.pipeline.lags import run_lags
from jobs.pipeline.plan import run_plan
from jobs.pipeline.validate import run_validate
from jobs.settings import Kip441Overrides, Settings

SNAPSHOT = "20261123T020000Z-report"
CAPTURED_AT = 1_795_000_000_000


def planned_lake(spark: SparkSession, root: Path, groups: int = 6) -> Lake:
    """``groups`` synthetic groups (scaled out, so they have moves) through extract, lags, plan and validate."""
    settings = Settings(
        lake_root=root,
        kip441_overrides=Kip441Overrides.fleet(num_standby_replicas=1),
        planner_processes=1,
        restore_rate=5_000,
    )
    rng = random.Random(17)
    fleet = [
        synthetic_group(
            f"group-{i:02d}", rng, subtopologies=2, partitions=4 + i % 3, instances=3, scenario="scaled_out"
        )
        for i in range(groups)
    ]
    intake = intake_records(fleet_records(fleet), fleet_partitions(fleet), CAPTURED_AT, 10**13)
    lake = Lake(spark, root)
    write_snapshot(
        lake, SNAPSHOT, CAPTURED_AT, intake, BrokerState(fleet_partitions(fleet), fleet_end_offsets(fleet), {})
    )
    run_lags(lake, settings, SNAPSHOT)
    run_plan(lake, settings, SNAPSHOT)
    run_validate(lake, settings, SNAPSHOT)
    return lake


def seed_baselines(lake: Lake, assignor: str = "kip441", every: int = 1) -> list[tuple[object, ...]]:
    """One baseline row per ``every``-th plan of the snapshot: costlier than the plan, so a comparison shows;
    returns the rows written (plan_baselines column order)."""
    plans = sorted(lake.read("plans", SNAPSHOT).collect(), key=lambda r: r["group_id"])
    rows: list[tuple[object, ...]] = [
        (p["plan_id"], SNAPSHOT, p["group_id"], assignor, (p["moves"] or 0) + 2, (p["warmups"] or 0) + 3,
         (p["rounds"] or 0) + 1, (p["restore_offsets"] or 0) * 2 + 1_000, 900.0 + i, True)
        for i, p in enumerate(plans) if i % every == 0
    ]  # fmt: skip
    lake.merge("plan_baselines", lake.spark.createDataFrame(rows, table_schema("plan_baselines").ddl))
    return rows
