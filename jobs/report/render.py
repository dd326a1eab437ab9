"""Render pages with the shared look: Jinja2 templates (autoescaped), the stylesheet and script inlined."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from importlib.resources import files
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from jobs.report import numbers
from jobs.report.charts import report_charts
from jobs.report.fleet import headline_value
from jobs.report.model import Assignor, Report
from jobs.report.triage import triage


def asset(name: str) -> Markup:
    """A file of ``static/``, to inline (a page fetches nothing when it is viewed)."""
    return Markup(files("jobs.report").joinpath("static", name).read_text(encoding="utf-8"))


def when(epoch_ms: int | None) -> str:
    """An epoch-ms time as ``2026-11-23 02:00 UTC``."""
    if epoch_ms is None:
        return "-"
    return datetime.fromtimestamp(epoch_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M UTC")


@cache
def environment() -> Environment:
    """Templates of ``jobs/report/templates``, always autoescaped, failing on a misspelled variable."""
    env = Environment(
        loader=PackageLoader("jobs.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        count=numbers.count,
        plural=numbers.plural,
        compact=numbers.compact,
        duration=numbers.duration,
        ratio=numbers.ratio,
        short_id=numbers.short_id,
        change=numbers.change,
        when=when,
    )
    env.globals.update(asset=asset, headline=headline_value, Assignor=Assignor, NOT_COMPUTED=numbers.NOT_COMPUTED)
    return env


def page(template: str, **context: Any) -> str:
    """Render one of the templates with the shared look."""
    return environment().get_template(template).render(**context)


def render_report(report: Report, links: dict[str, str] | None = None) -> str:
    """The whole report page; ``links``: label -> href shown in its header (e.g. the Data Docs)."""
    return page(
        "report.html.j2",
        report=report,
        fleet=report.fleet,
        charts=report_charts(report.rows),
        links=links or {},
        statuses=[s for s, _ in report.fleet.by_status],
        decision=triage(report.rows),
    )
