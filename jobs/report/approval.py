"""The approval page's summary in Markdown (Airflow renders the HITL body as Markdown): the fleet beside KIP-441
and the groups with the most to restore."""

from __future__ import annotations

from collections.abc import Sequence

from jobs.pipeline.status import PlanStatus
from jobs.report import numbers
from jobs.report.fleet import headline_value
from jobs.report.model import Assignor, Fleet, GroupRow

TOP_ROWS = 15


_MARKDOWN = str.maketrans({c: "\\" + c for c in "\\`*_[]<>|#~!"})


def md(value: object) -> str:
    """Text as literal Markdown: punctuation that Markdown or HTML would read is backslash-escaped."""
    return "-" if value is None else " ".join(str(value).split()).translate(_MARKDOWN)


def _figure(metric: str, value: float | None) -> str:
    return numbers.duration(value) if metric == "estimated_seconds" else numbers.count(value)


def comparison_table(fleet: Fleet) -> list[str]:
    """Markdown rows: each metric for the plans, KIP-441 and the broker-side assignment ("not computed" when absent)."""
    lines = ["| | this plan | " + " | ".join(a.label for a in (Assignor.KIP441, Assignor.STREAMS_BROKER)) + " |",
             "|---|---:|---:|---:|"]  # fmt: skip
    for c in fleet.comparisons:
        cells = [
            c.label + (", total" if c.headline == "total" else ""),
            _figure(c.metric, headline_value(c.plan, c.headline)),
        ]
        for b in c.baselines:
            if not b.groups:
                cells.append(numbers.NOT_COMPUTED)
                continue
            base, mine = headline_value(b.baseline, c.headline), headline_value(b.plan, c.headline)
            text = f"{_figure(c.metric, base)} ({numbers.change(mine, base)})"
            if b.groups < fleet.groups:
                text += f", on {numbers.count(b.groups)} groups where this plan: {_figure(c.metric, mine)}"
            cells.append(text)
        lines.append("| " + " | ".join(md(x) for x in cells) + " |")
    return lines


def summary_markdown(fleet: Fleet, rows: Sequence[GroupRow], top: int = TOP_ROWS) -> str:
    """Statuses, tonight's totals, the comparison and the groups awaiting a decision with the most to restore."""
    statuses = ", ".join(f"{numbers.count(n)} {s}" for s, n in fleet.by_status) or "none"
    awaiting = [r for r in rows if r.status == PlanStatus.VALIDATED]
    lines = [f"**{numbers.plural(fleet.groups, 'group')}** planned: {statuses}."]
    if awaiting:
        mine = [r.plan for r in awaiting if r.plan is not None]
        longest = max((p.estimated_seconds for p in mine), default=None)
        lines.append(
            f"Approving every validated plan ({numbers.plural(len(awaiting), 'group')}) makes "
            f"{numbers.plural(sum(p.moves for p in mine), 'move')}, "
            f"{numbers.plural(sum(p.warmups for p in mine), 'warmup')} and restores "
            f"{numbers.plural(sum(p.restore_offsets for p in mine), 'offset')}; the longest group takes "
            f"{numbers.duration(longest)}."
        )
    else:
        lines.append("No plan awaits a decision.")
    lines += ["", *comparison_table(fleet), ""]
    ranked = sorted(rows, key=lambda r: (r.status != PlanStatus.VALIDATED, -(r.plan.restore_offsets if r.plan else 0),
                                         -(r.plan.moves if r.plan else 0), r.group_id))  # fmt: skip
    lines += [
        f"**The groups with the most to restore** (awaiting a decision first; {min(top, len(ranked))} of "
        f"{numbers.count(len(ranked))}):",
        "",
        "| group | status | moves | warmups | rebalances | offsets to restore | KIP-441 would restore "
        "| estimated time |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in ranked[:top]:
        kip = r.baselines.get(Assignor.KIP441)
        status = r.status + (f": {r.reason}" if r.reason else "") + (f"; {r.drain_note}" if r.drain_note else "")
        if r.report_only and r.report_only not in (r.reason or ""):  # holding the plan copies it into the reason
            status += f"; {r.report_only}"
        status += f"; {r.source_note}" if r.source_note else ""
        cells = [
            r.group_id,
            status,
            numbers.count(r.plan.moves if r.plan else None),
            numbers.count(r.plan.warmups if r.plan else None),
            numbers.count(r.plan.rounds if r.plan else None),
            r.restore_figure,
            numbers.count(kip.restore_offsets) if kip else numbers.NOT_COMPUTED,
            numbers.duration(r.plan.estimated_seconds if r.plan else None),
        ]
        lines.append("| " + " | ".join(md(c) for c in cells) + " |")
    if len(ranked) > top:
        lines.append(f"\n… and {numbers.plural(len(ranked) - top, 'more group')} in the HTML report.")
    lines += settings_changes_markdown(rows)
    return "\n".join(lines)


def settings_changes_markdown(rows: Sequence[GroupRow]) -> list[str]:
    """Every plan whose KIP-441 settings differ from its group's own, all of them (never cut to the top rows): a
    person approving sees each group whose standbys, lag or interval the plan would change."""
    changed = sorted((r for r in rows if r.settings_changes), key=lambda r: r.group_id)
    if not changed:
        return []
    lines = [
        "",
        f"**Settings change** in {numbers.plural(len(changed), 'plan')}: the group runs with other KIP-441 "
        "settings than the plan (an override, or a change validation rejected):",
        "",
        "| group | status | settings change |",
        "|---|---|---|",
    ]
    lines += [f"| {md(r.group_id)} | {md(r.status)} | {md(r.settings_changes)} |" for r in changed]
    return lines
