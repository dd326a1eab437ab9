"""MERGE sources with repeated keys: exact copies merge once; two different rows for one key are refused whole."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from jobs.lakehouse.lake import DuplicateKeys, Lake, OutsideScope, Scope
from jobs.lakehouse.tables import table_schema

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


def lag_rows(spark: SparkSession, snapshot_id: str, groups: list[str], lag: int) -> DataFrame:
    rows = [(snapshot_id, g, "p1", "0_0", 5, 5 + lag, lag, lag == 0) for g in groups]
    return spark.createDataFrame(rows, table_schema("task_lags").ddl)


def test_a_merge_within_a_scope_reads_and_changes_only_that_part_and_refuses_rows_outside_it(
    spark: SparkSession, tmp_path: Path
) -> None:
    lake = Lake(spark, tmp_path / "lake")
    lake.merge("task_lags", lag_rows(spark, "s1", ["a", "b", "c"], 0))
    lake.merge("task_lags", lag_rows(spark, "s2", ["a"], 0), within=Scope("s2"))
    scope = Scope("s2", "b", "c")
    outcome = lake.merge("task_lags", lag_rows(spark, "s2", ["b"], 3), within=scope)
    assert (outcome.inserted, outcome.updated) == (1, 0)
    version = lake.version("task_lags")
    assert not lake.merge("task_lags", lag_rows(spark, "s2", ["b"], 3), within=scope).changed  # a re-run: nothing
    assert lake.version("task_lags") == version
    with pytest.raises(OutsideScope, match=r"task_lags: rows outside .*'group_id': 'c'.*nothing was merged"):
        lake.merge("task_lags", lag_rows(spark, "s2", ["b", "c"], 3), within=scope)
    assert lake.version("task_lags") == version
    got = sorted((r["snapshot_id"], r["group_id"], r["lag"]) for r in lake.read("task_lags").collect())
    assert got == [("s1", "a", 0), ("s1", "b", 0), ("s1", "c", 0), ("s2", "a", 0), ("s2", "b", 3)]


def test_a_merge_within_a_scope_updates_rows_keyed_without_the_scopes_columns(
    spark: SparkSession, tmp_path: Path
) -> None:
    """plans are keyed by plan_id alone: the scope narrows what is read, the MERGE still matches on the key."""
    lake = Lake(spark, tmp_path / "lake")
    ddl = "plan_id string, snapshot_id string, group_id string, status string, created_at bigint"
    lake.merge(
        "plans", spark.createDataFrame([("s1/a", "s1", "a", "PENDING", 1), ("s2/a", "s2", "a", "PENDING", 2)], ddl)
    )
    done = spark.createDataFrame([("s2/a", "s2", "a", "VALIDATED", 2)], ddl)
    assert lake.merge("plans", done, update=["status"], within=Scope("s2", "a", None)).updated == 1
    assert not lake.merge("plans", done, update=["status"], within=Scope("s2", "a", None)).changed
    assert sorted((r["plan_id"], r["status"]) for r in lake.read("plans").collect()) == [
        ("s1/a", "PENDING"),
        ("s2/a", "VALIDATED"),
    ]


def membership_row(member_id: str | None, process_id: str | None, code: str) -> tuple[object, ...]:
    return ("s1", 1, "g", member_id, process_id, code, None, None, None, None, None)


def test_keys_that_share_a_hash_but_differ_are_merged_as_different_rows(spark: SparkSession, tmp_path: Path) -> None:
    # The census groups rows by a hash of their key, and the hash skips nulls: (null, "a") and ("a", null) share one.
    # Both are new keys, so both are inserted: no DuplicateKeys, and not taken for copies of one row.
    lake = Lake(spark, tmp_path / "lake")
    ddl = table_schema("membership_checks").ddl
    rows = spark.createDataFrame([membership_row(None, "a", "one"), membership_row("a", None, "two")], ddl)
    outcome = lake.merge("membership_checks", rows)
    assert (outcome.inserted, outcome.updated) == (2, 0)
    got = {(r["member_id"], r["process_id"], r["code"]) for r in lake.read("membership_checks").collect()}
    assert got == {(None, "a", "one"), ("a", None, "two")}
    # A real repeat among them is still refused whole.
    clashing = [membership_row(None, "b", "one"), membership_row("b", None, "two"), membership_row(None, "b", "three")]
    with pytest.raises(DuplicateKeys, match=r"membership_checks: .*'process_id': 'b'.*nothing was merged"):
        lake.merge("membership_checks", spark.createDataFrame(clashing, ddl))
    assert lake.read("membership_checks").count() == 2
