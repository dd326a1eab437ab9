"""One lake, two engines: tables written by embedded Sail are read and extended by Apache Spark with delta-spark,
and the other way round; both engines' commits are in the Delta log, and delta-rs reads them all."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from jobs.lakehouse.lake import Lake
from jobs.lakehouse.tables import table_schema


def _baselines(spark: SparkSession, plans: range) -> DataFrame:
    rows = [
        (f"s/g{i}", "s", f"g{i}", "kip441", i, i, i + 1, 100 * i, 60.0 * i, True) for i in plans
    ]  # fmt: skip
    return spark.createDataFrame(rows, table_schema("plan_baselines").ddl)


def test_a_lake_written_by_one_engine_is_read_and_extended_by_the_other(
    spark: SparkSession, apache_spark: SparkSession, tmp_path: Path
) -> None:
    sail, jvm = Lake(spark, tmp_path / "lake"), Lake(apache_spark, tmp_path / "lake")
    first = sail.merge("plan_baselines", _baselines(spark, range(0, 3)))
    assert first.inserted == 3

    # Apache Spark reads Sail's table, then MERGEs into it: new keys inserted, the existing ones left alone.
    assert jvm.read("plan_baselines").count() == 3
    second = jvm.merge("plan_baselines", _baselines(apache_spark, range(2, 6)))
    assert (second.inserted, second.updated) == (3, 0) and second.version == first.version + 1
    assert jvm.merge("plan_baselines", _baselines(apache_spark, range(2, 6))).changed is False  # a re-run: no commit

    # Sail reads what Apache Spark wrote, also as of the version before it, and extends it in turn.
    assert sorted(r["group_id"] for r in sail.read("plan_baselines").collect()) == [f"g{i}" for i in range(6)]
    assert sail.read("plan_baselines", version=first.version).count() == 3
    assert sail.merge("plan_baselines", _baselines(spark, range(5, 8))).inserted == 2

    # Delta's own history on Apache Spark names both writers; delta-rs reads the same log.
    engines = [
        r["engineInfo"] or ""
        for r in apache_spark.sql(f"DESCRIBE HISTORY delta.`{jvm.path('plan_baselines')}`").collect()
    ]
    assert any(e.startswith("Apache-Spark/") and "Delta-Lake/" in e for e in engines), engines
    assert len(engines) == len(sail.history("plan_baselines")) >= 3
    before = apache_spark.sql(f"SELECT * FROM delta.`{jvm.path('plan_baselines')}` VERSION AS OF {first.version}")
    assert before.count() == 3
    assert jvm.read("plan_baselines").count() == 8


def test_apache_spark_reads_and_merges_a_table_past_its_checkpoints(
    spark: SparkSession, apache_spark: SparkSession, tmp_path: Path
) -> None:
    # Delta writes a checkpoint (a parquet summary of the log) every 10th commit, and reads it from then on: a
    # nightly table has one within two weeks. delta-spark 4.1.0 calls a Spark 4.1.0 constructor that Spark 4.1.4
    # removed, so on pyspark 4.1.4 the first read after a checkpoint failed with NoSuchMethodError.
    sail, jvm = Lake(spark, tmp_path / "lake"), Lake(apache_spark, tmp_path / "lake")
    for night in range(12):
        lake = jvm if night % 2 else sail  # both engines' commits, as when the demo runs on either
        assert lake.merge("plan_baselines", _baselines(lake.spark, range(night, night + 1))).inserted == 1
    checkpoints = list((tmp_path / "lake").glob("**/_delta_log/*.checkpoint*.parquet"))
    assert checkpoints, "no checkpoint was written: the test no longer reaches the path it guards"
    assert jvm.read("plan_baselines").count() == 12
    assert jvm.merge("plan_baselines", _baselines(apache_spark, range(11, 13))).inserted == 1
    assert sail.read("plan_baselines").count() == 13
