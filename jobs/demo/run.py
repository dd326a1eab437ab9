"""`rebalance-planner demo`: the whole product on one machine — embedded broker, live groups of real instance
processes (Kafka Streams applications: the reference app's JVMs with the plugin; one scaled out during the demo), a few
hundred report-only groups, Airflow standalone running the planning DAG, an approval, and the live groups
converging to their approved plans."""

from __future__ import annotations

import argparse
import logging
import shutil
import signal
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from deltalake import DeltaTable
from rich.console import Console
from rich.markdown import Markdown
from rich.table import Table

from assignor.protocol.plans import ApprovedPlan, read_record
from assignor.runtime.kafka_io import ChangelogEndOffsets, read_latest_by_key
from jobs.cli.exits import EXIT_FAILURE, EXIT_OK
from jobs.demo.engine import DELTA_SPARK_PREFIX, ENGINES, SPARK, CommitEngines, DemoEngine
from jobs.demo.groups import simulated_groups, write_simulated_groups
from jobs.demo.live import LIVE_GROUPS, NEWCOMER, PARTITIONS, SCALED_OUT, AnnounceError, LiveGroups
from jobs.local.airflow import AirflowError, LocalAirflow
from jobs.local.broker import EmbeddedBroker
from jobs.local.direct_plan import live_reports
from jobs.pipeline.status import PlanStatus
from jobs.polling import wait_until
from jobs.processes import free_port
from jobs.provisioning import ensure_product_topics, product_topics
from jobs.settings import Kip441Settings, Settings
from jobs.signing import write_signing_key

PLANNING, OBSERVE = "rebalance_planning", "rebalance_observe"
# Small enough that the newcomer must warm up, probing often enough that the groups converge within the demo.
KIP441 = Kip441Settings(
    acceptable_recovery_lag=100, max_warmup_replicas=2, num_standby_replicas=1, probing_rebalance_interval_ms=10_000
)
MIN_CHANGELOG = 300  # records per changelog partition before planning: well beyond the acceptable lag
STAGES = ("extract", "lags", "plan", "validate", "review", "approval", "publish")


class DemoError(RuntimeError):
    """A part of the demo failed (a task of the DAG run, an announcement)."""


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


@dataclass
class Progress:
    """Timestamped progress lines on the console."""

    console: Console
    started: float

    def __call__(self, message: str) -> None:
        self.console.print(f"[dim]{time.monotonic() - self.started:6.1f}s[/dim] {message}")


@contextmanager
def _interrupt_on_sigterm() -> Iterator[None]:
    """SIGTERM ends the demo like Ctrl-C: every context unwinds and stops what it started."""

    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _changelogs_filled(ends: ChangelogEndOffsets) -> bool:
    """A live group's changelog is <group>-counts-changelog (the reference app's store is "counts")."""
    parts = [(f"{g}-counts-changelog", p) for g in LIVE_GROUPS for p in range(PARTITIONS)]
    return min(ends(parts).values()) >= MIN_CHANGELOG


def _published(bootstrap: str, settings: Settings) -> dict[str, ApprovedPlan]:
    records = read_latest_by_key(bootstrap, settings.plans_topic)
    keys = settings.plan_verifier().keys
    read = {k.decode(): read_record(v, keys) for k, v in records.items() if v is not None}
    return {group: plan for group, plan in read.items() if isinstance(plan, ApprovedPlan)}


def _reported(bootstrap: str, settings: Settings, plans: dict[str, ApprovedPlan]) -> bool:
    """Whether every live group's latest reports show exactly its plan's target, warmups done."""
    for group, plan in plans.items():
        reports = live_reports(bootstrap, settings.reports_topic, group)
        if set(reports) != set(plan.target.clients):
            return False
        for pid, wanted in plan.target.clients.items():
            r = reports[pid]
            if r["warmup_tasks"] or (set(r["active_tasks"]), set(r["standby_tasks"])) != (
                {str(t) for t in wanted.active},
                {str(t) for t in wanted.standby},
            ):
                return False
    return True


def _plans(lake: Path, snapshot_id: str) -> dict[str, dict[str, Any]]:
    frame = DeltaTable(str(lake / "plans")).to_pandas()
    frame = frame[frame["snapshot_id"] == snapshot_id]
    return {str(r["group_id"]): dict(r) for _, r in frame.iterrows()}


def _follow_run(
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


@dataclass(frozen=True)
class PlanningRun:
    """A triggered planning run and its tasks seen finishing so far (each is printed once)."""

    run_id: str
    seen: set[str]


def _fresh_root(root: Path) -> Path:
    """The working directory, emptied; the demo's log goes there (the console shows progress lines only)."""
    root = root.resolve()
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    logging.basicConfig(level=logging.WARNING, filename=str(root / "demo.log"))
    logging.getLogger("jobs").setLevel(logging.WARNING)  # the progress lines say what happens
    return root


def _start_broker(stack: ExitStack, root: Path, say: Progress) -> str:
    """Apache Kafka (KRaft) for the whole demo; its bootstrap."""
    broker = stack.enter_context(EmbeddedBroker(data_dir=root / "kafka"))
    say(f"Apache Kafka (KRaft) on [bold]{broker.bootstrap}[/bold], data in {broker.data_dir}")
    return broker.bootstrap


def _setup_topics(settings: Settings, say: Progress) -> None:
    """The reports and plans topics, made as `rebalance-planner setup` makes them (no authorizer here: no ACLs)."""
    properties = settings.kafka_properties(str(settings.kafka_bootstrap))
    done = ensure_product_topics(properties, product_topics(settings.reports_topic, settings.plans_topic))
    say("topics " + ", ".join(f"{t.name} {t.action}" for t in done) + " (as `rebalance-planner setup` does)")


def _demo_settings(root: Path, bootstrap: str, engine: DemoEngine) -> Settings:
    """The settings every part of the demo shares, with a signing key generated under ``root``."""
    key_file, signer = write_signing_key(root / "keys", "demo")
    return Settings(
        lake_root=root / "lake",
        kafka_bootstrap=bootstrap,
        spark_remote=engine.remote,
        plan_signing_key_file=key_file,
        # The key's own id: without it publish signs under the key's fingerprint, which no verify key names.
        plan_key_id=signer.key_id,
        plan_verify_keys=signer.verify_keys().render(),
        kip441=KIP441,
    )


def _start_airflow(stack: ExitStack, root: Path, port: int, settings: Settings, say: Progress) -> LocalAirflow:
    """Airflow standalone, starting in the background while the fleet warms up."""
    airflow = LocalAirflow(
        root / "airflow", port=port if _free(port) else free_port(), extra_env=_airflow_env(settings)
    )
    stack.callback(airflow.stop)
    airflow.launch("standalone")
    say(f"Airflow standalone starting on {airflow.url} (log {airflow.home / 'standalone.log'})")
    return airflow


def _start_fleet(stack: ExitStack, root: Path, settings: Settings, say: Progress) -> LiveGroups:
    """The live groups' instance processes, with input on their source topics."""
    live = LiveGroups(settings, root / "fleet")
    live.start(stack)
    say(f"live groups: {', '.join(LIVE_GROUPS)} (Kafka Streams: reference-app JVMs with the plugin), 3 instances "
        "each, input written")  # fmt: skip
    return live


def _seed_groups(
    stack: ExitStack, live: LiveGroups, settings: Settings, simulated: int, timeout_s: float, say: Progress
) -> None:
    """Report-only groups beside the live ones, live state worth moving, and the scale-out announced for tonight."""
    bootstrap = str(settings.kafka_bootstrap)
    groups = simulated_groups(simulated, configs=settings.kip441.configs())  # they run the demo's settings
    written = write_simulated_groups(bootstrap, settings.reports_topic, groups)
    say(f"{len(groups)} report-only simulated groups written ({written:,} records)")

    ends = ChangelogEndOffsets(bootstrap)
    stack.callback(ends.close)
    wait_until(live.processed_once, timeout_s, "the live groups to settle")
    say("live groups settled: every task processed by exactly one instance")
    wait_until(lambda: _changelogs_filled(ends), timeout_s, "the live changelogs to fill")
    say(f"live state built: every changelog partition holds >= {MIN_CHANGELOG} records")

    newcomer = live.announce(SCALED_OUT, NEWCOMER)
    say(f"scale-out announced: {SCALED_OUT}/{NEWCOMER} (process {newcomer[:8]}) joins after the approval")


def _run_planning(airflow: LocalAirflow, args: argparse.Namespace, console: Console, say: Progress) -> PlanningRun:
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
    _follow_run(airflow, run_id, say, {"review", "approval"}, args.timeout, seen)
    return PlanningRun(run_id, seen)


def _approve(airflow: LocalAirflow, run: PlanningRun, args: argparse.Namespace, console: Console, say: Progress) -> str:
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
    _follow_run(airflow, run_id, say, set(STAGES), 30, run.seen)
    snapshot = str(airflow.api("GET", f"/dags/{PLANNING}/dagRuns/{quote(run_id)}/taskInstances/extract/"
                                      "xcomEntries/return_value")["value"])  # fmt: skip
    return snapshot


def _wait_for_convergence(
    live: LiveGroups, settings: Settings, snapshot_id: str, timeout_s: float, say: Progress
) -> dict[str, float]:
    """Start the newcomer and wait until every live group with a plan runs it; seconds per group."""
    bootstrap = str(settings.kafka_bootstrap)
    published = _published(bootstrap, settings)
    live_plans = {g: p for g, p in published.items() if g in LIVE_GROUPS and p.snapshot_id == snapshot_id}
    say(f"{len(published)} signed plan(s) on {settings.plans_topic}; live groups with a plan: "
        f"{', '.join(sorted(live_plans)) or 'none'}")  # fmt: skip
    live.start_instance(SCALED_OUT, NEWCOMER)
    scaled_at = time.monotonic()
    say(f"scale-out: started {SCALED_OUT}/{NEWCOMER} with an empty state directory")
    times: dict[str, float] = {}

    def all_converged() -> bool:
        for g, plan in live_plans.items():
            if g not in times and live.converged(g, plan):
                times[g] = time.monotonic() - scaled_at
                say(f"  {g} converged to plan {plan.plan_id} after {times[g]:.1f}s")
        return set(times) == set(live_plans)

    wait_until(all_converged, timeout_s, "the live groups to converge to their plans", poll_s=1.0)
    try:  # observe judges by the reports, which follow the assignment by up to a report interval
        wait_until(lambda: _reported(bootstrap, settings, live_plans), 60, "the reports to show the plans", 1.0)
    except TimeoutError as err:
        say(f"[yellow]{err}: observe may not mark every plan REALIZED yet[/yellow]")
    return times


def _observe(airflow: LocalAirflow, timeout_s: float, say: Progress) -> None:
    """One run of the observe DAG: the live assignment recorded, converged plans marked REALIZED."""
    observe_run = airflow.trigger(OBSERVE, {})
    airflow.wait_for_run(OBSERVE, observe_run, timeout_s)
    say(f"{OBSERVE} recorded the live assignment")


def _print_outcome(
    console: Console, settings: Settings, airflow: LocalAirflow, snapshot_id: str, times: dict[str, float]
) -> None:
    """The live groups' plans and convergence times, which engine wrote the lake, then where the report, Data Docs
    and Airflow are."""
    _final_table(console, snapshot_id, _plans(settings.lake_root, snapshot_id), times)
    console.print(f"Lake:          {CommitEngines.read(settings.lake_root).summary()}")
    report = settings.lake_root.parent / "reports" / f"{snapshot_id}.html"
    console.print(f"HTML report:   [bold]{report}[/bold]")
    console.print(f"GX Data Docs:  [bold]{settings.data_docs / 'index.html'}[/bold]")
    console.print(f"Airflow UI:    [bold]{airflow.url}[/bold] (stops with the demo)")


def _check_engine(engine: DemoEngine, settings: Settings) -> None:
    """On the Apache Spark server the demo started, every commit of the lake's tables must be delta-spark's: a stage
    that ran on Sail instead (SPARK_REMOTE lost on the way to a task) fails the demo. (A server SPARK_REMOTE names
    may be any Spark Connect server, Sail's included: its commits are only counted.)"""
    if engine.name != SPARK or engine.server is None:
        return
    others = CommitEngines.read(settings.lake_root).not_written_by(DELTA_SPARK_PREFIX)
    if others:
        found = "; ".join(f"{table}: {', '.join(engines)}" for table, engines in sorted(others.items()))
        raise DemoError(f"the demo ran on Apache Spark, but tables hold commits by other engines: {found}")


def run_demo(args: argparse.Namespace, console: Console, configured: Settings) -> int:
    """The demo from an empty working directory to converged groups; every process started here is stopped."""
    say = Progress(console, time.monotonic())
    root = _fresh_root(args.root or configured.home / "demo")
    with ExitStack() as stack, _interrupt_on_sigterm():
        engine = DemoEngine.choose(args.engine, configured.spark_remote, configured.jvm_dir.resolve())
        stack.callback(engine.close)
        settings = _demo_settings(root, _start_broker(stack, root, say), engine)
        _setup_topics(settings, say)
        airflow = _start_airflow(stack, root, args.port, settings, say)
        live = _start_fleet(stack, root, settings, say)
        _seed_groups(stack, live, settings, args.simulated, args.timeout, say)
        engine.start(stack, say)  # while Airflow still boots: its tasks need the engine only once triggered
        run = _run_planning(airflow, args, console, say)
        snapshot_id = _approve(airflow, run, args, console, say)
        times = _wait_for_convergence(live, settings, snapshot_id, args.timeout, say)
        _observe(airflow, args.timeout, say)
        _print_outcome(console, settings, airflow, snapshot_id, times)
        _check_engine(engine, settings)
        say("done; stopping everything the demo started")
    return EXIT_OK


def _final_table(console: Console, snapshot: str, plans: dict[str, dict[str, Any]], times: dict[str, float]) -> None:
    table = Table(title=f"live groups: plans of snapshot {snapshot}")
    for column in ("group", "plan", "moves", "rounds", "converged", "time"):
        table.add_column(column, justify="right" if column in ("moves", "rounds", "time") else "left")
    for g in LIVE_GROUPS:
        p = plans.get(g, {})
        done = g in times
        table.add_row(
            g,
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


def _free(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0


def _airflow_env(settings: Settings) -> dict[str, str | None]:
    """The settings Airflow's tasks read, as environment variables (None: unset, not inherited from the demo's)."""
    return {
        "SPARK_REMOTE": settings.spark_remote or None,
        "RBP_LAKE_ROOT": str(settings.lake_root),
        "RBP_KAFKA_BOOTSTRAP": str(settings.kafka_bootstrap),
        "RBP_PLAN_SIGNING_KEY_FILE": str(settings.plan_signing_key_file),
        "RBP_PLAN_KEY_ID": str(settings.plan_key_id),
        "RBP_PLAN_VERIFY_KEYS": settings.plan_verify_keys,
        "RBP_REPORTS_TOPIC": settings.reports_topic,
        "RBP_PLANS_TOPIC": settings.plans_topic,
        "RBP_KIP441": settings.kip441.model_dump_json(),
        "RBP_PLANNING_SCHEDULE": "",  # the demo triggers its runs
        "RBP_OBSERVE_SCHEDULE": "",
        "RBP_PLANNER_PROCESSES": "2",
    }


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
