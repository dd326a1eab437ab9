"""What the demo prints at its end (the live groups' plans and convergence, the report-only groups, where the
report, Data Docs and Airflow are) and its engine check."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from jobs.demo.converge import plans_of
from jobs.demo.engine import DELTA_SPARK_PREFIX, SPARK, CommitEngines, DemoEngine
from jobs.demo.live import LIVE_GROUPS, STREAMS_GROUP
from jobs.demo.progress import DemoError
from jobs.local.airflow import LocalAirflow
from jobs.pipeline.status import PlanStatus
from jobs.settings import Settings


def print_outcome(
    console: Console, settings: Settings, airflow: LocalAirflow, snapshot_id: str, times: dict[str, float]
) -> None:
    """The live groups' plans and convergence times, which engine wrote the lake, then where the report, Data Docs
    and Airflow are."""
    final_table(console, snapshot_id, plans_of(settings.lake_root, snapshot_id), times)
    console.print(f"Lake:          {CommitEngines.read(settings.lake_root).summary()}")
    report = settings.lake_root.parent / "reports" / f"{snapshot_id}.html"
    console.print(f"HTML report:   [bold]{report}[/bold]")
    console.print(f"GX Data Docs:  [bold]{settings.data_docs / 'index.html'}[/bold]")
    console.print(f"Airflow UI:    [bold]{airflow.url}[/bold] (stops with the demo)")


def check_engine(engine: DemoEngine, settings: Settings) -> None:
    """On the Apache Spark server the demo started, every commit of the lake's tables must be delta-spark's: a stage
    that ran on Sail instead (SPARK_REMOTE lost on the way to a task) fails the demo. (A server SPARK_REMOTE names
    may be any Spark Connect server, Sail's included: its commits are only counted.)"""
    if engine.name != SPARK or engine.server is None:
        return
    others = CommitEngines.read(settings.lake_root).not_written_by(DELTA_SPARK_PREFIX)
    if others:
        found = "; ".join(f"{table}: {', '.join(engines)}" for table, engines in sorted(others.items()))
        raise DemoError(f"the demo ran on Apache Spark, but tables hold commits by other engines: {found}")


def final_table(console: Console, snapshot: str, plans: dict[str, dict[str, Any]], times: dict[str, float]) -> None:
    table = Table(title=f"live groups: plans of snapshot {snapshot}")
    for column in ("group", "protocol", "plan", "moves", "rounds", "converged", "time"):
        table.add_column(column, justify="right" if column in ("moves", "rounds", "time") else "left")
    for g in LIVE_GROUPS:
        p = plans.get(g, {})
        done = g in times
        table.add_row(
            g,
            "streams" if g == STREAMS_GROUP else "classic",
            str(p.get("status", "-")),
            str(p.get("moves", "-")),
            str(p.get("rounds", "-")),
            "yes" if done or p.get("status") == PlanStatus.NOOP else "no",
            f"{times[g]:.1f}s" if done else "-",
        )
    console.print(table)
    sims = [p for g, p in plans.items() if g not in LIVE_GROUPS]
    statuses: dict[str, int] = {}
    for p in sims:
        statuses[str(p["status"])] = statuses.get(str(p["status"]), 0) + 1
    moves = sum(int(p["moves"]) for p in sims)
    console.print(
        f"{len(sims)} report-only simulated groups (no instances run them; observe compares their last reports): "
        + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))
        + f"; {moves} moves planned"
    )
