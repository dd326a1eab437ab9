"""The live side's commands: ``instance`` (one member process) and ``fleet`` (groups of them, with load)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from kafka.coordinator.assignors.abstract import RebalanceProtocol
from rich.console import Console
from rich.table import Table

from assignor.configs import AssignmentConfigs
from assignor.protocol.bounded import INT64_MAX
from assignor.protocol.deferral import DeferralSettings
from assignor.runtime.instance import Instance, InstanceConfig
from assignor.runtime.protocol import MAX_CAPACITY, SUPPORTED_VERSIONS
from jobs.cli.arguments import COUNT, MILLIS, bounded_int
from jobs.cli.console import cli_console
from jobs.local.broker import EmbeddedBroker
from jobs.local.fleet import Fleet, FleetConfig, InputLoad, group_topology
from jobs.settings import Kip441Settings, Settings
from jobs.signing import write_signing_key


def add_runtime_commands(commands: Any) -> None:
    """Register ``instance`` and ``fleet`` on the CLI's sub-parsers."""
    inst = commands.add_parser(
        "instance",
        help="run one live instance of a stateful group (used by fleet; runs until SIGTERM)",
        description="Run one instance: group membership with the plan-honoring assignor, its tasks, its reports.",
    )
    inst.add_argument("--group", required=True, help="consumer group id (the demo topology's topics derive from it)")
    inst.add_argument("--bootstrap", help="Kafka bootstrap servers (default RBP_KAFKA_BOOTSTRAP)")
    inst.add_argument("--state-dir", type=Path, required=True, help="state directory (process id, task stores)")
    inst.add_argument("--capacity", type=bounded_int(1, MAX_CAPACITY), default=1)
    inst.add_argument("--tag", action="append", default=[], metavar="KEY=VALUE", help="client tag (repeatable)")
    versions = bounded_int(min(SUPPORTED_VERSIONS), max(SUPPORTED_VERSIONS))
    inst.add_argument("--protocol-version", type=versions, choices=SUPPORTED_VERSIONS, default=max(SUPPORTED_VERSIONS))
    inst.add_argument(
        "--rebalance-protocols",
        choices=sorted(PROTOCOL_CHOICES),
        default="cooperative",
        help="assignors offered, most preferred first: eager, cooperative, or cooperative,eager (the first bounce "
        "of an eager -> cooperative upgrade, KIP-429: the consumer still runs EAGER)",
    )
    inst.add_argument("--eager", action="store_true", help="same as --rebalance-protocols eager")
    inst.add_argument(
        "--scheduled-rebalance-max-delay-ms",
        type=bounded_int(0, INT64_MAX),
        default=0,
        help="keep a departed member's place this long (deferred resolution; 0: move its tasks at once)",
    )
    inst.add_argument(
        "--hold-without-caught-up-copy",
        action="store_true",
        help="while a member is away, leave its tasks with no caught-up copy elsewhere unprocessed for its return",
    )
    inst.add_argument(
        "--plan-check-interval",
        type=float,
        default=300.0,
        help="seconds between looks for a newly published plan by a member that has led the group; a new one "
        "starts a rebalance, none costs nothing (0: never; a settled group then waits for its next rebalance)",
    )
    inst.add_argument("--report-interval", type=float, default=10.0, help="seconds between state reports")
    inst.add_argument("--session-timeout-ms", type=MILLIS, default=6_000)
    inst.add_argument("--corrupt-user-data", action="store_true", help="fault injection: unreadable user data")
    _kip441_arguments(inst)

    fleet = commands.add_parser(
        "fleet",
        help="run N groups x M instances as real processes with input load; add/stop/kill on command",
        description=(
            "Run groups of live instances (real processes) on the embedded broker or RBP_KAFKA_BOOTSTRAP. "
            "Commands on stdin: add G, stop G/NAME, kill G/NAME, restart G/NAME, status, quit."
        ),
    )
    fleet.add_argument("--groups", type=COUNT, default=3)
    fleet.add_argument("--instances", type=COUNT, default=3, help="instances per group at start")
    fleet.add_argument("--partitions", type=COUNT, default=6, help="input/changelog partitions (tasks) per group")
    fleet.add_argument("--rate", type=float, default=50.0, help="input records per second per group")
    fleet.add_argument("--root", type=Path, help="where instance state directories live (default RBP_HOME/fleet)")
    fleet.add_argument("--status-interval", type=float, default=10.0, help="seconds between status tables")
    fleet.add_argument(
        "--schedule",
        action="append",
        default=[],
        metavar="SECONDS:ACTION:TARGET",
        help="e.g. 30:add:group-1 or 60:kill:group-2/i1 (repeatable)",
    )
    fleet.add_argument("--duration", type=float, help="stop after this many seconds")
    _kip441_arguments(fleet)


PROTOCOL_CHOICES = {
    "eager": (RebalanceProtocol.EAGER,),
    "cooperative": (RebalanceProtocol.COOPERATIVE,),
    "cooperative,eager": (RebalanceProtocol.COOPERATIVE, RebalanceProtocol.EAGER),
}


def _kip441_arguments(parser: argparse.ArgumentParser) -> None:
    """One flag per KIP-441 setting (``--max-warmup-replicas``): the settings the instances run with and report;
    an absent flag keeps RBP_KIP441's value."""
    for name, field in Kip441Settings.model_fields.items():
        flag = "--" + name.replace("_", "-")
        default = f"(default: RBP_KIP441's, else {field.default})"
        parser.add_argument(flag, type=bounded_int(0, INT64_MAX), dest=name, help=f"{field.description} {default}")


def kip441_configs(args: argparse.Namespace, settings: Settings) -> AssignmentConfigs:
    """The settings' KIP-441 value with the flags given on the command line applied."""
    return settings.kip441.overridden(vars(args)).configs()


def run_runtime_command(args: argparse.Namespace, console: Console, settings: Settings) -> int | None:
    """Run ``instance`` or ``fleet``; None for any other command."""
    if args.command == "instance":
        return _instance(args, settings)
    if args.command == "fleet":
        return _fleet(args, console, settings)
    return None


def _instance(args: argparse.Namespace, settings: Settings) -> int:
    bootstrap = args.bootstrap or settings.kafka_bootstrap
    if not bootstrap:
        raise ValueError("instance needs --bootstrap or RBP_KAFKA_BOOTSTRAP")
    verifier = settings.plan_verifier()
    if not verifier.keys.keys:
        raise ValueError("instance needs RBP_PLAN_VERIFY_KEYS (key_id=<hex public key>) to verify plans")
    tags = {}
    for tag in args.tag:
        key, sep, value = tag.partition("=")
        if not sep or not key:
            raise ValueError(f"--tag must look like KEY=VALUE, got {tag!r}")
        tags[key] = value
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("kafka").setLevel(logging.WARNING)
    logging.getLogger("kafka.coordinator").setLevel(logging.INFO)
    config = InstanceConfig(
        group_id=args.group,
        bootstrap=bootstrap,
        state_dir=args.state_dir,
        topology=group_topology(args.group),
        verifier=verifier,
        configs=kip441_configs(args, settings),
        plans_topic=settings.plans_topic,
        reports_topic=settings.reports_topic,
        kafka_config=settings.kafka_config,
        capacity=args.capacity,
        client_tags=tags,
        protocol_version=args.protocol_version,
        rebalance_protocols=PROTOCOL_CHOICES["eager" if args.eager else args.rebalance_protocols],
        report_interval_s=args.report_interval,
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=max(100, args.session_timeout_ms // 20),
        corrupt_user_data=args.corrupt_user_data,
        deferral=DeferralSettings(args.scheduled_rebalance_max_delay_ms, args.hold_without_caught_up_copy),
        plan_check_interval_s=args.plan_check_interval,
    )
    instance = Instance(config)
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: instance.stop.set())
    instance.run()
    return 0


def _fleet(args: argparse.Namespace, console: Console, settings: Settings) -> int:
    args.root = args.root or settings.home / "fleet"
    schedule = sorted(_parse_schedule(s) for s in args.schedule)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    verify_keys = settings.plan_verify_keys
    if not verify_keys:
        key_file, signer = write_signing_key(args.root / "keys")
        verify_keys = signer.verify_keys().render()
        console.print(
            f"RBP_PLAN_VERIFY_KEYS not set: this fleet accepts plans signed with the new key [bold]{key_file}[/bold] "
            f"(RBP_PLAN_SIGNING_KEY_FILE={key_file} RBP_PLAN_KEY_ID={signer.key_id})"
        )
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    with ExitStack() as stack:
        bootstrap = settings.kafka_bootstrap
        if not bootstrap:
            bootstrap = stack.enter_context(EmbeddedBroker(port=0)).bootstrap
            console.print(f"embedded broker at [bold]{bootstrap}[/bold]")
        config = FleetConfig(
            bootstrap=bootstrap,
            root=args.root,
            verify_keys=verify_keys,
            reports_topic=settings.reports_topic,
            plans_topic=settings.plans_topic,
            kafka_config=settings.kafka_config,
            configs=kip441_configs(args, settings),
            partitions=args.partitions,
        )
        fleet = stack.enter_context(Fleet(config))
        groups = [f"group-{g + 1}" for g in range(args.groups)]
        inputs = []
        for group in groups:
            topology = fleet.create_group(group)
            inputs.extend(topology.source_topics)
            for i in range(args.instances):
                fleet.start(group, f"i{i + 1}")
        stack.enter_context(InputLoad(bootstrap, inputs, args.rate * len(groups), settings.kafka_config))
        commands = _CommandReader(stop) if sys.stdin.isatty() or not sys.stdin.closed else None
        started = time.monotonic()
        next_status = started + args.status_interval
        while not stop.wait(0.2):
            elapsed = time.monotonic() - started
            while schedule and schedule[0][0] <= elapsed:
                _, action, target = schedule.pop(0)
                _apply(fleet, action, target, console)
            for line in commands.drain() if commands else []:
                _apply_line(fleet, line, console, stop)
            if time.monotonic() >= next_status:
                _print_status(fleet, console)
                next_status = time.monotonic() + args.status_interval
            if args.duration is not None and elapsed >= args.duration:
                break
        _print_status(fleet, console)
    return 0


def _parse_schedule(text: str) -> tuple[float, str, str]:
    parts = text.split(":")
    if len(parts) != 3 or parts[1] not in ("add", "stop", "kill", "restart"):
        raise ValueError(f"--schedule must look like SECONDS:add|stop|kill|restart:TARGET, got {text!r}")
    try:
        return float(parts[0]), parts[1], parts[2]
    except ValueError:
        raise ValueError(f"--schedule seconds must be a number, got {parts[0]!r}") from None


def _apply(fleet: Fleet, action: str, target: str, console: Console) -> None:
    try:
        if action == "add":
            names = {i.name for i in fleet.members(target)}
            name = next(f"i{n}" for n in range(1, len(names) + 2) if f"i{n}" not in names)
            fleet.create_group(target)
            fleet.start(target, name)
            console.print(f"added {target}/{name}")
            return
        group, _, name = target.partition("/")
        if action == "stop":
            fleet.stop(group, name)
        elif action == "kill":
            fleet.kill(group, name)
        elif action == "restart":
            fleet.stop(group, name)
            fleet.start(group, name)
        console.print(f"{action} {group}/{name}")
    except ValueError as err:
        console.print(f"[red]{err}[/red]")


def _apply_line(fleet: Fleet, line: str, console: Console, stop: threading.Event) -> None:
    words = line.split()
    if not words:
        return
    if words[0] in ("quit", "exit"):
        stop.set()
    elif words[0] == "status":
        _print_status(fleet, console)
    elif words[0] in ("add", "stop", "kill", "restart") and len(words) == 2:
        _apply(fleet, words[0], words[1], console)
    else:
        console.print("commands: add GROUP | stop GROUP/NAME | kill GROUP/NAME | restart GROUP/NAME | status | quit")


def _print_status(fleet: Fleet, console: Console) -> None:
    table = Table(title="fleet")
    for column in ("instance", "process", "state", "active", "standby", "warmup", "plan", "restoring (lag)"):
        table.add_column(column)
    for instance in sorted(fleet.instances.values(), key=lambda i: (i.group_id, i.name)):
        events = instance.events()
        assigned: dict[str, Any] = next((e for e in reversed(events) if e["event"] == "assigned"), {})
        progress: dict[str, Any] = next((e for e in reversed(events) if e["event"] == "progress"), {})
        restoring = ", ".join(f"{t}:{r['lag']}" for t, r in sorted(progress.get("restoring", {}).items()))
        table.add_row(
            f"{instance.group_id}/{instance.name}",
            instance.process_id[:8],
            "running" if instance.alive else f"exited {instance.popen.returncode}",
            " ".join(assigned.get("active", [])),
            " ".join(assigned.get("standby", [])),
            " ".join(assigned.get("warmup", [])),
            str(assigned.get("plan_id") or assigned.get("fallback_reason") or "-"),
            restoring or "-",
        )
    console.print(table)


class _CommandReader:
    """Reads command lines from stdin in the background."""

    def __init__(self, stop: threading.Event) -> None:
        self._lines: list[str] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._read, args=(stop,), daemon=True).start()

    def _read(self, stop: threading.Event) -> None:
        for line in sys.stdin:
            with self._lock:
                self._lines.append(line.strip())
        # stdin closed: keep running (the schedule or a signal ends the fleet)

    def drain(self) -> list[str]:
        with self._lock:
            lines, self._lines = self._lines, []
        return lines


def main(argv: list[str] | None = None) -> int:
    """``python -m jobs.cli.runtime instance|fleet ...``: what the fleet spawns, without the pipeline's imports."""
    parser = argparse.ArgumentParser(prog="rebalance-planner")
    add_runtime_commands(parser.add_subparsers(dest="command", required=True, metavar="command"))
    args = parser.parse_args(argv)
    try:
        result = run_runtime_command(args, cli_console(), Settings())
    except ValueError as err:
        print(f"rebalance-planner: {err}", file=sys.stderr)
        return 2
    return 1 if result is None else result


if __name__ == "__main__":
    raise SystemExit(main())
