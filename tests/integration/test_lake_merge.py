"""MERGE sources with repeated keys: exact copies merge once; two different rows for one key are refused whole."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from jobs.lakehouse.lake import DuplicateKeys, Lake

pytestmark = pytest.mark.engines

DDL = "snapshot_id string, captured_at bigint"


def test_exact_copies_in_one_write_are_merged_once(spark: SparkSession, tmp_path: Path) -> None:
    lake = Lake(spark, tmp_path / "lake")
    rows = spark.createDataFrame([("s1", 1), ("s1", 1), ("s2", 2)], DDL)
    assert lake.merge("snapshots", rows).inserted == 2
    assert sorted((r["snapshot_id"], r["captured_at"]) for r in lake.read("snapshots").collect()) == [
        ("s1", 1),
        ("s2", 2),
    ]


def test_different_rows_for_one_key_are_refused_naming_the_key_and_nothing_is_written(
    spark: SparkSession, tmp_path: Path
) -> None:
    lake = Lake(spark, tmp_path / "lake")
    lake.merge("snapshots", spark.createDataFrame([("s0", 0)], DDL))
    before = lake.version("snapshots")
    clashing = spark.createDataFrame([("s1", 1), ("s1", 2), ("s2", 2)], DDL)
    with pytest.raises(DuplicateKeys, match=r"snapshots: .*\(snapshot_id\).*'snapshot_id': 's1'.*nothing was merged"):
        lake.merge("snapshots", clashing)
    assert lake.version("snapshots") == before
    assert [r["snapshot_id"] for r in lake.read("snapshots").collect()] == ["s0"]


def test_delete_removes_the_matching_rows_in_one_commit_and_commits_nothing_when_none_match(
    spark: SparkSession, tmp_path: Path
) -> None:
    lake = Lake(spark, tmp_path / "lake")
    lake.merge("snapshots", spark.createDataFrame([("s1", 1), ("it's", 2), ("s3", 3)], DDL))
    version = lake.version("snapshots")
    assert lake.delete("snapshots", "snapshot_id", ["it's", "s3"]) == 2  # a quote in a value is no injection
    assert lake.version("snapshots") == version + 1
    assert lake.delete("snapshots", "snapshot_id", ["nope"]) == 0
    assert lake.version("snapshots") == version + 1
    assert [r["snapshot_id"] for r in lake.read("snapshots").collect()] == ["s1"]
