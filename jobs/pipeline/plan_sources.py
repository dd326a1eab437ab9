"""How much a plan's figures can be trusted: the age of the reports it was made from, and, for report-only groups,
the held replicas whose offset sums the metadata lacks (their restore is unknown, not a full restore).

The rule (docs/plan-lifecycle.md, "Report-only plans"): in a group read from broker group metadata, a replica an
instance holds (active, standby or warmup, per the assignment the broker describes) whose offset sum is absent or
the unknown sentinel (-3) is *missing*. Kafka Streams sends offset sums when a member joins, so a task assigned in
that very rebalance has none, although its instance holds and restores it. The planner prices such a replica as a
full restore; when the target keeps it where it is, that price is taken out of ``restore_offsets``, the plan counts
``missing_offset_sums`` and says ``incomplete_offsets``: its restore figure is then a lower bound."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as sf

from jobs.pipeline.lags import LATEST_OFFSET, UNKNOWN_OFFSET_SUM
from jobs.pipeline.streams_groups import GROUP_METADATA

_GROUP = ["snapshot_id", "group_id"]


def source_ages(reports: DataFrame, earlier: DataFrame) -> DataFrame:
    """(snapshot_id, group_id, source_age_ms): the oldest fresh report's age at the snapshot's capture.

    ``reports``: the snapshot's member_reports; ``earlier``: member_reports of any snapshots (this one included).
    A report read from group metadata is dated at capture, but its metadata is as old as the member's generation:
    its age is at least the time since the first snapshot that saw the same process in the same generation."""
    fresh = reports.where(~sf.col("stale"))
    metadata = (
        earlier.where((sf.col("origin") == GROUP_METADATA) & (sf.col("generation") >= 0))
        .groupBy("group_id", "process_id", "generation")
        .agg(sf.min("captured_at").alias("first_seen"))
    )
    since = sf.when(
        (sf.col("origin") == GROUP_METADATA) & sf.col("first_seen").isNotNull(),
        sf.least(sf.col("first_seen"), sf.col("reported_at")),
    ).otherwise(sf.col("reported_at"))
    return (
        fresh.join(metadata, ["group_id", "process_id", "generation"], "left")
        .groupBy(*_GROUP)
        .agg(sf.max(sf.greatest(sf.col("captured_at") - since, sf.lit(0))).cast("bigint").alias("source_age_ms"))
    )


def missing_offset_sums(reports: DataFrame, lags: DataFrame) -> DataFrame:
    """(snapshot_id, group_id, process_id, task_id, end_offset_sum, offset_sum) of every missing replica: a stateful
    task a fresh report-only instance holds without a usable offset sum."""
    held = sf.concat("active_tasks", "standby_tasks", "warmup_tasks")
    holding = (
        reports.where(~sf.col("stale") & (sf.col("origin") == GROUP_METADATA))
        .select(*_GROUP, "process_id", sf.explode(held).alias("task_id"))
        .distinct()
    )
    unknown = sf.col("offset_sum").isNull() | (sf.col("offset_sum") == UNKNOWN_OFFSET_SUM)
    return (
        holding.join(lags, [*_GROUP, "process_id", "task_id"])
        .where(unknown)
        .select(*_GROUP, "process_id", "task_id", "end_offset_sum", "offset_sum")
    )


def owed(offset_sum: Column, end_offset_sum: Column, acceptable_recovery_lag: Column) -> Column:
    """What the planner charged a replica with this offset sum (assignor.lags.restore_owed of its lag)."""
    lag = sf.when(offset_sum.isNull(), end_offset_sum).otherwise(offset_sum)
    caught_up = (lag == LATEST_OFFSET) | ((lag >= 0) & (lag <= acceptable_recovery_lag))
    return sf.when(caught_up, sf.lit(0)).when(lag < 0, end_offset_sum).otherwise(lag)


def with_source_facts(
    plans: DataFrame, assignments: DataFrame, reports: DataFrame, lags: DataFrame, earlier: DataFrame
) -> DataFrame:
    """``plans`` rows with source_age_ms, missing_offset_sums and incomplete_offsets, and restore_offsets without
    the full restores the planner charged for missing replicas its target keeps in place (see the module doc).

    ``assignments``: the plans' plan_assignments rows; ``reports``, ``lags``: the snapshot's member_reports and
    task_lags; ``earlier``: member_reports of every snapshot, for the age of group metadata."""
    missing = missing_offset_sums(reports, lags)
    counts = missing.groupBy(*_GROUP).agg(sf.count(sf.lit(1)).cast("int").alias("missing_offset_sums"))
    # Only groups with missing replicas (report-only ones) are read further: most groups have none, and the
    # assignments are hundreds of rows a group.
    concerned = assignments.join(counts.select(*_GROUP), _GROUP, "left_semi")
    last = concerned.groupBy("plan_id").agg(sf.max("step").alias("step"))
    kept = (
        concerned.join(last, ["plan_id", "step"])
        .where(sf.col("role").isin("ACTIVE", "STANDBY"))
        .select("plan_id", *_GROUP, "process_id", "task_id")
        .distinct()
        .join(missing, [*_GROUP, "process_id", "task_id"])
        .join(plans.select("plan_id", "acceptable_recovery_lag"), "plan_id")
    )
    unpriced = kept.groupBy("plan_id").agg(
        sf.sum(owed(sf.col("offset_sum"), sf.col("end_offset_sum"), sf.col("acceptable_recovery_lag")))
        .cast("bigint")
        .alias("unpriced")
    )
    missing_count = sf.coalesce(sf.col("missing_offset_sums"), sf.lit(0)).cast("int")
    restore = sf.col("restore_offsets") - sf.coalesce(sf.col("unpriced"), sf.lit(0))
    bound = sf.col("restore_lower_bound")
    return (
        plans.join(source_ages(reports, earlier), _GROUP, "left")
        .join(counts, _GROUP, "left")
        .join(unpriced, "plan_id", "left")
        .withColumn("missing_offset_sums", missing_count)
        .withColumn("incomplete_offsets", missing_count > 0)
        .withColumn("restore_offsets", sf.when(restore.isNotNull(), sf.greatest(restore, sf.lit(0))).cast("bigint"))
        # The planner's bound priced missing replicas as full restores too: kept at most the figure left.
        .withColumn("restore_lower_bound", sf.when(bound.isNotNull(), sf.least(bound, sf.col("restore_offsets"))))
        .drop("unpriced")
    )
