"""The fleet summary: statuses, what tonight's plans cost, and each baseline beside them on the same groups."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence

from assignor.cost import PlanCost
from jobs.pipeline.status import PlanStatus
from jobs.report.model import (
    BASELINES,
    Aggregate,
    Assignor,
    BaselineComparison,
    Fleet,
    GroupRow,
    MetricComparison,
)

# (PlanCost field, label, the figure read first): groups change in parallel, so time and rounds are read as the longest.
METRICS = (
    ("moves", "moves", "total"),
    ("warmups", "warmups", "total"),
    ("rounds", "probing rebalances (longest group)", "maximum"),
    ("restore_offsets", "offsets to restore", "total"),
    ("estimated_seconds", "estimated time (longest group)", "maximum"),
)
TONIGHT = (PlanStatus.VALIDATED, PlanStatus.APPROVED, PlanStatus.PUBLISHED, PlanStatus.REALIZED)
TOP = 10


def _percentile(ordered: Sequence[float], q: float) -> float:
    """The nearest-rank percentile of a sorted, non-empty sequence."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def aggregate(values: Sequence[float | None]) -> Aggregate | None:
    """Total, median, 90th percentile and maximum of the values that are not None; None when there are none."""
    present = sorted(float(v) for v in values if v is not None)
    if not present:
        return None
    return Aggregate(
        len(present), math.fsum(present), _percentile(present, 0.5), _percentile(present, 0.9), present[-1]
    )


def _metric(cost: Callable[[GroupRow], PlanCost | None], metric: str) -> Callable[[GroupRow], float | None]:
    def value(row: GroupRow) -> float | None:
        c = cost(row)
        return None if c is None else getattr(c, metric)

    return value


def importance(row: GroupRow) -> tuple[float, float, float, str]:
    """Sort key, most important first: most offsets to restore, then the longest, then the most moves."""
    p = row.plan
    if p is None:
        return (0, 0.0, 0, row.group_id)
    return (-p.restore_offsets, -p.estimated_seconds, -p.moves, row.group_id)


def summarize(snapshot_id: str, rows: Sequence[GroupRow]) -> Fleet:
    """The fleet summary of a snapshot's plans (``rows``: one per group)."""
    coverage = {a: sum(1 for r in rows if a in r.baselines) for a in BASELINES}
    comparisons = []
    for metric, label, headline in METRICS:
        plan_value = _metric(lambda r: r.plan, metric)
        sides = []
        for assignor in BASELINES:
            covered = [r for r in rows if assignor in r.baselines]
            baseline_value = _metric(lambda r, a=assignor: r.baselines.get(a), metric)  # type: ignore[misc]
            sides.append(
                BaselineComparison(
                    assignor,
                    len(covered),
                    aggregate([plan_value(r) for r in covered]),
                    aggregate([baseline_value(r) for r in covered]),
                )
            )
        comparisons.append(
            MetricComparison(metric, label, headline, aggregate([plan_value(r) for r in rows]), tuple(sides))
        )
    bounded = [r for r in rows if r.plan is not None and r.restore_vs_bound is not None]
    restore_and_bound = (
        (sum(r.plan.restore_offsets for r in bounded if r.plan), sum(r.restore_lower_bound or 0 for r in bounded))
        if bounded
        else None
    )
    tonight = [r for r in rows if r.status in TONIGHT]
    by_status = sorted(Counter(r.status for r in rows).items(), key=lambda kv: (-kv[1], kv[0]))
    return Fleet(
        snapshot_id=snapshot_id,
        groups=len(rows),
        by_status=tuple(by_status),
        tonight=len(tonight),
        tonight_cost={m: aggregate([_metric(lambda r: r.plan, m)(r) for r in tonight]) for m, _, _ in METRICS},
        comparisons=tuple(comparisons),
        coverage=coverage,
        top=tuple(sorted(rows, key=importance)[:TOP]),
        restore_and_bound=restore_and_bound,
    )


def headline_value(aggregate_: Aggregate | None, headline: str) -> float | None:
    """The figure of an aggregate a person reads first (its total or its maximum)."""
    if aggregate_ is None:
        return None
    return aggregate_.total if headline == "total" else aggregate_.maximum


__all__ = ["METRICS", "TONIGHT", "Assignor", "aggregate", "headline_value", "importance", "summarize"]
