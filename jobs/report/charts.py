"""The report's charts: Vega-Lite specs built with Altair, rendered to SVG when the report is written (vl-convert
carries Vega and Vega-Lite), so a page needs no script and nothing fetched to show them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import altair as alt
import numpy as np
import pandas as pd
import vl_convert

from jobs.report.model import BASELINES, Assignor, GroupRow

# One palette for the report and the benchmark pages: the plan in blue, the baselines in warm colours.
COLORS = {Assignor.PLAN: "#2563eb", Assignor.KIP441: "#dc2626", Assignor.STREAMS_BROKER: "#d97706"}
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"
WIDTH = 340
TOP_GROUPS = 12


@dataclass(frozen=True)
class Chart:
    """A rendered chart: its title, a sentence for screen readers, and the SVG markup."""

    title: str
    description: str
    svg: str


def _vl_version() -> str:
    # Altair's schema version (e.g. v6.4.1) as vl-convert names its bundled Vega-Lite releases (6.4).
    return ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])


def to_svg(chart: alt.TopLevelMixin) -> str:
    """The chart as standalone SVG (no script, no external reference)."""
    spec = chart.to_dict()
    return str(vl_convert.vegalite_to_svg(spec, vl_version=_vl_version()))


def _styled(chart: alt.Chart, title: str) -> alt.Chart:
    styled: alt.Chart = (
        # The browser's system font runs wider than the one vl-convert measures labels with: room on the left.
        chart.properties(title=title, width=WIDTH, height=180, padding={"left": 40, "top": 5, "right": 5, "bottom": 5})
        .configure(font=FONT, background="transparent")
        .configure_view(stroke=None)
        .configure_axis(labelFontSize=11, titleFontSize=11, gridColor="#e5e7eb")
        .configure_legend(orient="bottom", direction="vertical", labelFontSize=11, titleFontSize=11, labelLimit=0)
        .configure_title(fontSize=13, anchor="start")
    )
    return styled


def _color(present: Sequence[Assignor]) -> alt.Color:
    labels = [a.label for a in present]
    return alt.Color(
        "assignor:N",
        title=None,
        scale=alt.Scale(domain=labels, range=[COLORS[a] for a in present]),
        sort=labels,
    )


def _long(rows: Sequence[GroupRow], metric: str) -> tuple[pd.DataFrame, list[Assignor]]:
    """(group, assignor, value) for the plan and every baseline computed, one frame for grouped bars."""
    records = []
    present = [Assignor.PLAN]
    for a in BASELINES:
        if any(a in r.baselines for r in rows):
            present.append(a)
    for r in rows:
        costs = {**({Assignor.PLAN: r.plan} if r.plan is not None else {}), **r.baselines}
        for a in present:
            value = getattr(costs[a], metric) if a in costs else None
            if value is not None:
                records.append({"group": r.group_id, "assignor": a.label, "value": float(value)})
    return pd.DataFrame.from_records(records, columns=["group", "assignor", "value"]), present


def nice_step(span: float, bins: int) -> float:
    """The smallest 1, 2 or 5 x 10^k step that covers ``span`` in at most ``bins`` bins."""
    raw = max(span, 1e-9) / bins
    power = 10 ** math.floor(math.log10(raw))
    return float(next(m * power for m in (1, 2, 5, 10) if raw <= m * power * (1 + 1e-9)))


def binned(values: pd.Series, bins: int = 10) -> tuple[pd.Series, list[str]]:
    """Each value's bin label and the labels in order. Bins start at multiples of a round step and never overlap:
    integers read ``0-1``, ``2-3`` (both ends included); fractions ``0.5 to <1.0`` (the upper end excluded)."""
    low, high = float(values.min()), float(values.max())
    whole = bool((values % 1 == 0).all())
    if whole and high - low < bins:
        labels = [f"{v:,.0f}" for v in range(int(low), int(high) + 1)]
        return values.map("{:,.0f}".format), labels
    # One value (a single group, or all alike) spans nothing: a bin of a round width around it, not of 1e-10.
    step = nice_step(high - low if high > low else max(abs(high), 1.0), bins)
    if whole:
        step = max(1.0, float(round(step)))
    start = math.floor(low / step) * step
    count = max(1, math.floor((high - start) / step) + 1)
    edges = [start + i * step for i in range(count + 1)]
    digits = 0 if step >= 1 else -math.floor(math.log10(step))
    if whole:
        labels = [f"{a:,.0f}" if step == 1 else f"{a:,.0f}-{b - 1:,.0f}" for a, b in pairwise(edges)]
    else:
        labels = [f"{a:,.{digits}f} to <{b:,.{digits}f}" for a, b in pairwise(edges)]
    index = np.clip(((values - start) // step).astype(int), 0, len(labels) - 1)
    return pd.Series([labels[i] for i in index], index=values.index), labels


def distribution(rows: Sequence[GroupRow], metric: str, title: str, axis: str, scale: float = 1.0) -> Chart | None:
    """How many groups need how much of ``metric``: bars per value bin, the plan beside each baseline."""
    frame, present = _long(rows, metric)
    if frame.empty:
        return None
    frame["bin"], order = binned(frame["value"] / scale)
    counts = frame.groupby(["bin", "assignor"], as_index=False).size().rename(columns={"size": "groups"})
    chart = (
        alt.Chart(counts)
        .mark_bar()
        .encode(
            x=alt.X("bin:O", sort=order, title=axis, axis=alt.Axis(labelAngle=-40)),
            xOffset=alt.XOffset("assignor:N", sort=[a.label for a in present]),
            y=alt.Y("groups:Q", title="groups"),
            color=_color(present),
        )
    )
    who = " and ".join(a.label for a in present)
    return Chart(title, f"Number of groups by {axis}, for {who}.", to_svg(_styled(chart, title)))


def grouped_bars(frame: pd.DataFrame, present: Sequence[Assignor], order: Sequence[str], axis: str, title: str) -> str:
    """Horizontal bars of ``frame`` (label, assignor, value), one row per label in ``order``, the assignors side
    by side in the shared palette, as SVG."""
    chart = (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            y=alt.Y("label:N", sort=list(order), title=None, axis=alt.Axis(labelLimit=200)),
            yOffset=alt.YOffset("assignor:N", sort=[a.label for a in present]),
            x=alt.X("value:Q", title=axis, axis=alt.Axis(format="~s")),
            color=_color(present),
        )
    )
    return to_svg(_styled(chart, title).properties(height=max(120, 22 * len(order))))


def largest(rows: Sequence[GroupRow], metric: str, title: str, axis: str) -> Chart | None:
    """The groups with the most ``metric`` under the plan, each bar beside the baselines' figure."""
    chosen = sorted((r for r in rows if r.figure(metric)), key=lambda r: -(r.figure(metric) or 0))
    frame, present = _long(chosen[:TOP_GROUPS], metric)
    if frame.empty:
        return None
    order = [r.group_id for r in chosen[:TOP_GROUPS]]
    who = " and ".join(a.label for a in present)
    return Chart(
        title,
        f"Bar chart of {axis} for the {len(order)} groups with the most, for {who}.",
        grouped_bars(frame.rename(columns={"group": "label"}), present, order, axis, title),
    )


def report_charts(rows: Sequence[GroupRow]) -> tuple[Chart, ...]:
    """The first screen's charts, those that have data."""
    charts = (
        largest(rows, "restore_offsets", "Offsets to restore: the largest groups", "offsets"),
        distribution(rows, "moves", "Moves per group", "moves"),
        _time_distribution(rows),
    )
    return tuple(c for c in charts if c is not None)


def _time_distribution(rows: Sequence[GroupRow]) -> Chart | None:
    """Estimated time per group, in seconds when every group takes under two minutes, else in minutes."""
    longest = max((r.figure("estimated_seconds") or 0 for r in rows), default=0)
    if longest < 120:
        return distribution(rows, "estimated_seconds", "Estimated time per group", "seconds")
    return distribution(rows, "estimated_seconds", "Estimated time per group", "minutes", scale=60.0)
