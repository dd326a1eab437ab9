"""The demo's planning phase: the planning DAG triggered with the demo's KIP-441 settings, followed task by task to
the approval step, the approval page shown and answered (or left to a person), and the run followed to its end."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from rich.console import Console
from rich.markdown import Markdown

from jobs.demo.progress import DemoError, Progress
from jobs.demo.start import KIP441
from jobs.local.airflow import LocalAirflow
from jobs.polling import wait_until

PLANNING, OBSERVE = "rebalance_planning", "rebalance_observe"
STAGES = ("extract", "lags", "plan", "validate", "review", "approval", "publish")


@dataclass(frozen=True)
class PlanningRun:
    """A triggered planning run and its tasks seen finishing so far (each is printed once)."""

    run_id: str
    seen: set[str]


def follow_run(
    airflow: LocalAirflow, run_id: str, say: Progress, until: set[str], timeout_s: float, seen: set[str]
) -> None:
    """Print each task as it finishes (once: ``seen`` remembers), until ``until`` are done or waiting for a person."""

    def advanced() -> bool:
        states = airflow.task_states(PLANNING, run_id)
        for task in STAGES:
            state = states.get(task)
            if task not in seen and state in ("success", "awaiting_input"):
                seen.add(task)
                say(f"  {task}: {state.replace('_', ' ')}")
            if state in ("failed", "upstream_failed"):
                raise DemoError(f"task {task} {state}; see the Airflow UI or {airflow.home / 'logs'}")
        return until <= seen

    wait_until(advanced, timeout_s, f"the DAG run to reach {', '.join(sorted(until))}", poll_s=1.0)


def run_planning(airflow: LocalAirflow, args: argparse.Namespace, console: Console, say: Progress) -> PlanningRun:
    """Trigger the planning DAG with the demo's KIP-441 settings and follow it to the approval step."""
    airflow.wait_ready(args.timeout)
    airflow.wait_for_dag(PLANNING, args.timeout)
    console.rule("Airflow")
    console.print(f"UI: [bold]{airflow.url}[/bold]  user [bold]admin[/bold]  password [bold]{airflow.password()}")
    params: dict[str, Any] = dict(KIP441.columns())
    if args.interactive:
        params["approval_timeout_s"] = 3600
    run_id = airflow.trigger(PLANNING, params)
    say(f"triggered {PLANNING} run {run_id}")
    seen: set[str] = set()
    follow_run(airflow, run_id, say, {"review", "approval"}, args.timeout, seen)
    return PlanningRun(run_id, seen)


def approve(airflow: LocalAirflow, run: PlanningRun, args: argparse.Namespace, console: Console, say: Progress) -> str:
    """Show the approval page; approve everything (or wait for a person); follow the run to its end; its snapshot."""
    run_id = run.run_id
    detail = airflow.wait_for_approval(PLANNING, run_id, "approval", args.timeout)
    console.rule(detail["subject"])
    console.print(Markdown(detail["body"]))
    approval_url = f"{airflow.url}/dags/{PLANNING}/runs/{quote(run_id)}/tasks/approval/required_actions"
    if args.interactive:
        console.print(f"Waiting for your decision in the UI: [bold]{approval_url}[/bold]")
    else:
        # Imported here: Airflow takes seconds to import and every other CLI command would pay for it.
        from jobs.orchestration.decision import APPROVE_ALL  # noqa: PLC0415

        airflow.answer(PLANNING, run_id, "approval", [APPROVE_ALL], {"selected_groups": None, "reason": "demo"})
        say(f"approved through the REST API as admin ({APPROVE_ALL}); the page was {approval_url}")
    state = airflow.wait_for_run(PLANNING, run_id, 3700 if args.interactive else args.timeout)
    if state != "success":
        raise DemoError(f"the DAG run ended {state}; see {airflow.url}")
    follow_run(airflow, run_id, say, set(STAGES), 30, run.seen)
    snapshot = str(airflow.api("GET", f"/dags/{PLANNING}/dagRuns/{quote(run_id)}/taskInstances/extract/"
                                      "xcomEntries/return_value")["value"])  # fmt: skip
    return snapshot
