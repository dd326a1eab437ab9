"""Groups that should have reported and did not (``membership_checks`` codes of jobs.pipeline.plugin_groups): read
for the report and the approval page, which show them beside the plans."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pyspark.sql import functions as sf

from jobs.lakehouse.lake import Lake
from jobs.pipeline.plugin_groups import (
    PLUGIN_GROUP_WITHOUT_REPORTS,
    PLUGIN_UNDER_STREAMS_PROTOCOL,
    REPORTING_GAPS,
    REPORTS_TOPIC_MISSING,
    STREAMS_ASSIGNOR_MISSING,
)
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


_HEADINGS = {
    PLUGIN_GROUP_WITHOUT_REPORTS: "Plugin groups without reports",
    REPORTS_TOPIC_MISSING: "Groups that could not report (no reports topic)",
    PLUGIN_UNDER_STREAMS_PROTOCOL: "Plugin groups now on the streams protocol (the plugin does nothing there)",
    STREAMS_ASSIGNOR_MISSING: "Streams-protocol groups no plan can reach (the brokers lack our assignor)",
}


def gaps_markdown(gaps: Sequence[ReportingGap], escape: Callable[[object], str] = str) -> list[str]:
    """Markdown lines for the approval page, a list per kind of gap (empty when there is none); ``escape`` makes
    text literal Markdown."""
    lines: list[str] = []
    for code in REPORTING_GAPS:
        mine = [g for g in gaps if g.code == code]
        if mine:
            lines += ["", f"**{_HEADINGS[code]}** ({len(mine)}): report-only.", ""]
            lines += [f"* {escape(g.group_id)}: {escape(g.reason.split(': ', 1)[-1])}" for g in mine]
    return lines
