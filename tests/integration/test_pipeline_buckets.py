"""Stages run bucket by bucket write exactly what one run over the whole fleet writes."""

from __future__ import annotations

import math
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
from jobs.pipeline.validate import load_suites, run_validate
from jobs.settings import Kip441Overrides, Settings

# On Sail only: what bucketing asks of the engine (a MERGE within a group range, Scope) runs on both engines in
# test_lake_merge, and the whole pipeline on Apache Spark in test_pipeline_e2e; here, twice a pipeline on Apache
# Spark cost 165 s of CI for the stages' own bucket bookkeeping, which no engine takes part in.

CAPTURED_AT = 1_700_000_000_000
SCENARIOS = ("scaled_out", "restarted", "settled", "skewed", "scaled_out")


def pipeline_lake(spark: SparkSession, root: Path, bucket_groups: int) -> tuple[Lake, Settings]:
    """Five small synthetic groups extracted, lagged, planned (one plan broken on purpose) and validated, with
    ``bucket_groups`` groups per bucket."""
    settings = Settings(
        lake_root=root,
        kip441_overrides=Kip441Overrides.fleet(num_standby_replicas=1),
        planner_processes=1,
        stage_bucket_groups=bucket_groups,
        data_docs_dir=root.with_name(f"{root.name}-docs"),
    )
    rng = random.Random(5)
    fleet = [
        synthetic_group(f"g{i}", rng, subtopologies=2, partitions=4, instances=3, scenario=scenario)
        for i, scenario in enumerate(SCENARIOS)
    ]
    intake = intake_records(fleet_records(fleet), fleet_partitions(fleet), CAPTURED_AT, 10**13)
    lake = Lake(spark, root)
    write_snapshot(lake, "s1", CAPTURED_AT, intake, BrokerState(fleet_partitions(fleet), fleet_end_offsets(fleet), {}))
    run_lags(lake, settings, "s1")
    run_plan(lake, settings, "s1")
    # g3's first step runs one of its tasks twice as active: its plan must be rejected whatever the buckets.
    first = lake.read("plan_assignments", "s1").where("group_id = 'g3' AND step = 1 AND role = 'ACTIVE'").collect()
    held = {(r["process_id"], r["task_id"]) for r in first}
    pid, task = next(
        (p, t) for p in sorted({p for p, _ in held}) for t in sorted({t for _, t in held}) if (p, t) not in held
    )
    twice = [(first[0]["plan_id"], "s1", "g3", 1, pid, task, "ACTIVE")]
    lake.merge("plan_assignments", spark.createDataFrame(twice, table_schema("plan_assignments").ddl))
    run_validate(lake, settings, "s1")
    return lake, settings


def test_lags_and_validate_in_buckets_of_two_groups_and_a_last_of_one_write_what_one_bucket_writes(
    spark: SparkSession, tmp_path: Path
) -> None:
    # Five groups in buckets of two: full buckets and a last one holding a single group (buckets of one each were
    # also run here once; they add nothing the last bucket does not, at twice the time on Apache Spark).
    whole, _ = pipeline_lake(spark, tmp_path / "whole", bucket_groups=10_000)
    size = 2
    bucketed, settings = pipeline_lake(spark, tmp_path / f"by-{size}", bucket_groups=size)
    assert len(SCENARIOS) % size == 1
    lags = sorted(tuple(r) for r in bucketed.read("task_lags", "s1").collect())
    assert lags == sorted(tuple(r) for r in whole.read("task_lags", "s1").collect())
    assert len(lags) > 0

    def verdicts(lake: Lake) -> dict[str, tuple[object, ...]]:
        rows = lake.read("plans", "s1").collect()
        return {r["group_id"]: (r["status"], r["reason"], r["target_digest"]) for r in rows}

    def results(lake: Lake) -> list[tuple[object, ...]]:
        rows = lake.read("validation_results").collect()
        return sorted((r["plan_id"], r["suite"], r["expectation"], r["success"], r["unexpected_count"]) for r in rows)

    assert verdicts(bucketed) == verdicts(whole)
    status, reason, _ = verdicts(whole)["g3"]
    assert status == "REJECTED" and "one_active_per_task_per_step" in str(reason)
    assert sum(1 for status, _, _ in verdicts(whole).values() if status == "VALIDATED") > 0
    assert results(bucketed) == results(whole)
    assert (settings.data_docs / "index.html").is_file()
    # Data Docs hold every bucket's result of every suite, and the index links each of them.
    checked = sum(1 for status, _, _ in verdicts(bucketed).values() if status in ("VALIDATED", "REJECTED"))
    pages = sorted((settings.data_docs / "validations").rglob("*.html"))
    assert len(pages) == len(load_suites({})) * math.ceil(checked / size)
    index = (settings.data_docs / "index.html").read_text(encoding="utf-8")
    assert all(page.relative_to(settings.data_docs).as_posix() in index for page in pages)
    # A re-run of finished stages finds everything written: no table gets a new version.
    assert not run_lags(bucketed, settings, "s1").changed
    assert not run_validate(bucketed, settings, "s1").changed
