"""`rebalance-planner demo`: the whole product on one machine — embedded broker (with our broker-side streams
assignor), live groups of real instance processes (Kafka Streams applications: the reference app's JVMs, three groups
with the plugin, one scaled out during the demo, and one on the streams protocol steered by the broker), a few hundred
report-only groups, Airflow standalone running the planning DAG, an approval, and the live groups converging to their
approved plans. Each phase is a module of this package: start, planning, converge, outcome."""

from __future__ import annotations

import argparse
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from rich.console import Console

from jobs.cli.exits import EXIT_FAILURE, EXIT_OK
from jobs.demo.converge import observe, wait_for_convergence
from jobs.demo.engine import ENGINES, DemoEngine
from jobs.demo.live import AnnounceError
from jobs.demo.outcome import check_engine, print_outcome
from jobs.demo.planning import approve, run_planning
from jobs.demo.progress import DemoError, Progress, interrupt_on_sigterm
from jobs.demo.start import (
    broker_address,
    demo_settings,
    fresh_root,
    seed_groups,
    setup_topics,
    start_airflow,
    start_broker,
    start_fleet,
)
from jobs.local.airflow import AirflowError
from jobs.settings import Settings


def add_demo_command(commands: Any) -> None:
    """Register ``demo`` on the CLI's subparsers."""
    demo = commands.add_parser(
        "demo",
        help="everything on embedded parts: broker, live fleet, Airflow, approval, convergence",
        description="Run the whole product on this machine and print where the Airflow UI and the reports are.",
    )
    demo.add_argument("--interactive", action="store_true", help="wait for a person to approve in the Airflow UI")
    demo.add_argument("--simulated", type=int, default=300, help="report-only simulated groups (default 300)")
    demo.add_argument("--root", type=Path, help="working directory, wiped first (default RBP_HOME/demo)")
    demo.add_argument("--port", type=int, default=8080, help="Airflow UI port (default 8080; busy: a free one)")
    demo.add_argument("--timeout", type=float, default=600, help="seconds to wait for each phase (default 600)")
    demo.add_argument(
        "--engine",
        choices=ENGINES,
        help="where the stages run: sail (embedded, the default) or spark (Apache Spark with delta-spark: the "
        "server SPARK_REMOTE names, else a local Spark Connect server started and stopped with the demo); "
        "without --engine, SPARK_REMOTE set means spark",
    )


def run_demo(args: argparse.Namespace, console: Console, configured: Settings) -> int:
    """The demo from an empty working directory to converged groups; every process started here is stopped."""
    say = Progress(console, time.monotonic())
    root = fresh_root(args.root or configured.home / "demo")
    with ExitStack() as stack, interrupt_on_sigterm():
        engine = DemoEngine.choose(args.engine, configured.spark_remote, configured.jvm_dir.resolve())
        stack.callback(engine.close)
        settings = demo_settings(root, broker_address(), engine)  # the key first: the broker's assignor trusts it
        start_broker(stack, root, settings, say)
        setup_topics(settings, say)
        airflow = start_airflow(stack, root, args.port, settings, say)
        live = start_fleet(stack, root, settings, say)
        seed_groups(stack, live, settings, args.simulated, args.timeout, say)
        engine.start(stack, say)  # while Airflow still boots: its tasks need the engine only once triggered
        run = run_planning(airflow, args, console, say)
        snapshot_id = approve(airflow, run, args, console, say)
        times = wait_for_convergence(live, settings, snapshot_id, args.timeout, say)
        observe(airflow, settings, snapshot_id, args.timeout, say)
        print_outcome(console, settings, airflow, snapshot_id, times)
        check_engine(engine, settings)
        say("done; stopping everything the demo started")
    return EXIT_OK


def run_demo_command(args: argparse.Namespace, console: Console, settings: Settings) -> int | None:
    """Run ``demo`` (``settings``: the environment's, for SPARK_REMOTE and the jars); None for another command."""
    if args.command != "demo":
        return None
    try:
        return run_demo(args, console, settings)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: every process the demo started was stopped[/yellow]")
        return 130
    except (DemoError, AnnounceError, AirflowError, TimeoutError) as err:
        console.print(f"[red]demo failed:[/red] {err}")
        return EXIT_FAILURE
