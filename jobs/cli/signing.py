"""The ``keys``, ``withdraw`` and ``kafka-acls`` commands: Ed25519 plan-signing keys, taking a group's plan back,
and the Kafka ACLs that let only the pipeline write plans."""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from assignor.protocol.plan_keys import PlanSigner
from jobs.cli.exits import EXIT_BAD_INPUT, EXIT_OK
from jobs.cli.operations import add_principal_arguments, run_setup
from jobs.settings import Settings
from jobs.signing import write_signing_key


def add_signing_commands(commands: Any) -> None:
    """Register ``keys generate``, ``keys public`` and ``withdraw``."""
    keys = commands.add_parser(
        "keys",
        help="make or show the Ed25519 keys plans are signed and verified with",
        description="The pipeline signs plans with a private key (RBP_PLAN_SIGNING_KEY_FILE); live groups verify "
        "them with public keys by key id (RBP_PLAN_VERIFY_KEYS, or the plugin's rebalance.planner.verify.keys). "
        "To rotate: generate a new key, add its verify key to every group beside the old one, switch the "
        "pipeline to the new key, and drop the old verify key once its plans have expired.",
    )
    actions = keys.add_subparsers(dest="keys_command", required=True, metavar="action")
    generate = actions.add_parser("generate", help="write a new private key (mode 0600) and print its verify key")
    generate.add_argument("--dir", type=Path, required=True, help="folder for <key-id>.pem")
    generate.add_argument("--key-id", help="id verifiers know the key by (default: its fingerprint)")
    public = actions.add_parser("public", help="print the verify key of an existing private key")
    public.add_argument("file", type=Path, help="PEM private key file")
    public.add_argument("--key-id", help="the key's id (default: its fingerprint)")
    withdraw = commands.add_parser(
        "withdraw",
        help="publish a signed withdrawal of a group's plan: the group returns to Kafka's own assignment",
        description="Publish a signed withdrawal record for a group to the plans topic. An unsigned tombstone "
        "would withdraw nothing: leaders only act on records they can verify.",
    )
    withdraw.add_argument("--group", required=True, help="consumer group (application) id")
    withdraw.add_argument("--plan-id", required=True, help="the plan being withdrawn (recorded in the record)")
    withdraw.add_argument("--bootstrap", help="Kafka bootstrap servers (default: RBP_KAFKA_BOOTSTRAP)")
    withdraw.add_argument("--by", help="who withdraws (recorded on the plan; default: the current user)")
    acls = commands.add_parser(
        "kafka-acls",
        help="create the ACLs of a secured broker: only the pipeline writes plans, applications write reports",
        description="Run as a Kafka admin (credentials in RBP_KAFKA_CONFIG). Creates the plans and reports topics "
        "(RBP_PLANS_TOPIC, RBP_REPORTS_TOPIC) if missing, so neither the pipeline nor an application needs the right "
        "to create them, then the ACLs on them and what extract needs to describe groups and offsets; anything "
        "else stays denied. Re-running is harmless.",
    )
    add_principal_arguments(acls, pipeline_required=True)
    acls.add_argument("--bootstrap", help="Kafka bootstrap servers (default: RBP_KAFKA_BOOTSTRAP)")


def run_signing_command(args: argparse.Namespace, console: Console, settings: Settings) -> int | None:
    """Run ``keys`` or ``withdraw``; None for any other command."""
    if args.command == "keys" and args.keys_command == "generate":
        path, signer = write_signing_key(args.dir, args.key_id)
        console.print(f"private key: [bold]{path}[/bold] (keep it with the pipeline only)")
        _print_settings(console, path, signer)
        return EXIT_OK
    if args.command == "keys":
        try:
            pem = args.file.read_bytes()
        except OSError as err:
            raise ValueError(f"cannot read {args.file}: {err.strerror}") from None
        _print_settings(console, args.file, PlanSigner.from_pem(pem, args.key_id))
        return EXIT_OK
    if args.command == "withdraw":
        from jobs.cli.withdraw import withdraw_and_record  # noqa: PLC0415 (pulls Kafka and Spark in)

        bootstrap = args.bootstrap or settings.kafka_bootstrap
        if not bootstrap:
            print("rebalance-planner withdraw: needs --bootstrap or RBP_KAFKA_BOOTSTRAP", file=sys.stderr)
            return EXIT_BAD_INPUT
        result = withdraw_and_record(settings, bootstrap, args.group, args.plan_id, args.by or getpass.getuser())
        note = _withdrawn_note(result.counts)
        console.print(f"withdrawal of {args.group}'s plan {args.plan_id} published; {note}", soft_wrap=True)
        return EXIT_OK
    if args.command == "kafka-acls":
        bootstrap = args.bootstrap or settings.kafka_bootstrap
        if not bootstrap:
            print("rebalance-planner kafka-acls: needs --bootstrap or RBP_KAFKA_BOOTSTRAP", file=sys.stderr)
            return EXIT_BAD_INPUT
        return run_setup(args, console, settings, bootstrap)  # setup with the principals required
    return None


def _withdrawn_note(counts: Any) -> str:
    if counts.get("withdrawn"):
        return "the plan is WITHDRAWN in the lake"
    if counts.get("unknown_plan"):
        return "the lake has no such plan: nothing recorded"
    return "the plan's status in the lake is kept (it was not live)"


def _print_settings(console: Console, path: Path, signer: PlanSigner) -> None:
    console.print(f"pipeline:  RBP_PLAN_SIGNING_KEY_FILE={path} RBP_PLAN_KEY_ID={signer.key_id}", soft_wrap=True)
    verify = signer.verify_keys().render()
    console.print(f"groups:    RBP_PLAN_VERIFY_KEYS={verify}", soft_wrap=True)
    console.print(f"plugin:    rebalance.planner.verify.keys={verify}", soft_wrap=True)
