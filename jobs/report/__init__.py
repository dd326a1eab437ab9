"""The HTML report of a snapshot's plans and the approval page's summary: what tonight's plans do, beside what
Kafka's own assignors would do on the same snapshot."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

from jobs.lakehouse.lake import Lake
from jobs.pipeline.stage import resolve_snapshot
from jobs.report.collect import build_report
from jobs.report.model import Report
from jobs.report.render import render_report

log = logging.getLogger(__name__)


def report_path(lake: Lake, snapshot_id: str) -> Path:
    """Where a snapshot's report lives by default: reports/<snapshot_id>.html beside the lake."""
    return lake.root.parent / "reports" / f"{snapshot_id}.html"


def write_report(report: Report, path: Path, links: Mapping[str, str] | None = None) -> Path:
    """Render ``report`` to ``path`` (one self-contained file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_report(report, dict(links or {})), encoding="utf-8")
    log.info("report %s: %d group(s), %d detailed, written to %s", report.snapshot_id, len(report.rows),
             len(report.details), path)  # fmt: skip
    return path


def run_report(
    lake: Lake,
    snapshot_id: str | None,
    out: Path | None,
    group_ids: Sequence[str] | None = None,
    limit: int = 1000,
    links: Mapping[str, str] | None = None,
) -> Path:
    """Write the snapshot's report (default: reports/<snapshot_id>.html beside the lake); return its path."""
    snapshot = resolve_snapshot(lake, snapshot_id)
    return write_report(build_report(lake, snapshot, group_ids, limit), out or report_path(lake, snapshot), links)


__all__ = ["Report", "build_report", "report_path", "run_report", "write_report"]
