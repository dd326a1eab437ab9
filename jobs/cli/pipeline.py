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

from jobs.cli.arguments import COUNT, VERSION, task_id
from jobs.cli.exits import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK
from jobs.pipeline.registry import STAGES, request_from
from jobs.settings import Settings

if TYPE_CHECKING:
    from jobs.lakehouse.lake import Lake
    from jobs.pipeline.stage import StageResult

# Beside the registered stages: commands that read the lake without being a stage of the pipeline.
READERS = {
    "history": "who held a group's tasks at a time or Delta version, and through which plan",
    "report": "write the HTML report of a snapshot's plans",
}
COMMANDS = (*STAGES, *READERS)


def add_pipeline_commands(commands: Any) -> None:
    """Register a subcommand per registered stage, then history and report, on the CLI's subparsers."""
    for stage in STAGES.values():
        parser = commands.add_parser(stage.name, help=stage.help, description=stage.help.capitalize() + ".")
        for a in stage.arguments:
            options: dict[str, Any] = {"action": a.action, "help": a.help}
            if a.action == "append":  # a fresh list per parser: argparse appends to the default
                options["default"] = []
            if a.type is not None:
                options["type"] = a.type
            parser.add_argument(a.flag, **options)
    history = commands.add_parser("history", help=READERS["history"], description=READERS["history"].capitalize() + ".")
    history.add_argument("--group", required=True, help="consumer group id")
    history.add_argument("--task", type=task_id, help="task id, e.g. 0_3 (default: every task)")
    when = history.add_mutually_exclusive_group()
    when.add_argument("--as-of", help="epoch milliseconds or ISO 8601 time (default: now)")
    when.add_argument("--version", type=VERSION, help="assignment_history Delta version (time travel)")
    report = commands.add_parser("report", help=READERS["report"], description=READERS["report"].capitalize() + ".")
    report.add_argument("--snapshot-id", help="snapshot (default: the latest)")
    report.add_argument("--out", type=Path, help="HTML file (default: reports/<snapshot>.html beside the lake)")
    report.add_argument("--group", action="append", default=[], help="only this group (repeatable)")
    report.add_argument(
        "--limit", type=COUNT, default=1000, help="details for at most this many groups, most to restore first"
    )


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


def _run_stage(args: argparse.Namespace, lake: Lake, settings: Settings) -> StageResult:
    """Run the registered stage named by ``args.command`` with the options given on the command line."""
    stage = STAGES[args.command]
    bootstrap = getattr(args, "bootstrap", None) or settings.kafka_bootstrap
    if stage.needs_kafka and not bootstrap:
        from jobs.pipeline.stage import StageInputError

        raise StageInputError("no Kafka bootstrap: set RBP_KAFKA_BOOTSTRAP or pass --bootstrap")
    options = vars(args)
    if "by" in options and not options["by"]:
        options = {**options, "by": getpass.getuser()}
    elif "by" in options and settings.production and options["by"] != getpass.getuser():
        from jobs.pipeline.stage import StageInputError

        # The approval record names who approved: in production that is who runs the command, not a typed name.
        raise StageInputError(f"--by {options['by']}: in production mode approve records the user running it")
    return stage.execute(lake, request_from(options, settings, bootstrap))


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
                print_result(result, console)
                bootstrap = getattr(args, "bootstrap", None) or settings.kafka_bootstrap
                if args.command == "publish" and result.counts.get("published") and bootstrap:
                    from jobs.live.read import pickup_lines

                    for line in pickup_lines(settings, bootstrap):
                        console.print(line, soft_wrap=True, highlight=False)
    except ValueError as err:  # StageInputError, bad settings or ids: the input is wrong
        print(f"rebalance-planner {args.command}: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as err:  # a failed run: one line for the operator, the trace in the log
        logging.getLogger("jobs").debug("stage failed", exc_info=True)
        print(f"rebalance-planner {args.command}: failed: {err}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK
