"""Stage 2, lags: per (group, instance, stateful task) lag with KIP-441 semantics → task_lags."""

from __future__ import annotations

import logging

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as sf

from assignor import AssignmentConfigs
from jobs.lakehouse.lake import Lake, MergeOutcome
from jobs.pipeline.buckets import group_buckets
from jobs.pipeline.group_settings import resolve_groups, settings_frame
from jobs.pipeline.stage import StageResult, resolve_snapshot
from jobs.settings import Settings

log = logging.getLogger(__name__)
LATEST_OFFSET, UNKNOWN_OFFSET_SUM = -2, -3


def lag_column(offset_sum: Column, end_offset_sum: Column) -> Column:
    """assignor.compute_lags per row: sentinels pass through; no state, or state ahead of the log, lags it all."""
    return (
        sf.when(offset_sum.isNull(), end_offset_sum)
        .when(offset_sum.isin(LATEST_OFFSET, UNKNOWN_OFFSET_SUM), offset_sum)
        .when(offset_sum > end_offset_sum, end_offset_sum)
        .otherwise(end_offset_sum - offset_sum)
    )


def offset_sum_from_lag(reported_lag: Column) -> Column:
    """The offset sum a Kafka Streams plugin's lag implies for a task the instance holds: sentinels pass
    through, a lag becomes end - lag against the end offsets read now."""
    end = sf.col("end_offset_sum")
    return (
        sf.when(reported_lag.isin(LATEST_OFFSET, UNKNOWN_OFFSET_SUM), reported_lag)
        .when(reported_lag < end, end - reported_lag)  # a lag of the whole log is no state: the sum stays null
        .cast("bigint")
    )


def task_lags(
    reports: DataFrame,
    tasks: DataFrame,
    offsets: DataFrame,
    acceptable_recovery_lag: int,
    group_lags: DataFrame | None = None,
) -> DataFrame:
    """One row per (snapshot, group, fresh instance, stateful task): offset sum, changelog end sum, lag, caught_up.

    ``reports``: member_reports rows; ``tasks``: group_tasks rows; ``offsets``: changelog_offsets rows;
    ``group_lags``: (group_id, acceptable_recovery_lag) rows, each group's own (group_settings.py), else
    ``acceptable_recovery_lag`` for every group.
    Stale reports are left out: their instances may be gone, and planning for them would strand tasks.
    """
    group = ["snapshot_id", "group_id"]
    fresh = reports.where(~sf.col("stale"))
    clients = fresh.select(*group, "process_id")
    acceptable: Column = sf.lit(acceptable_recovery_lag)
    if group_lags is not None:
        # Joined to the instances, not to the grid of every instance and task they become: 64 times fewer rows.
        own = group_lags.select("group_id", sf.col("acceptable_recovery_lag").alias("_acceptable_lag"))
        clients = clients.join(own, "group_id", "left")
        acceptable = sf.coalesce(sf.col("_acceptable_lag"), acceptable)
    sums = (
        fresh.select(*group, "process_id", sf.explode("task_offset_sums"))
        .withColumnRenamed("key", "task_id")
        .withColumnRenamed("value", "offset_sum")
    )
    # A plugin report dates from the last rebalance. A task the instance holds (active, standby or warmup) has
    # kept its state moving with the changelog since, so its lag, not its old offset sum, still holds. Any other
    # task's state has stood still: its offset sum (the plugin derives sums for every task it has state for)
    # lags by what was written since, and a bare lag would make it look caught up on those records, so a report
    # that has only lags (older plugins, end offsets not listed) gives such a task no state at all.
    held = sf.concat("active_tasks", "standby_tasks", "warmup_tasks")
    reported_lags = (
        fresh.where(sf.col("task_lags").isNotNull())
        .select(*group, "process_id", held.alias("held"), sf.explode("task_lags"))
        .where(sf.expr("array_contains(held, key)"))
        .select(*group, "process_id", sf.col("key").alias("task_id"), sf.col("value").alias("reported_lag"))
    )
    stateful = tasks.where(sf.col("stateful")).select(*group, "task_id")
    ends = offsets.groupBy(*group, "task_id").agg(sf.sum("end_offset").alias("end_offset_sum"))
    grid = (
        clients.join(stateful, group)
        .join(ends, [*group, "task_id"], "left")
        .join(sums, [*group, "process_id", "task_id"], "left")
        .join(reported_lags, [*group, "process_id", "task_id"], "left")
        .withColumn("end_offset_sum", sf.coalesce(sf.col("end_offset_sum"), sf.lit(0)).cast("bigint"))
        .withColumn("offset_sum", sf.coalesce(offset_sum_from_lag(sf.col("reported_lag")), sf.col("offset_sum")))
    )
    lag = lag_column(sf.col("offset_sum").cast("bigint"), sf.col("end_offset_sum"))
    return grid.select(
        *group,
        "process_id",
        "task_id",
        sf.col("offset_sum").cast("bigint").alias("offset_sum"),
        "end_offset_sum",
        lag.alias("lag"),
        ((lag == LATEST_OFFSET) | ((lag >= 0) & (lag <= acceptable))).alias("caught_up"),
    )


def run_lags(lake: Lake, settings: Settings, snapshot_id: str | None = None) -> StageResult:
    """Compute the snapshot's task_lags and MERGE them, ``settings.stage_bucket_groups`` groups at a time (a
    re-run finds every key present and writes nothing; one cut short writes only the buckets it missed)."""
    snapshot_id = resolve_snapshot(lake, snapshot_id)
    reports = lake.read("member_reports", snapshot_id)
    buckets = group_buckets(reports, snapshot_id, settings.stage_bucket_groups)
    outcomes = []
    for bucket in buckets:
        own = resolve_groups(bucket.rows(reports), settings.kip441_overrides)
        lags = task_lags(
            bucket.rows(reports),
            bucket.rows(lake.read("group_tasks", snapshot_id)),
            bucket.rows(lake.read("changelog_offsets", snapshot_id)),
            AssignmentConfigs().acceptable_recovery_lag,  # a group without reports has no lag rows anyway
            settings_frame(lake.spark, own),
        )
        outcomes.append(lake.merge("task_lags", lags, within=bucket.scope))
        log.info("lags %s: %s, %d rows written", snapshot_id, bucket, outcomes[-1].inserted)
    outcome = MergeOutcome.total("task_lags", outcomes, lake.version("task_lags"))
    log.info("lags %s: %d rows written", snapshot_id, outcome.inserted)
    return StageResult("lags", snapshot_id, (outcome,))
