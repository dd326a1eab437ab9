"""Observed restore rates on Sail: what copies behind acceptable.recovery.lag in two snapshots replayed, per
instance, over the time between its two reports."""

from __future__ import annotations

from pyspark.sql import SparkSession

from jobs.pipeline.restore_rates import instance_restores

LAGS = "group_id string, process_id string, task_id string, offset_sum bigint, lag bigint, caught_up boolean"
REPORTS = "group_id string, process_id string, reported_at bigint, stale boolean"


def test_only_copies_restoring_in_both_snapshots_count(spark: SparkSession) -> None:
    before = spark.createDataFrame(
        [
            ("g1", "p1", "0_0", 100_000, 900_000, False),  # restoring: +300k by the next snapshot
            ("g1", "p1", "0_1", 500_000, 500_000, False),  # restoring: +300k
            ("g1", "p1", "0_2", 990_000, 20_000, False),  # catches up in between: left out
            ("g1", "p2", "0_0", -2, -2, True),  # the running active: left out
            ("g1", "p2", "0_1", 700_000, 5_000, True),  # a caught-up standby following the log: left out
        ],
        LAGS,
    )
    after = spark.createDataFrame(
        [
            ("g1", "p1", "0_0", 400_000, 600_000, False),
            ("g1", "p1", "0_1", 800_000, 200_000, False),
            ("g1", "p1", "0_2", 1_000_000, 5_000, True),
            ("g1", "p2", "0_0", -2, -2, True),
            ("g1", "p2", "0_1", 900_000, 3_000, True),
        ],
        LAGS,
    )
    reports_before = spark.createDataFrame([("g1", "p1", 1_000_000, False), ("g1", "p2", 1_000_000, False)], REPORTS)
    reports_after = spark.createDataFrame([("g1", "p1", 1_060_000, False), ("g1", "p2", 1_060_000, False)], REPORTS)
    rows = instance_restores(before, after, reports_before, reports_after).collect()
    assert [(r["group_id"], r["process_id"], r["replayed"], r["seconds"]) for r in rows] == [
        ("g1", "p1", 600_000, 60.0)
    ]
