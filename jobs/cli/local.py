"""``broker`` and ``spark-connect``: the embedded Apache Kafka broker and a local Apache Spark Connect server with
Delta, each a child JVM run in the foreground until Ctrl-C or SIGTERM (and never outliving this process)."""

from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path
from typing import Any, Protocol

from rich.console import Console

from jobs.cli.arguments import COUNT, PORT
from jobs.cli.exits import EXIT_FAILURE, EXIT_OK
from jobs.local.broker import BrokerAssignor, EmbeddedBroker
from jobs.local.spark_connect import LocalSparkConnect, read_token
from jobs.settings import Settings


class _Running(Protocol):
    @property
    def running(self) -> bool: ...


def add_local_commands(commands: Any) -> None:
    """Register ``broker`` and ``spark-connect`` on the CLI's sub-parsers."""
    broker = commands.add_parser(
        "broker",
        help="run the embedded Apache Kafka broker (KRaft, one node) until interrupted",
        description="Run Apache Kafka (one KRaft broker+controller, a child JVM) on 127.0.0.1 until Ctrl-C or "
        "SIGTERM. The jars come from Maven Central through mvn on first use (make does it ahead).",
    )
    broker.add_argument("--port", type=PORT, default=9092, help="listening port (default 9092; 0 picks a free one)")
    broker.add_argument(
        "--data-dir",
        type=Path,
        help="keep the broker's data here across restarts (default: a temporary folder removed at exit)",
    )
    spark = commands.add_parser(
        "spark-connect",
        help="run a local Apache Spark Connect server with Delta Lake until interrupted",
        description="Run Apache Spark (pyspark's own distribution, local mode) as a Spark Connect server with "
        "delta-spark's SQL extension and catalog, and print the SPARK_REMOTE that points the pipeline at it. The "
        "Delta jars come from Maven Central through mvn on first use (make does it ahead).",
    )
    spark.add_argument("--port", type=PORT, default=15002, help="listening port (default 15002; 0 picks a free one)")
    spark.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default loopback; a container needs 0.0.0.0)"
    )
    spark.add_argument("--cores", type=COUNT, default=2, help="local[N]: threads running Spark tasks (default 2)")
    spark.add_argument("--driver-memory-mb", type=COUNT, default=1024, help="the JVM's heap (default 1024)")
    spark.add_argument(
        "--token-file",
        type=Path,
        help="require this pre-shared token from every client (Spark Connect's authenticate token; clients send it "
        "only over TLS, or without TLS to localhost: put a TLS proxy in front, docs/deployment.md)",
    )


def _until_stopped(console: Console, part: _Running, name: str) -> int:
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    while not stop.wait(0.5):
        if not part.running:
            console.print(f"[red]{name} exited[/red]")
            return EXIT_FAILURE
    return EXIT_OK


def run_local_command(args: argparse.Namespace, console: Console, settings: Settings) -> int | None:
    """Run ``broker`` or ``spark-connect``; None for any other command."""
    if args.command == "broker":
        # Our streams assignor installed, verifying plans with the keys the pipeline's groups trust.
        assignor = BrokerAssignor.built(settings.plan_verify_keys, settings.plans_topic)
        with EmbeddedBroker(
            port=args.port,
            data_dir=args.data_dir,
            jvm_dir=settings.jvm_dir,
            assignor=assignor,
            with_assignor=bool(assignor),
        ) as broker:
            kept = f"data in {broker.data_dir}" if args.data_dir else "temporary data"
            console.print(f"Apache Kafka listening on [bold]{broker.bootstrap}[/bold] ({kept}; Ctrl-C stops it)")
            return _until_stopped(console, broker, "embedded broker")
    if args.command == "spark-connect":
        server = LocalSparkConnect(
            args.port,
            jvm_dir=settings.jvm_dir,
            cores=args.cores,
            driver_memory_mb=args.driver_memory_mb,
            host=args.host,
            token=read_token(args.token_file) if args.token_file else None,
        )
        with server:
            console.print(f"Apache Spark Connect with Delta on [bold]{server.remote}[/bold] (Ctrl-C stops it)")
            if args.token_file:
                # The token itself is never printed.
                console.print(f"clients must send the token in {args.token_file} (sc://...;use_ssl=true;token=...)")
            print(f"SPARK_REMOTE={server.remote}", flush=True)
            return _until_stopped(console, server, "Spark Connect server")
    return None
