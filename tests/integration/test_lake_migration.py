"""A table written before its schema file gained a column still reads, and takes new rows, after an upgrade."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from jobs.lakehouse.lake import Lake
from jobs.lakehouse.tables import table_schema
from tests.support.pipeline_data import group_frames, random_groups, report_rows

pytestmark = pytest.mark.engines  # every spark test here runs on Sail and on Apache Spark with delta-spark

NEW_COLUMNS = ("origin", "task_lags", "task_offset_sums_error")  # member_reports gained these after lakes existed


def test_an_older_table_gains_the_new_columns_and_keeps_its_rows(spark: SparkSession, tmp_path: Path) -> None:
    lake = Lake(spark, tmp_path / "lake")
    schema = table_schema("member_reports")
    old_columns = [c for c in schema.columns if c.name not in NEW_COLUMNS]
    old_ddl = ", ".join(f"`{c.name}` {c.type}" for c in old_columns)
    groups = random_groups(5, 2)
    old_rows = [row[: len(old_columns)] for row in report_rows(groups, "s-old")]  # the new columns come last
    spark.createDataFrame(old_rows, old_ddl).write.format("delta").mode("append").save(str(lake.path("member_reports")))

    before = lake.read("member_reports").collect()
    assert len(before) == len(old_rows) and all(r["origin"] is None and r["task_lags"] is None for r in before)
    new_reports, _, _ = group_frames(spark, groups, "s-new", as_lags=True)
    outcome = lake.merge("member_reports", new_reports)
    assert outcome.inserted == new_reports.count()
    after = lake.read("member_reports")
    assert after.where("snapshot_id = 's-old'").count() == len(old_rows)
    new = after.where("snapshot_id = 's-new'").collect()
    assert {(r["origin"], r["task_offset_sums_error"]) for r in new} == {
        ("kafka-streams", "changelog end offsets not listed within 2000 ms")
    }
