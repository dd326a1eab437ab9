"""Groups that should have reported and did not (``membership_checks`` codes of jobs.pipeline.plugin_groups): read
for the report and the approval page, which show them beside the plans."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyspark.sql import functions as sf

from jobs.lakehouse.lake import Lake
from jobs.pipeline.plugin_groups import REPORTING_GAPS
from jobs.report.model import ReportingGap


def reporting_gaps(lake: Lake, snapshot_id: str) -> tuple[ReportingGap, ...]:
    """The snapshot's reporting gaps, one per group."""
    rows = (
        lake.read("membership_checks", snapshot_id)
        .where(sf.col("code").isin(list(REPORTING_GAPS)))
        .select("group_id", "code", "reason")
        .orderBy("group_id")
        .collect()
    )
    return tuple(ReportingGap(r["group_id"], r["code"], r["reason"]) for r in rows)


def gaps_markdown(gaps: Sequence[ReportingGap], escape: Callable[[object], str] = str) -> list[str]:
    """Markdown lines for the approval page (empty when every group that should report did); ``escape`` makes
    text literal Markdown."""
    if not gaps:
        return []
    head = f"**Plugin groups without reports** ({len(gaps)}): planned from group metadata only, as report-only."
    return ["", head, "", *(f"* {escape(g.group_id)}: {escape(g.reason.split(': ', 1)[-1])}" for g in gaps)]
