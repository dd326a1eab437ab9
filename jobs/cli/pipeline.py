"""The pipeline's subcommands of ``rebalance-planner``: one per stage, plus history and report."""
# ruff: noqa: PLC0415 -- Spark, Delta and Great Expectations load when a pipeline command runs, not at CLI start

from __future__ import annotations

import argparse
import getpass
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.logging import RichHandler
from rich.table import Table

from jobs.settings import Settings

if TYPE_CHECKING:
    from jobs.lakehouse.lake import Lake
    from jobs.pipeline.stage import StageResult

EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT = 0, 1, 2
COMMANDS = ("extract", "lags", "plan", "baselines", "validate", "approve", "publish", "observe", "history", "report")
_HELP = {
    "extract": "read reports, the broker's group members, changelog end offsets and committed offsets into a new "
    "bronze snapshot; reports are checked against the members",
    "lags": "compute per-task lags of a snapshot (task_lags)",
    "plan": "plan every group of a snapshot in parallel (plans, plan_assignments)",
    "baselines": "replay Kafka's assignors (KIP-441, broker-side) on every planned group (plan_baselines)",
    "validate": "run the Great Expectations suites on PENDING plans; write Data Docs",
    "approve": "approve (or --reject) VALIDATED plans, recording who and when",
    "publish": "sign APPROVED plans and publish them to the plans topic",
    "observe": "record the live assignment from the latest reports; mark realized plans",
    "history": "who held a group's tasks at a time or Delta version, and through which plan",
    "report": "write the HTML report of a snapshot's plans",
}


def add_pipeline_commands(commands: Any) -> None:
    """Register the pipeline subcommands on the CLI's subparsers."""
    parsers = {
        name: commands.add_parser(name, help=_HELP[name], description=_HELP[name].capitalize() + ".")
        for name in COMMANDS
    }
    for name in ("extract", "lags", "plan", "baselines", "validate", "approve", "publish", "report"):
        parsers[name].add_argument("--snapshot-id", help="snapshot (default: the latest; extract: a new one)")
    for name in ("validate", "approve", "publish"):
        parsers[name].add_argument("--plan-id", action="append", default=[], help="a plan id (repeatable)")
    for name in ("extract", "publish", "observe"):
        parsers[name].add_argument("--bootstrap", help="Kafka bootstrap servers (default: RBP_KAFKA_BOOTSTRAP)")
    approve = parsers["approve"]
    approve.add_argument("--by", default=None, help="who decides (default: the current user)")
    approve.add_argument("--reject", action="store_true", help="reject instead of approve")
    approve.add_argument("--reason", help="why (recorded on the plan)")
    history = parsers["history"]
    history.add_argument("--group", required=True, help="consumer group id")
    history.add_argument("--task", help="task id, e.g. 0_3 (default: every task)")
    when = history.add_mutually_exclusive_group()
    when.add_argument("--as-of", help="epoch milliseconds or ISO 8601 time (default: now)")
    when.add_argument("--version", type=int, help="assignment_history Delta version (time travel)")
    report = parsers["report"]
    report.add_argument("--out", type=Path, help="HTML file (default: reports/<snapshot>.html beside the lake)")
    report.add_argument("--group", action="append", default=[], help="only this group (repeatable)")
    report.add_argument(
        "--limit", type=int, default=1000, help="details for at most this many groups, most to restore first"
    )


def _bootstrap(args: argparse.Namespace, settings: Settings) -> str:
    from jobs.pipeline.stage import StageInputError

    bootstrap = args.bootstrap or settings.kafka_bootstrap
    if not bootstrap:
        raise StageInputError("no Kafka bootstrap: set RBP_KAFKA_BOOTSTRAP or pass --bootstrap")
    return str(bootstrap)


def print_result(result: StageResult, console: Console) -> None:
    """A rich table of what the stage wrote."""
    table = Table(title=f"{result.stage} — snapshot {result.snapshot_id or '-'}")
    for column in ("table", "inserted", "updated", "version"):
        table.add_column(column, justify="left" if column == "table" else "right")
    for o in result.outcomes:
        table.add_row(o.table, str(o.inserted), str(o.updated), str(o.version))
    console.print(table)
    for name, count in result.counts.items():
        console.print(f"  {name}: {count}")
    if not result.changed:
        console.print("  nothing new written")


def _run_stage(args: argparse.Namespace, lake: Lake, settings: Settings) -> StageResult | None:
    """Run the stage named by ``args.command``, importing only its module (validate's Great Expectations alone
    takes longer to import than extract takes to run)."""
    command = args.command
    if command == "extract":
        from jobs.pipeline.extract import run_extract

        return run_extract(lake, settings, _bootstrap(args, settings), args.snapshot_id)
    if command == "lags":
        from jobs.pipeline.lags import run_lags

        return run_lags(lake, settings, args.snapshot_id)
    if command == "plan":
        from jobs.pipeline.plan import run_plan

        return run_plan(lake, settings, args.snapshot_id)
    if command == "baselines":
        from jobs.pipeline.baselines import run_baselines

        return run_baselines(lake, settings, args.snapshot_id)
    if command == "validate":
        from jobs.pipeline.validate import run_validate

        return run_validate(lake, settings, args.snapshot_id, args.plan_id)
    if command == "approve":
        from jobs.pipeline.approve import run_approve

        by = args.by or getpass.getuser()
        return run_approve(
            lake,
            settings,
            by=by,
            plan_ids=args.plan_id,
            snapshot_id=args.snapshot_id,
            reject=args.reject,
            reason=args.reason,
        )
    if command == "publish":
        from jobs.pipeline.publish import run_publish

        return run_publish(
            lake, settings, _bootstrap(args, settings), snapshot_id=args.snapshot_id, plan_ids=args.plan_id
        )
    if command == "observe":
        from jobs.pipeline.observe import run_observe

        return run_observe(lake, settings, _bootstrap(args, settings))
    return None


def _print_history(args: argparse.Namespace, lake: Lake, console: Console) -> None:
    from jobs.pipeline.history import OWNER_COLUMNS, parse_as_of, run_history

    as_of = parse_as_of(args.as_of) if args.as_of else None
    rows = run_history(lake, args.group, args.task, as_of, args.version).collect()
    table = Table(title=f"owners in group {args.group}" + (f" task {args.task}" if args.task else ""))
    for column in OWNER_COLUMNS:
        table.add_column(column)
    for r in rows:
        table.add_row(*(str(r[c]) if r[c] is not None else "-" for c in OWNER_COLUMNS))
    console.print(table if rows else "no assignment recorded for that group and time")


@contextmanager
def _logging(console: Console) -> Iterator[None]:
    handler = RichHandler(console=Console(stderr=True), show_path=False)
    root = logging.getLogger("jobs")
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    try:
        yield
    finally:
        root.removeHandler(handler)


def run_pipeline_command(args: argparse.Namespace, console: Console) -> int | None:
    """Run a pipeline subcommand; None when ``args.command`` is not one of ours."""
    if args.command not in COMMANDS:
        return None
    from jobs.lakehouse.engine import spark_session
    from jobs.lakehouse.lake import Lake

    settings = Settings()
    # The embedded engine logs every session at INFO on stderr; keep stderr for our progress and errors.
    os.environ.setdefault("RUST_LOG", "warn")
    try:
        with _logging(console), spark_session(settings.spark_remote) as spark:
            lake = Lake(spark, settings.lake_root)
            if args.command == "history":
                _print_history(args, lake, console)
            elif args.command == "report":
                from jobs.report import run_report

                path = run_report(lake, args.snapshot_id, args.out, args.group or None, args.limit)
                console.print(f"report written to [bold]{path}[/bold]")
            else:
                result = _run_stage(args, lake, settings)
                if result is not None:
                    print_result(result, console)
    except ValueError as err:  # StageInputError, bad settings or ids: the input is wrong
        print(f"rebalance-planner {args.command}: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as err:  # a failed run: one line for the operator, the trace in the log
        logging.getLogger("jobs").debug("stage failed", exc_info=True)
        print(f"rebalance-planner {args.command}: failed: {err}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK
