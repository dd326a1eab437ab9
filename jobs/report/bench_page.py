"""Benchmark pages in the report's look: tables of figures and charts, written once and viewed offline."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from jobs.report.charts import Chart
from jobs.report.render import page


@dataclass(frozen=True)
class Figures:
    """One table of a benchmark page: a caption, the column headings and the rows (numbers sort as numbers)."""

    caption: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str | int | float, ...], ...]


def render_bench_page(title: str, lead: str, tables: Sequence[Figures], charts: Sequence[Chart]) -> str:
    """A whole benchmark page: heading, one explaining paragraph, the charts, then the sortable tables."""
    return page("bench.html.j2", title=title, lead=lead, tables=tables, charts=charts)
