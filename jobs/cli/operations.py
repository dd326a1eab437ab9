"""The operator's commands around the pipeline: ``setup`` (topics and ACLs), ``status`` (what every live group runs
now) and ``settings`` (every RBP_ setting with its value, default and meaning)."""
# ruff: noqa: PLC0415 -- Kafka clients load when a command that needs them runs, not at CLI start

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
from collections.abc import Iterator
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from rich.console import Console
from rich.table import Table

from jobs.cli.exits import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK
from jobs.settings import Settings, shown_remote

_MAX_PARTITIONS = 10_000
_MAX_REPLICATION = 32
# Keys of RBP_KAFKA_CONFIG whose values are secrets (passwords, keys, tokens): shown masked.
_SECRET_WORDS = ("password", "secret", "token", "key.pem", "private", "jaas", "credentials")


def add_operations_commands(commands: Any) -> None:
    """Register ``setup``, ``status``, ``vacuum`` and ``settings`` on the CLI's sub-parsers."""
    setup = commands.add_parser(
        "setup",
        help="create the product's topics (reports, plans) and, where the cluster has an authorizer, the ACLs",
        description="Create RBP_REPORTS_TOPIC and RBP_PLANS_TOPIC (compacted, records up to 1 MiB, hourly segments) "
        "or fix the configs of existing ones, then, on a cluster with an authorizer, the ACLs: the pipeline writes "
        "plans and reads reports, applications read plans and write reports. Idempotent: run it again at will. "
        "Connects with RBP_KAFKA_BOOTSTRAP (or --bootstrap) and RBP_KAFKA_CONFIG (SASL/TLS; an admin's "
        "credentials where ACLs are made). On a cluster without an authorizer the ACLs are skipped.",
    )
    setup.add_argument("--bootstrap", help="Kafka bootstrap servers (default: RBP_KAFKA_BOOTSTRAP)")
    setup.add_argument("--partitions", type=int, default=1, help="partitions of a topic setup creates (default 1)")
    setup.add_argument(
        "--replication-factor",
        type=int,
        default=-1,
        help="replicas of a topic setup creates (default -1: the cluster's default.replication.factor); an "
        "existing topic with fewer is reported, not changed",
    )
    add_principal_arguments(setup, pipeline_required=False)
    status = commands.add_parser(
        "status",
        help="what every live group runs now: members, tasks per instance, plan and step, fallback, next check",
        description="Per group: protocol, members, actives/standbys/warmups per instance (from the newest state "
        "reports, the broker's metadata for report-only classic groups, or the broker's description of "
        "streams-protocol groups with our assignor's newest decision), the plan being honored and its step (compared "
        "with the lake's plan_assignments when RBP_LAKE_ROOT holds them), the newest report's age, the last "
        "fallback reason and when the group looks for a plan next.",
    )
    status.add_argument("group", nargs="?", help="only this group")
    status.add_argument("--bootstrap", help="Kafka bootstrap servers (default: RBP_KAFKA_BOOTSTRAP)")
    status.add_argument("--json", action="store_true", help="one JSON object per group per line")
    status.add_argument("--no-lake", action="store_true", help="do not read plan steps from the lake (step: unknown)")
    vacuum = commands.add_parser(
        "vacuum",
        help="delete lake files older than the retention window and log entries past the history window",
        description="For every table under RBP_LAKE_ROOT, under the lake's writer lock: set the retention "
        "properties (30 days of history, 7 days for removed files and for idempotent-write ids), then VACUUM "
        "within them and drop expired log entries. Time travel reaches back only as far as the history window.",
    )
    vacuum.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")
    commands.add_parser(
        "settings",
        help="list every RBP_ setting: environment variable, current value (secrets masked), default, meaning",
        description="Every setting of the one typed settings object, read from the environment as every command "
        "reads it. RBP_HOME is the data home the lake, jars and Data Docs default under.",
    )


def add_principal_arguments(parser: argparse.ArgumentParser, pipeline_required: bool) -> None:
    """Who gets which ACLs (``setup`` and ``kafka-acls``): the pipeline's principal and the applications'."""
    parser.add_argument(
        "--pipeline-user", required=pipeline_required, help="the principal (SASL user) Airflow's tasks connect as"
    )
    parser.add_argument("--app-user", action="append", default=[], help="an application's principal (repeat)")
    parser.add_argument(
        "--app-prefix",
        action="append",
        default=[],
        metavar="USER=PREFIX",
        help="give an application user its own topics and consumer groups: every name starting with PREFIX (repeat)",
    )


def run_operations_command(args: argparse.Namespace, console: Console, settings: Settings) -> int | None:
    """Run ``setup``, ``status``, ``vacuum`` or ``settings``; None for any other command."""
    if args.command == "settings":
        _print_settings(console, settings)
        return EXIT_OK
    if args.command == "vacuum":
        return _vacuum(console, settings, args.dry_run)
    if args.command not in ("setup", "status"):
        return None
    bootstrap = args.bootstrap or settings.kafka_bootstrap
    if not bootstrap:
        print(f"rebalance-planner {args.command}: needs --bootstrap or RBP_KAFKA_BOOTSTRAP", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.command == "setup":
        return run_setup(args, console, settings, bootstrap)
    return _status(args, console, settings, bootstrap)


def _vacuum(console: Console, settings: Settings, dry_run: bool) -> int:
    from jobs.lakehouse.lake import vacuum
    from jobs.lakehouse.writer_lock import writer_lock

    root = settings.lake_root
    tables = sorted(p for p in root.iterdir() if (p / "_delta_log").is_dir()) if root.is_dir() else []
    with writer_lock(root, "vacuum", settings.lake_lock_timeout_s):
        for path in tables:
            files = vacuum(path, dry_run)
            console.print(f"{path.name}: {len(files)} file(s) {'would be ' if dry_run else ''}removed")
    return EXIT_OK


def _user_prefix(text: str) -> tuple[str, str]:
    user, sep, prefix = text.partition("=")
    if not sep or not user or not prefix:
        raise ValueError(f"--app-prefix must look like USER=PREFIX, got {text!r}")
    return user, prefix


def run_setup(args: argparse.Namespace, console: Console, settings: Settings, bootstrap: str) -> int:
    """``setup`` (and ``kafka-acls``, which is setup with the principals required): topics, then ACLs."""
    from jobs.kafka_acls import Principals, acl_bindings
    from jobs.provisioning import ProvisioningError, product_topics, provision

    args.partitions = getattr(args, "partitions", 1)
    args.replication_factor = getattr(args, "replication_factor", -1)
    if not 1 <= args.partitions <= _MAX_PARTITIONS:
        raise ValueError(f"--partitions must be 1..{_MAX_PARTITIONS}, got {args.partitions}")
    if args.replication_factor != -1 and not 1 <= args.replication_factor <= _MAX_REPLICATION:
        raise ValueError(f"--replication-factor must be -1 or 1..{_MAX_REPLICATION}, got {args.replication_factor}")
    if (args.app_user or args.app_prefix) and not args.pipeline_user:
        raise ValueError("--app-user and --app-prefix need --pipeline-user (the ACLs are granted together)")
    principals = None
    if args.pipeline_user:
        prefixes = tuple(_user_prefix(text) for text in args.app_prefix)
        principals = Principals(args.pipeline_user, tuple(args.app_user), prefixes)
        acl_bindings(principals, settings.plans_topic, settings.reports_topic)  # a bad prefix: before any change
    specs = product_topics(settings.reports_topic, settings.plans_topic, args.partitions, args.replication_factor)
    try:
        outcome = provision(settings.kafka_properties(bootstrap), specs, principals, settings.kafka_timeout_s)
    except (ProvisioningError, RuntimeError) as err:  # TopicError too
        print(f"rebalance-planner {args.command}: {err}", file=sys.stderr)
        return EXIT_FAILURE
    for topic in outcome.topics:
        detail = "; ".join([*topic.fixed, *topic.problems])
        console.print(f"topic {topic.name}: {topic.action}" + (f" ({detail})" if detail else ""), soft_wrap=True)
    console.print(f"ACLs: {outcome.acls}", soft_wrap=True)
    if not outcome.ok:
        for topic in outcome.topics:
            for problem in topic.problems:
                print(f"rebalance-planner {args.command}: topic {topic.name}: {problem}", file=sys.stderr)
        return EXIT_FAILURE
    return EXIT_OK


def _status(args: argparse.Namespace, console: Console, settings: Settings, bootstrap: str) -> int:
    from jobs.live.read import MissingTopicError, live_status

    # The embedded engine (read for plan steps) logs every session at INFO on stderr: keep stderr for errors.
    os.environ.setdefault("RUST_LOG", "warn")
    from confluent_kafka import KafkaException

    try:
        read = live_status(settings, bootstrap, args.group, use_lake=not args.no_lake)
    except MissingTopicError as err:
        print(f"rebalance-planner status: {err}", file=sys.stderr)
        return EXIT_FAILURE
    except KafkaException as err:  # the broker unreachable, or refusing us: one line, not a traceback
        cause = err.args[0].str() if err.args and hasattr(err.args[0], "str") else str(err)
        print(f"rebalance-planner status: the Kafka cluster at {bootstrap} could not be read: {cause}", file=sys.stderr)
        return EXIT_FAILURE
    for note in read.notes:  # what could not be read, e.g. the streams-groups reader: the rest still shows
        print(f"rebalance-planner status: {note}", file=sys.stderr)
    if args.group is not None and not read.statuses:
        print(f"rebalance-planner status: no live group {args.group!r} (no reports, no metadata)", file=sys.stderr)
        return EXIT_FAILURE
    if args.json:
        for status in read.statuses:
            print(json.dumps(status.to_json(), sort_keys=True), flush=True)
        return EXIT_OK
    from jobs.live.status import duration

    out = console  # cli_console: ids are never cut, a pipe gets lines as long as they need
    table = Table(title="live groups", show_lines=False)
    for name in ("group", "protocol", "plan", "step", "instance", "active", "standby", "warmup", "report age"):
        table.add_column(name, overflow="fold")
    for s in read.statuses:
        age = "-" if s.report_age_ms is None else duration(s.report_age_ms)
        plan = s.plan_id or "-"
        if s.published_plan_id and s.published_plan_id != s.plan_id:
            plan += f" (published: {s.published_plan_id}, not yet honored)"
        rows = s.instances or ()
        for n, i in enumerate(rows):
            first = n == 0
            table.add_row(
                s.group_id if first else "",
                f"{s.protocol} ({s.source}), {s.members} member(s)" if first else "",
                plan if first else "",
                s.step if first else "",
                i.process_id,
                " ".join(i.active) or "-",
                " ".join(i.standby) or "-",
                " ".join(i.warmup) or "-",
                age if first else "",
            )
    out.print(table)
    for s in read.statuses:
        notes = [f"next: {s.next_check}"]
        if s.fallback_reason:
            notes.append(f"last fallback: {s.fallback_reason}")
        if s.older_reports:
            notes.append(f"{s.older_reports} report(s) of earlier generations not shown")
        notes.extend(s.notes)
        out.print(f"{s.group_id}: " + "; ".join(notes), soft_wrap=True, highlight=False)
    if read.lake != "read":
        why = "--no-lake" if read.lake == "skipped" else f"no plan_assignments under {settings.lake_root}"
        out.print(f"plan steps unknown ({why})", highlight=False)
    if read.unreadable_reports:
        out.print(f"{read.unreadable_reports} report record(s) unreadable (extract quarantines them)", highlight=False)
    return EXIT_OK


def _env_names(name: str, info: FieldInfo) -> str:
    alias = info.validation_alias
    choices = getattr(alias, "choices", None)
    if choices:
        return str(choices[0])
    return f"RBP_{name.upper()}"


def _masked(name: str, value: Any) -> str:
    if name == "kafka_config" and isinstance(value, dict):
        shown = {k: ("****" if any(w in k.lower() for w in _SECRET_WORDS) else v) for k, v in value.items()}
        return json.dumps(shown, sort_keys=True)
    if name == "spark_remote" and isinstance(value, str):
        return shown_remote(value)  # a Spark Connect token is a password
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return "" if value is None else str(value)


def _default(info: FieldInfo, settings: Settings) -> str:
    if info.default_factory is None:
        return _masked("", info.default)
    factory: Any = info.default_factory
    # A factory taking the other values reads the home (lake_root, jvm_dir); the rest take nothing.
    takes_data = factory not in (dict, list, tuple) and len(inspect.signature(factory).parameters) == 1
    made = factory({"home": settings.home}) if takes_data else factory()
    return _masked("", made) if not isinstance(made, BaseModel) else "(see below)"


def setting_rows(settings: Settings) -> Iterator[tuple[str, str, str, str]]:
    """(environment variable, current value, default, description) of every setting, nested ones flattened."""
    for name, info in type(settings).model_fields.items():
        value = getattr(settings, name)
        if isinstance(value, BaseModel):
            nested_defaults = type(value)()
            for sub, sub_info in type(value).model_fields.items():
                env = f"RBP_{sub.upper()}"
                yield (
                    env,
                    _masked(sub, getattr(value, sub)),
                    str(getattr(nested_defaults, sub)),
                    sub_info.description or "",
                )
            yield f"RBP_{name.upper()}", "(the values above, as one JSON object)", "", "the same settings, nested"
            continue
        yield _env_names(name, info), _masked(name, value), _default(info, settings), info.description or ""


def _print_settings(console: Console, settings: Settings) -> None:
    out = console
    table = Table(title="settings (environment variables)")
    for column in ("variable", "value", "default", "meaning"):
        table.add_column(column, overflow="fold")
    for row in setting_rows(settings):
        table.add_row(*row)
    out.print(table)
