"""Stage 8b, report: one HTML page per snapshot — per group the load per instance before and after, the plan's
steps, moves, restore offsets and validation outcome."""

from __future__ import annotations

import html
import logging
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import functions as sf

from jobs.lakehouse.lake import Lake
from jobs.pipeline.stage import resolve_snapshot
from jobs.pipeline.targets import target_rows

log = logging.getLogger(__name__)
_BAR_H, _BAR_W, _LABEL_W = 14, 260, 170


@dataclass
class GroupReport:
    """What the page shows for one group's plan."""

    plan: dict[str, object]
    before: dict[str, tuple[int, int]] = field(default_factory=dict)  # process -> (actives, standbys)
    after: dict[str, tuple[int, int]] = field(default_factory=dict)
    steps: dict[int, dict[str, int]] = field(default_factory=dict)  # step -> role -> count
    checks: tuple[int, int] = (0, 0)  # (passed, total)


def load_chart(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> str:
    """An inline SVG: per instance, actives and standbys now (grey) and at the target (blue)."""
    pids = sorted(set(before) | set(after))
    top = max([a + s for a, s in [*before.values(), *after.values()]] or [1]) or 1
    height = len(pids) * (2 * _BAR_H + 8) + 4
    parts = [f'<svg width="{_LABEL_W + _BAR_W + 60}" height="{height}" role="img">']
    y = 2
    for pid in pids:
        parts.append(f'<text x="0" y="{y + _BAR_H + 4}" font-size="11">{html.escape(pid)}</text>')
        for (active, standby), colors in (
            (before.get(pid, (0, 0)), ("#888", "#ccc")),
            (after.get(pid, (0, 0)), ("#2b6cb0", "#90cdf4")),
        ):
            wa, ws = _BAR_W * active / top, _BAR_W * standby / top
            parts.append(f'<rect x="{_LABEL_W}" y="{y}" width="{wa:.1f}" height="{_BAR_H - 2}" fill="{colors[0]}"/>')
            parts.append(
                f'<rect x="{_LABEL_W + wa:.1f}" y="{y}" width="{ws:.1f}" height="{_BAR_H - 2}" fill="{colors[1]}"/>'
            )
            parts.append(
                f'<text x="{_LABEL_W + wa + ws + 4:.1f}" y="{y + 10}" font-size="10">{active}+{standby}</text>'
            )
            y += _BAR_H
        y += 8
    parts.append("</svg>")
    return "".join(parts)


def collect(lake: Lake, snapshot_id: str, group_ids: list[str] | None, limit: int) -> list[GroupReport]:
    """The plans of the snapshot (the given groups, else the ``limit`` with the most moves) and their numbers."""
    plans = lake.read("plans", snapshot_id)
    if group_ids:
        plans = plans.where(sf.col("group_id").isin(group_ids))
    chosen = plans.orderBy(sf.col("moves").desc_nulls_last(), "group_id").limit(limit).collect()
    reports = {r["plan_id"]: GroupReport(r.asDict()) for r in chosen}
    by_group = {r["group_id"]: r["plan_id"] for r in chosen}
    ids, groups = list(reports), list(by_group)
    members = lake.read("member_reports", snapshot_id).where(sf.col("group_id").isin(groups) & ~sf.col("stale"))
    for r in members.select("group_id", "process_id", sf.size("active_tasks"), sf.size("standby_tasks")).collect():
        reports[by_group[r[0]]].before[r[1]] = (int(r[2]), int(r[3]))
    assignments = lake.read("plan_assignments").where(sf.col("plan_id").isin(ids))
    after: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for r in target_rows(assignments).groupBy("plan_id", "process_id", "role").count().collect():
        after[(r["plan_id"], r["process_id"])][0 if r["role"] == "ACTIVE" else 1] = int(r["count"])
    for (plan_id, pid), (active, standby) in after.items():
        reports[plan_id].after[pid] = (active, standby)
    for r in assignments.groupBy("plan_id", "step", "role").count().collect():
        reports[r["plan_id"]].steps.setdefault(int(r["step"]), {})[r["role"]] = int(r["count"])
    results = lake.read("validation_results").where(sf.col("plan_id").isin(ids))
    for r in results.groupBy("plan_id").agg(sf.sum(sf.col("success").cast("int")), sf.count(sf.lit(1))).collect():
        reports[r[0]].checks = (int(r[1]), int(r[2]))
    return [reports[p] for p in ids]


def _group_html(g: GroupReport) -> str:
    p = g.plan
    rows = "".join(
        f"<tr><td>{step}</td><td>{roles.get('ACTIVE', 0)}</td><td>{roles.get('STANDBY', 0)}</td>"
        f"<td>{roles.get('WARMUP', 0)}</td></tr>"
        for step, roles in sorted(g.steps.items())
    )
    passed, total = g.checks
    validation = f"{passed}/{total} expectations passed" if total else "not validated"
    reason = f"<p class=reason>{html.escape(str(p['reason']))}</p>" if p.get("reason") else ""
    return (
        f"<section><h2>{html.escape(str(p['group_id']))} <span class=status>{p['status']}</span></h2>"
        f"<p>plan <code>{html.escape(str(p['plan_id']))}</code>: {p['moves']} moves, {p['warmups']} warmups, "
        f"{p['rounds']} steps, {p['restore_offsets']} offsets to restore; {validation}</p>{reason}"
        f"<div class=chart>{load_chart(g.before, g.after)}</div>"
        f"<table><tr><th>step</th><th>active</th><th>standby</th><th>warmup</th></tr>{rows}</table></section>"
    )


def render(snapshot_id: str, groups: list[GroupReport]) -> str:
    """The whole page."""
    body = "".join(_group_html(g) for g in groups) or "<p>No plans in this snapshot.</p>"
    return (
        "<!doctype html><html><head><meta charset=utf-8>"
        f"<title>Rebalance plans — snapshot {html.escape(snapshot_id)}</title><style>"
        "body{font-family:sans-serif;margin:2em}section{border-top:1px solid #ddd;padding:.5em 0}"
        "table{border-collapse:collapse}td,th{border:1px solid #ddd;padding:2px 8px;text-align:right}"
        ".status{font-size:.7em;background:#eee;padding:2px 6px}.reason{color:#b00}</style></head><body>"
        f"<h1>Rebalance plans — snapshot {html.escape(snapshot_id)}</h1>"
        "<p>Bars: actives+standbys per instance now (grey) and at the target (blue).</p>"
        f"{body}</body></html>"
    )


def run_report(
    lake: Lake, snapshot_id: str | None, out: Path | None, group_ids: list[str] | None = None, limit: int = 100
) -> Path:
    """Write the snapshot's HTML report (default: reports/<snapshot_id>.html beside the lake); return its path."""
    snapshot = resolve_snapshot(lake, snapshot_id)
    groups = collect(lake, snapshot, group_ids, limit)
    path = out or lake.root.parent / "reports" / f"{snapshot}.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(snapshot, groups), encoding="utf-8")
    log.info("report %s: %d group(s) written to %s", snapshot, len(groups), path)
    return path
