"""Report-only groups: planned from the broker's group metadata, they run neither our plugin nor our runtime, so
an approved plan of theirs is HELD, never published (docs/plan-lifecycle.md)."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import functions as sf

from jobs.lakehouse.lake import Lake
from jobs.pipeline.streams_groups import GROUP_METADATA

REPORT_ONLY_REASON = (
    "report-only: the group's reports were read from its group metadata (an unmodified Kafka Streams group has "
    "neither our plugin nor our runtime to honor a plan); not published"
)


def report_only_groups(lake: Lake, snapshot_ids: Sequence[str]) -> set[str]:
    """Groups whose reports in those snapshots came from group metadata: nothing may be published to them."""
    if not snapshot_ids:
        return set()
    reports = lake.read("member_reports").where(sf.col("snapshot_id").isin(list(snapshot_ids)))
    rows = reports.where(sf.col("origin") == GROUP_METADATA).select("group_id").distinct().collect()
    return {r["group_id"] for r in rows}
