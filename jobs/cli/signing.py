"""The ``keys``, ``withdraw`` and ``kafka-acls`` commands: Ed25519 plan-signing keys, taking a group's plan back,
and the Kafka ACLs that let only the pipeline write plans."""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from assignor.protocol.plan_keys import PlanSigner, VerifyKeys, check_key_id
from jobs.cli.exits import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK
from jobs.cli.operations import add_principal_arguments, run_setup
from jobs.settings import Settings
from jobs.signing import read_passphrase, write_signing_key


def add_signing_commands(commands: Any) -> None:
    """Register ``keys generate|rotate|public|revoke``, ``withdraw`` and ``kafka-acls``."""
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
    generate.add_argument("--passphrase-file", type=Path, help="encrypt the key with this file's passphrase (0600)")
    rotate = actions.add_parser(
        "rotate",
        help="write the next private key and print the verify keys with it added beside the current ones",
        description="Step 1 of a rotation: groups must trust the new key before the pipeline signs with it. Add "
        "the printed RBP_PLAN_VERIFY_KEYS to every group, then switch RBP_PLAN_SIGNING_KEY_FILE; old plans stay "
        "honored until `keys revoke` takes the old key back.",
    )
    rotate.add_argument("--dir", type=Path, required=True, help="folder for <key-id>.pem")
    rotate.add_argument("--key-id", required=True, help="the new key's id (a new one: ids are never reused)")
    rotate.add_argument("--passphrase-file", type=Path, help="encrypt the key with this file's passphrase (0600)")
    public = actions.add_parser("public", help="print the verify key of an existing private key")
    public.add_argument("file", type=Path, help="PEM private key file")
    public.add_argument("--key-id", help="the key's id (default: its fingerprint)")
    public.add_argument("--passphrase-file", type=Path, help="the passphrase of an encrypted key")
    revoke = actions.add_parser(
        "revoke",
        help="publish a signed revocation of a key id: running groups refuse it from their next rebalance",
        description="Signs a key revocation with the pipeline's signing key (RBP_PLAN_SIGNING_KEY_FILE, trusted by "
        "the groups) and sends it to the plans topic. Leaders (Python runtime, Kafka Streams plugin, broker "
        "assignor) refuse every record of the revoked key id and drop a plan it signed; they keep the revocation "
        "in their state. Revocations are never undone: a key id is not reused.",
    )
    revoke.add_argument("--key-id", required=True, help="the key id to revoke")
    revoke.add_argument("--reason", default="", help="why (recorded in the revocation)")
    revoke.add_argument("--by", help="who revokes (default: the current user)")
    revoke.add_argument("--bootstrap", help="Kafka bootstrap servers (default: RBP_KAFKA_BOOTSTRAP)")
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
    acls.add_argument(
        "--scram-user",
        action="append",
        default=[],
        metavar="USER=ENV",
        help="also set USER's SCRAM-SHA-512 password to the value of environment variable ENV, creating the user if "
        "new (never a password on the command line); re-running with a new password rotates it (repeat)",
    )


def run_signing_command(args: argparse.Namespace, console: Console, settings: Settings) -> int | None:
    """Run ``keys`` or ``withdraw``; None for any other command."""
    if args.command == "keys" and args.keys_command in ("generate", "rotate"):
        trusted = VerifyKeys.parse(settings.plan_verify_keys) if args.keys_command == "rotate" else VerifyKeys({})
        if args.key_id in trusted.keys:  # refused before writing: a refused rotation leaves no key file behind
            raise ValueError(f"key id {args.key_id!r} is already among RBP_PLAN_VERIFY_KEYS: choose a new id")
        passphrase = read_passphrase(args.passphrase_file) if args.passphrase_file else None
        path, signer = write_signing_key(args.dir, args.key_id, passphrase)
        note = "encrypted" if passphrase else "NOT encrypted: production mode refuses it"
        console.print(f"private key: [bold]{path}[/bold] ({note}; keep it with the publish step only)")
        _print_settings(console, path, signer, args.passphrase_file, trusted)
        return EXIT_OK
    if args.command == "keys" and args.keys_command == "revoke":
        from jobs.pipeline.publish import publish_revocation  # noqa: PLC0415 (pulls Kafka in)

        bootstrap = args.bootstrap or settings.kafka_bootstrap
        if not bootstrap:
            print("rebalance-planner keys revoke: needs --bootstrap or RBP_KAFKA_BOOTSTRAP", file=sys.stderr)
            return EXIT_BAD_INPUT
        check_key_id(args.key_id)
        publish_revocation(settings, bootstrap, args.key_id, args.by or getpass.getuser(), args.reason)
        left = {k: v for k, v in VerifyKeys.parse(settings.plan_verify_keys).keys.items() if k != args.key_id}
        console.print(f"revocation of key {args.key_id} published; groups refuse it from their next rebalance")
        console.print(f"then, at the next deployment: RBP_PLAN_VERIFY_KEYS={VerifyKeys(left).render()}", soft_wrap=True)
        return EXIT_OK
    if args.command == "keys":
        try:
            pem = args.file.read_bytes()
        except OSError as err:
            raise ValueError(f"cannot read {args.file}: {err.strerror}") from None
        passphrase = read_passphrase(args.passphrase_file) if args.passphrase_file else None
        _print_settings(console, args.file, PlanSigner.from_pem(pem, args.key_id, passphrase), args.passphrase_file)
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
        from jobs.kafka_acls import scram_password_problem, upsert_scram_users  # noqa: PLC0415 (pulls Kafka in)

        passwords = _scram_passwords(args.scram_user)  # every one present and within bounds before anything changes
        for user, password in passwords.items():
            problem = scram_password_problem(user, password)
            if problem:
                raise ValueError(f"--scram-user {problem}")
        status = run_setup(args, console, settings, bootstrap)  # setup with the principals required
        if status != EXIT_OK or not passwords:
            return status
        try:
            count = upsert_scram_users(settings.kafka_properties(bootstrap), passwords, settings.kafka_timeout_s)
        except RuntimeError as err:
            print(f"rebalance-planner kafka-acls: {err}", file=sys.stderr)
            return EXIT_FAILURE
        console.print(f"SCRAM users set: {count} ({', '.join(sorted(passwords))})", soft_wrap=True)
        return EXIT_OK
    return None


def _scram_passwords(specs: list[str]) -> dict[str, str]:
    """USER=ENV pairs to {user: the variable's value}; ValueError naming a malformed pair or an unset variable."""
    passwords: dict[str, str] = {}
    for spec in specs:
        user, sep, variable = spec.partition("=")
        if not sep or not user or not variable:
            raise ValueError(f"--scram-user must look like USER=ENV, got {spec!r}")
        if user in passwords:
            raise ValueError(f"--scram-user names {user} twice")
        value = os.environ.get(variable, "")
        if not value:
            raise ValueError(f"--scram-user {user}: environment variable {variable} is unset or empty")
        passwords[user] = value
    return passwords


def _withdrawn_note(counts: Any) -> str:
    if counts.get("withdrawn"):
        return "the plan is WITHDRAWN in the lake"
    if counts.get("unknown_plan"):
        return "the lake has no such plan: nothing recorded"
    return "the plan's status in the lake is kept (it was not live)"


def _print_settings(
    console: Console, path: Path, signer: PlanSigner, passphrase: Path | None, trusted: VerifyKeys | None = None
) -> None:
    secret = f" RBP_PLAN_SIGNING_PASSPHRASE_FILE={passphrase}" if passphrase else ""
    console.print(
        f"publish:   RBP_PLAN_SIGNING_KEY_FILE={path} RBP_PLAN_KEY_ID={signer.key_id}{secret}", soft_wrap=True
    )
    verify = VerifyKeys({**(trusted.keys if trusted else {}), **signer.verify_keys().keys}).render()
    console.print(f"groups:    RBP_PLAN_VERIFY_KEYS={verify}", soft_wrap=True)
    console.print(f"plugin:    rebalance.planner.verify.keys={verify}", soft_wrap=True)
