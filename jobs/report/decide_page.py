"""The decision page: the approval as a person decides it (the decision first, filters, checkboxes, a confirmation
with the counts). Written by the review task beside the report; the rebalance plugin serves it inside Airflow and
relays the answer."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from jobs.report.model import Report
from jobs.report.numbers import count, duration
from jobs.report.render import page
from jobs.report.triage import Choice, Kind, Triage, triage, versus


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
    risky = [c for c in t.change if c.row.risk is not None]
    largest = max(risky, key=lambda c: c.row.risk.largest_restore or 0 if c.row.risk else 0, default=None)
    ages = [c.row.source_age_ms / 1000 for c in t.change if c.row.source_age_ms is not None]
    settings: Counter[str] = Counter()
    rates: Counter[str] = Counter()
    for c in (*t.change, *t.keep, *(n for n in t.nothing if n.kind is Kind.NOTHING)):
        a = c.row.risk.assumptions if c.row.risk else None
        if a is None:
            continue
        settings[
            f"acceptable lag {count(a.acceptable_recovery_lag)} offsets, {count(a.num_standby_replicas)} standby, "
            f"{count(a.max_warmup_replicas)} warmups at a time, probing every "
            f"{duration((a.probing_rebalance_interval_ms or 0) / 1000)}"
        ] += 1
        rates[f"{count(a.restore_rate)} offsets/s ({a.restore_rate_source or 'default'})"] += 1
    top = largest.row.risk if largest is not None and largest.row.risk is not None else None
    return FleetRisk(
        unsafe_moves=sum(c.row.risk.unsafe_moves or 0 for c in risky if c.row.risk),
        unsafe_groups=sum(1 for c in risky if c.row.risk and c.row.risk.unsafe_moves),
        largest_restore=top.largest_restore if top else None,
        largest_group=largest.group_id if largest is not None and top and top.largest_restore else None,
        oldest_report_s=max(ages, default=None),
        incomplete=sum(1 for c in risky if c.row.risk and not c.row.risk.complete),
        settings=tuple(settings.most_common()),
        rates=tuple(rates.most_common()),
    )


def decision_path(reports: Path, snapshot_id: str) -> Path:
    """Where a snapshot's decision page lives: reports/decide/<snapshot_id>.html (not in the reports index)."""
    return reports / "decide" / f"{snapshot_id}.html"


def render_decision_page(report: Report, valid_until: int, timeout: str, links: Mapping[str, str] | None = None) -> str:
    """The decision page of a snapshot; ``valid_until`` (epoch ms) when the offered plans expire."""
    t = triage(report.rows)
    offered: Sequence[Choice] = (*t.change, *t.keep, *(c for c in t.nothing if c.row.status == "VALIDATED"))
    return page(
        "decide.html.j2",
        snapshot_id=report.snapshot_id,
        generated_at=report.generated_at,
        valid_until=valid_until,
        t=t,
        offered=offered,
        fleet_risk=fleet_risk(t),
        versus=versus(report.rows),
        groups=report.fleet.groups,
        by_status=report.fleet.by_status,
        timeout=timeout,
        links=dict(links or {}),
        page_data={"offered": len(offered), "candidates": [c.group_id for c in offered]},
    )


def write_decision_page(report: Report, reports: Path, valid_until: int, timeout: str,
                        links: Mapping[str, str] | None = None) -> Path:  # fmt: skip
    """Render the decision page to reports/decide/<snapshot_id>.html."""
    path = decision_path(reports, report.snapshot_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_decision_page(report, valid_until, timeout, links), encoding="utf-8")
    return path
