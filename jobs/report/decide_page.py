"""The decision page: the approval as a person decides it (the decision first, filters, checkboxes, a confirmation
with the counts). Written by the review task beside the report; the rebalance plugin serves it inside Airflow and
relays the answer."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from jobs.pipeline.status import PlanStatus
from jobs.report.model import GroupRow, Report
from jobs.report.render import page
from jobs.report.triage import Triage, triage, versus


@dataclass(frozen=True)
class FleetRisk:
    """The risk figures over the changing groups and the assumptions behind every offered plan."""

    unsafe_moves: int
    unsafe_groups: int
    largest_restore: int | None
    largest_group: str | None
    oldest_report_s: float | None
    incomplete: int
    settings: tuple[tuple[str, int], ...]  # a setting combination and how many offered plans use it
    rates: tuple[tuple[str, int], ...]


def fleet_risk(t: Triage) -> FleetRisk:
    """Fleet-wide risk of approving the changing groups, and the assumptions of every offered plan."""
    risks = [(c.group_id, c.row.risk) for c in t.change if c.row.risk is not None]
    largest = max(risks, key=lambda gr: gr[1].largest_restore or 0, default=None)
    ages = [c.row.source_age_ms / 1000 for c in t.change if c.row.source_age_ms is not None]
    settings: Counter[str] = Counter()
    rates: Counter[str] = Counter()
    for c in t.awaiting:  # NOOP groups are not offered: their assumptions decide nothing
        a = c.row.risk.assumptions if c.row.risk else None
        if a is None:
            continue
        settings[a.settings_text] += 1
        rates[a.rate_text] += 1
    top = largest[1].largest_restore if largest is not None else None
    return FleetRisk(
        unsafe_moves=sum(r.unsafe_moves or 0 for _, r in risks),
        unsafe_groups=sum(1 for _, r in risks if r.unsafe_moves),
        largest_restore=top,
        largest_group=largest[0] if largest is not None and top else None,
        oldest_report_s=max(ages, default=None),
        incomplete=sum(1 for _, r in risks if not r.complete),
        settings=tuple(settings.most_common()),
        rates=tuple(rates.most_common()),
    )


def decision_path(reports: Path, snapshot_id: str) -> Path:
    """Where a snapshot's decision page lives: reports/decide/<snapshot_id>.html (not in the reports index)."""
    return reports / "decide" / f"{snapshot_id}.html"


# Plans that were published: what the page shows once the decision is carried out.
_CARRIED_OUT = (PlanStatus.PUBLISHED, PlanStatus.REALIZED, PlanStatus.EXPIRED, PlanStatus.WITHDRAWN,
                PlanStatus.SUPERSEDED)  # fmt: skip


def outcomes(rows: list[GroupRow] | tuple[GroupRow, ...]) -> list[GroupRow]:
    """The published plans, realized first, by group: estimate beside what observe saw."""
    done = [r for r in rows if r.published_at is not None and r.status in _CARRIED_OUT]
    return sorted(done, key=lambda r: (r.status != PlanStatus.REALIZED, r.group_id))


def render_decision_page(report: Report, valid_until: int, timeout: str, links: Mapping[str, str] | None = None) -> str:
    """The decision page of a snapshot; ``valid_until`` (epoch ms) when the offered plans expire."""
    t = triage(report.rows)
    offered = t.awaiting
    return page(
        "decide.html.j2",
        snapshot_id=report.snapshot_id,
        generated_at=report.generated_at,
        valid_until=valid_until,
        t=t,
        offered=offered,
        fleet_risk=fleet_risk(t),
        outcomes=outcomes(report.rows),
        versus=versus(report.rows),
        groups=report.fleet.groups,
        by_status=report.fleet.by_status,
        timeout=timeout,
        links=dict(links or {}),
        page_data={"offered": len(offered)},
    )


def write_decision_page(report: Report, reports: Path, valid_until: int, timeout: str,
                        links: Mapping[str, str] | None = None) -> Path:  # fmt: skip
    """Render the decision page to reports/decide/<snapshot_id>.html."""
    path = decision_path(reports, report.snapshot_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_decision_page(report, valid_until, timeout, links), encoding="utf-8")
    # What refresh_decision_page needs to write the same page again once the plans have run.
    shown = {"valid_until": valid_until, "timeout": timeout, "links": dict(links or {})}
    path.with_suffix(".json").write_text(json.dumps(shown), encoding="utf-8")
    return path


def has_decision_page(reports: Path, snapshot_id: str) -> bool:
    """Whether review wrote a decision page for the snapshot (so observe should write it again)."""
    return decision_path(reports, snapshot_id).with_suffix(".json").is_file()


def refresh_decision_page(report: Report, reports: Path) -> Path | None:
    """Write a snapshot's decision page again from the lake now (observe calls it: estimate beside actual), with
    the validity and links it was first written with; None when the snapshot has no decision page."""
    path = decision_path(reports, report.snapshot_id)
    try:
        shown = json.loads(path.with_suffix(".json").read_text(encoding="utf-8"))
        valid_until, timeout, links = int(shown["valid_until"]), str(shown["timeout"]), dict(shown["links"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    path.write_text(render_decision_page(report, valid_until, timeout, links), encoding="utf-8")
    return path
