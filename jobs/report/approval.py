"""The approval page in Markdown (Airflow renders the HITL body as Markdown) and its subject: the decision first (what
changes, what is kept, what needs nothing), the changing groups ranked with their why and risk, the fleet beside
Kafka's own assignors, what an approval binds, the links. Pure: the review task hands it the report."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime

from jobs.orchestration.decision import duration as timeout_text
from jobs.pipeline.approval_record import ApprovedDigest, fingerprint, short
from jobs.report import numbers
from jobs.report.fleet import headline_value
from jobs.report.gaps import gaps_markdown
from jobs.report.model import Assignor, Fleet, GroupRow, Report
from jobs.report.triage import Choice, Triage, triage, versus

TOP_ROWS = 15  # groups the approval page lists per kind; the decision page and the HTML report have them all


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


def _names(choices: Sequence[Choice], top: int, extra: Callable[[Choice], str] | None = None) -> str:
    """The first ``top`` group ids, each with ``extra`` and its notes (drain, report-only) in brackets."""

    def name(c: Choice) -> str:
        inside = "; ".join(x for x in ((extra(c) if extra else ""), _notes(c.row)) if x)
        return md(c.group_id) + (f" ({md(inside)})" if inside else "")

    shown = [name(c) for c in choices[:top]]
    more = f", … and {numbers.count(len(choices) - top)} more" if len(choices) > top else ""
    return ", ".join(shown) + more


def _notes(r: GroupRow) -> str:
    """What the row's status adds: drains, report-only, settings (the why column says the rest)."""
    notes = [r.drain_note, r.source_note]
    if r.report_only and r.report_only not in (r.reason or ""):  # holding the plan copies it into the reason
        notes.append(r.report_only)
    return "; ".join(n for n in notes if n)


def scope_table(t: Triage, fleet: Fleet) -> list[str]:
    """What approving each scope does, every figure labelled with the groups it counts."""
    statuses = ", ".join(f"{numbers.count(n)} {s}" for s, n in fleet.by_status) or "none"
    header = [
        "| approving | plans | moves | warmups | offsets to restore | longest group | left to KIP-441 |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    lines = [
        *header,
        *(
            f"| {label} | {numbers.count(sc.groups)} | {numbers.count(sc.moves)} | {numbers.count(sc.warmups)} "
            f"| {numbers.count(sc.restore_offsets)} | {numbers.duration(sc.longest_s)} | {sc.left_to_kip441 or '-'} |"
            for label, sc in t.scopes()
        ),
        "",
        f"Of {numbers.plural(fleet.groups, 'group')} planned ({statuses}), only VALIDATED plans await a decision; "
        "NOOP groups are balanced already and are not offered.",
    ]
    return lines


def summary_markdown(fleet: Fleet, rows: Sequence[GroupRow], top: int = TOP_ROWS) -> str:
    """The decision first (what changes, what is only kept, what needs nothing), the scoped totals, the changing
    groups ranked by risk and by difference from KIP-441 with their why, then the rest and the fleet comparison."""
    t = triage(rows)
    lines = [f"**{md(t.headline())}.**", "", *scope_table(t, fleet), ""]
    if t.change:
        lines += [
            f"**Changing groups**, highest risk first, then the most different from KIP-441 "
            f"({min(top, len(t.change))} of {numbers.count(len(t.change))}):",
            "",
            "| risk | group | why | moves | KIP-441 would move | warmups | offsets to restore | estimated time "
            "| risk figures and notes |",
            "|---|---|---|---:|---|---:|---:|---:|---|",
        ]
        for c in t.change[:top]:
            r = c.row
            cells = [
                c.risk.value,
                r.group_id,
                c.why,
                numbers.count(c.moves),
                c.versus_kip441,
                numbers.count(c.warmups),
                r.restore_figure,
                numbers.duration(r.plan.estimated_seconds if r.plan else None),
                "; ".join(x for x in (*c.risks, _notes(r)) if x) or "-",
            ]
            lines.append("| " + " | ".join(md(x) for x in cells) + " |")
        if len(t.change) > top:
            lines.append(f"\n… and {numbers.plural(len(t.change) - top, 'more changing group')} on the decision page.")
    else:
        lines.append("No group changes.")
    if t.keep:
        lines += [
            "",
            f"**{numbers.plural(len(t.keep), 'plan')} {'keeps' if len(t.keep) == 1 else 'keep'} the current "
            "assignment** (no move; without them KIP-441 "
            f"would move {numbers.plural(t.prevented, 'task')}): "
            + _names(t.keep, top, lambda c: f"KIP-441 would move {numbers.count(c.kip441_moves)}"),
        ]
    if t.nothing:
        lines += [
            "",
            f"**{numbers.plural(len(t.nothing), 'group')} {'needs' if len(t.nothing) == 1 else 'need'} nothing**: "
            + _names(t.nothing, top),
        ]
    if t.decided:
        lines += ["", f"**Not awaiting a decision** ({numbers.plural(len(t.decided), 'plan')}):", "",
                  "| group | status |", "|---|---|"]  # fmt: skip
        for c in t.decided[:top]:
            r = c.row
            status = r.status + (f": {r.reason}" if r.reason else "") + (f"; {_notes(r)}" if _notes(r) else "")
            lines.append(f"| {md(r.group_id)} | {md(status)} |")
        if len(t.decided) > top:
            lines.append(f"\n… and {numbers.plural(len(t.decided) - top, 'more')} in the HTML report.")
    lines += [
        "",
        f"**Beside Kafka's own assignors**, over all {numbers.plural(fleet.groups, 'group')} planned (NOOP and "
        "rejected included; a baseline's figures on the groups it was computed for):",
        "",
        *comparison_table(fleet),
        "",
        "**Why not Kafka's own assignors** (offered plans): "
        + " ".join(md(v.sentence()) for v in versus(rows) if v.computed),
    ]
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


def subject_title(snapshot_id: str) -> str:
    """``Rebalance 2026-11-26 14:22``: the snapshot's time (its id starts with it), else the id."""
    try:
        return "Rebalance " + datetime.strptime(snapshot_id[:15], "%Y%m%dT%H%M%S").strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return f"Rebalance {snapshot_id}"


def digests_markdown(offered: Mapping[str, ApprovedDigest]) -> list[str]:
    """What an approval binds: each offered plan's digest (short form, the first groups) and one fingerprint of all."""
    if not offered:
        return []
    entries = sorted(offered.values(), key=lambda e: e.group_id)
    lines = [
        "",
        f"**What you approve**: {numbers.plural(len(entries), 'plan')}, fingerprint "
        f"`{short(fingerprint((e.plan_id, e.plan_digest) for e in entries))}`. Each plan is bound to its digest "
        "(target, settings, move order, validity): a plan changed after this page was made is not signed.",
        "",
        "| group | plan digest | valid until (epoch ms) |",
        "|---|---|---|",
        *(f"| {md(e.group_id)} | `{short(e.plan_digest)}` | {e.valid_until} |" for e in entries[:TOP_ROWS]),
    ]
    if len(entries) > TOP_ROWS:
        lines.append(
            f"\n{numbers.plural(len(entries) - TOP_ROWS, 'more plan')}: their digests are in the approval record."
        )
    return lines


def approval_body(
    report: Report,
    report_link: str,
    data_docs_link: str,
    filtered_out: int,
    timeout_s: float,
    offered: Mapping[str, ApprovedDigest] | None = None,
    decide_link: str = "",
) -> str:
    """The approval page (Markdown): the decision (what changes, what is kept, what needs nothing), the changing
    groups ranked with their why and risk, the fleet beside Kafka's assignors, what an approval binds, the links."""
    lines = [
        f"### Decide: snapshot `{report.snapshot_id}`",
        "",
        *([decide_link + ": filter, tick the plans, confirm with the counts.", ""] if decide_link else []),
        summary_markdown(report.fleet, report.rows, TOP_ROWS),
        *gaps_markdown(report.reporting_gaps, md),
        *digests_markdown(offered or {}),
    ]
    if filtered_out:
        lines.append(
            f"\n{numbers.plural(filtered_out, 'plan')} outside this run's group filter "
            f"{'is' if filtered_out == 1 else 'are'} not offered and will be rejected."
        )
    lines += [
        "",
        f"**HTML report** (every group, sortable, with each group's steps): {report_link}  ",
        f"**Great Expectations Data Docs**: {data_docs_link}",
        "",
        "*Approve all validated* approves every VALIDATED plan above (keep and no-change plans included); *Approve "
        "selected groups* approves the groups listed in the form (the others are rejected); *Reject all* publishes "
        "nothing. "
        f"Without an answer within {timeout_text(timeout_s)} every plan is rejected.",
    ]
    return "\n".join(lines)


def approval_subject(report: Report) -> str:
    """The Required Actions subject: the snapshot's time and the decision's counts."""
    return triage(report.rows).subject(subject_title(report.snapshot_id))
