"""The restore rate plans are estimated with: the configured one, else what the state reports show instances
replaying between the previous snapshot and this one, else the assignor's documented default."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pyspark.sql import DataFrame
from pyspark.sql import functions as sf

from assignor.estimate import DEFAULT_RESTORE_RATE
from jobs.lakehouse.lake import Lake
from jobs.pipeline.rate_source import RateSource


@dataclass(frozen=True)
class InstanceRestore:
    """Offsets one instance's restoring copies replayed between its two reports, and the seconds between them."""

    group_id: str
    process_id: str
    replayed: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.replayed / self.seconds


@dataclass(frozen=True)
class RestoreRates:
    """Restore rates per group (offsets/second/instance) and the fleet's median, from observed instances."""

    configured: float | None = None
    per_group: Mapping[str, float] = field(default_factory=dict)
    fleet: float | None = None

    @classmethod
    def observed(cls, instances: Iterable[InstanceRestore], configured: float | None = None) -> RestoreRates:
        """The median rate of each group's restoring instances, and of all of them; instances that replayed
        nothing or whose reports are not apart in time tell nothing and are left out."""
        by_group: dict[str, list[float]] = {}
        for instance in instances:
            if instance.replayed > 0 and instance.seconds > 0:
                by_group.setdefault(instance.group_id, []).append(instance.rate)
        every = [rate for rates in by_group.values() for rate in rates]
        return cls(
            configured=configured,
            per_group={g: statistics.median(rates) for g, rates in sorted(by_group.items())},
            fleet=statistics.median(every) if every else None,
        )

    def for_group(self, group_id: str) -> tuple[float, RateSource]:
        """The rate to estimate the group's plan with, and where it came from."""
        if self.configured is not None:
            return self.configured, RateSource.SETTINGS
        if group_id in self.per_group:
            return self.per_group[group_id], RateSource.OBSERVED
        if self.fleet is not None:
            return self.fleet, RateSource.FLEET
        return DEFAULT_RESTORE_RATE, RateSource.DEFAULT


def instance_restores(
    previous_lags: DataFrame, lags: DataFrame, previous_reports: DataFrame, reports: DataFrame
) -> DataFrame:
    """(group_id, process_id, replayed, seconds) per instance with copies that were restoring throughout: behind
    the acceptable lag in both snapshots (task_lags), not running as active, and further along in the later one.

    A copy that caught up in between replayed less than the instance could have, so it is left out: the rate
    is what a restore that keeps going achieves. ``seconds`` is the time between the instance's two reports.
    """
    key = ["group_id", "process_id", "task_id"]

    def restoring(frame: DataFrame, suffix: str) -> DataFrame:
        behind = frame.where(~sf.col("caught_up") & (sf.col("offset_sum") >= 0) & (sf.col("lag") >= 0))
        return behind.select(*key, sf.col("offset_sum").alias(f"offset_sum_{suffix}"))

    def reported(frame: DataFrame, suffix: str) -> DataFrame:
        return frame.where(~sf.col("stale")).select(
            "group_id", "process_id", sf.col("reported_at").alias(f"reported_at_{suffix}")
        )

    copies = (
        restoring(previous_lags, "before")
        .join(restoring(lags, "after"), key)
        .where(sf.col("offset_sum_after") > sf.col("offset_sum_before"))
    )
    per_instance = copies.groupBy("group_id", "process_id").agg(
        sf.sum(sf.col("offset_sum_after") - sf.col("offset_sum_before")).alias("replayed")
    )
    return (
        per_instance.join(reported(previous_reports, "before"), ["group_id", "process_id"])
        .join(reported(reports, "after"), ["group_id", "process_id"])
        .select(
            "group_id",
            "process_id",
            sf.col("replayed").cast("bigint").alias("replayed"),
            ((sf.col("reported_at_after") - sf.col("reported_at_before")) / 1000.0).alias("seconds"),
        )
    )


def previous_snapshot(lake: Lake, snapshot_id: str) -> str | None:
    """The snapshot extracted last before ``snapshot_id``, if any."""
    snapshots = lake.read("snapshots").select("snapshot_id", "captured_at")
    this = snapshots.where(sf.col("snapshot_id") == snapshot_id).collect()
    if not this:
        return None
    earlier = (
        snapshots.where(sf.col("captured_at") < this[0]["captured_at"])
        .orderBy(sf.col("captured_at").desc(), sf.col("snapshot_id").desc())
        .limit(1)
        .collect()
    )
    return str(earlier[0]["snapshot_id"]) if earlier else None


def restore_rates(lake: Lake, snapshot_id: str, configured: float | None) -> RestoreRates:
    """The rates the snapshot's plans are estimated with: ``configured`` if set (nothing is read), else observed
    against the previous snapshot (none: the default)."""
    if configured is not None:
        return RestoreRates(configured=configured)
    previous = previous_snapshot(lake, snapshot_id)
    if previous is None:
        return RestoreRates()
    rows = instance_restores(
        lake.read("task_lags", previous),
        lake.read("task_lags", snapshot_id),
        lake.read("member_reports", previous),
        lake.read("member_reports", snapshot_id),
    ).collect()
    return RestoreRates.observed(
        InstanceRestore(r["group_id"], r["process_id"], int(r["replayed"]), float(r["seconds"])) for r in rows
    )
