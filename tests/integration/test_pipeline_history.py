"""History queries: an instance holds what its latest report (at or before the time) says; plus the last plan."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from jobs.pipeline.history import owners_at, parse_as_of
from jobs.pipeline.stage import StageInputError
from jobs.pipeline.targets import HISTORY_DDL
from tests.support.pipeline_data import HISTORY_ROWS

pytestmark = pytest.mark.engines  # every spark test here runs on Sail and on Apache Spark with delta-spark


def owners(spark: SparkSession, task: str | None, as_of: int | None) -> set[tuple[object, ...]]:
    history = spark.createDataFrame(HISTORY_ROWS, HISTORY_DDL)
    return {tuple(r) for r in owners_at(history, "g0", task, as_of).collect()}


def test_owners_at_a_time_come_from_each_instances_report_then_and_the_plan_published_before(
    spark: SparkSession,
) -> None:
    # At 22: p1's last report (15) had 0_0 active through plan pA; p2 had not reported; pB was published at 20.
    assert owners(spark, "0_0", 22) == {
        ("0_0", "ACTIVE", "p1", "pA", "observed", 15),
        ("0_0", "ACTIVE", "p2", "pB", "published", 20),
    }
    # Latest: p1's report at 26 no longer holds 0_0; p2's at 25 does.
    assert owners(spark, "0_0", None) == {
        ("0_0", "ACTIVE", "p2", "pB", "observed", 25),
        ("0_0", "ACTIVE", "p2", "pB", "published", 20),
    }
    # Before anything was published or reported, nobody held anything.
    assert owners(spark, None, 5) == set()


def test_as_of_accepts_epoch_ms_and_iso_times_and_names_bad_input() -> None:
    assert parse_as_of("1700000000000") == 1_700_000_000_000
    assert parse_as_of("2023-11-14T22:13:20Z") == 1_700_000_000_000
    assert parse_as_of("2023-11-14T22:13:20") == 1_700_000_000_000  # no offset: UTC
    with pytest.raises(StageInputError, match="yesterday"):
        parse_as_of("yesterday")
