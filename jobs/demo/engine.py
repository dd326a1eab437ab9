"""The demo's engine: embedded Sail, or Apache Spark with delta-spark (the server ``SPARK_REMOTE`` names, else a
local Spark Connect server started for the demo and stopped with it); and which engine wrote the lake's commits."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from jobs.local.spark_connect import LocalSparkConnect
from jobs.settings import shown_remote

ENGINES = ("sail", "spark")
SAIL, SPARK = ENGINES
# delta-spark names itself "Apache-Spark/<spark> Delta-Lake/<delta>" in every commit's commitInfo.engineInfo.
DELTA_SPARK_PREFIX = "Apache-Spark/"


@dataclass(frozen=True)
class DemoEngine:
    """Where the demo's stages run: ``remote`` is the ``SPARK_REMOTE`` Airflow's tasks get (None: each task starts
    Sail in-process); ``server`` is the local Spark Connect server the demo starts and stops, if any."""

    name: str
    remote: str | None
    server: LocalSparkConnect | None = None

    @classmethod
    def choose(cls, requested: str | None, configured_remote: str | None, jvm_dir: Path) -> DemoEngine:
        """``--engine`` when given, else Apache Spark if ``SPARK_REMOTE`` is set, else Sail; Apache Spark without
        ``SPARK_REMOTE``: a local server (its port chosen now, started by ``start``)."""
        name = requested or (SPARK if configured_remote else SAIL)
        if name not in ENGINES:
            raise ValueError(f"unknown engine {name!r}: expected one of {', '.join(ENGINES)}")
        if name == SAIL:
            return cls(SAIL, None)
        if configured_remote:
            return cls(SPARK, configured_remote)
        server = LocalSparkConnect(jvm_dir=jvm_dir)
        return cls(SPARK, server.remote, server)

    def start(self, stack: ExitStack, say: Callable[[str], None]) -> None:
        """Start the local server, if the demo runs one, for as long as ``stack`` lasts; say where the stages run."""
        if self.server is not None:
            stack.enter_context(self.server)
            say(f"Apache Spark Connect with Delta on [bold]{self.remote}[/bold] (log {self.server.log_file})")
        elif self.remote:
            say(f"Apache Spark Connect at [bold]{shown_remote(self.remote)}[/bold] (SPARK_REMOTE)")

    def close(self) -> None:
        """Stop the local server, if any, and remove its scratch folder (idempotent: also when never started)."""
        if self.server is not None:
            self.server.close()


@dataclass(frozen=True)
class CommitEngines:
    """The ``commitInfo.engineInfo`` of every commit of every Delta table under a lake, counted per table."""

    tables: dict[str, Counter[str]]

    @classmethod
    def read(cls, lake_root: Path) -> CommitEngines:
        tables: dict[str, Counter[str]] = {}
        for log_dir in sorted(lake_root.glob("*/_delta_log")):
            writers: Counter[str] = Counter()
            for commit in sorted(log_dir.glob("*.json")):
                writers[_engine_info(commit)] += 1
            tables[log_dir.parent.name] = writers
        return cls(tables)

    def totals(self) -> Counter[str]:
        """Commits per engine over every table."""
        total: Counter[str] = Counter()
        for writers in self.tables.values():
            total.update(writers)
        return total

    def not_written_by(self, prefix: str) -> dict[str, list[str]]:
        """Tables with a commit whose engine does not start with ``prefix``, and those engines."""
        return {
            table: sorted(e for e in writers if not e.startswith(prefix))
            for table, writers in self.tables.items()
            if any(not e.startswith(prefix) for e in writers)
        }

    def summary(self) -> str:
        """``n commits by <engine>`` for each engine, in ``m`` tables."""
        counts = ", ".join(f"{n} by {engine}" for engine, n in self.totals().most_common())
        return f"{sum(self.totals().values())} Delta commits in {len(self.tables)} tables: {counts or 'none'}"


def _engine_info(commit: Path) -> str:
    """The engine a Delta commit file names (``unknown`` when its commitInfo has none)."""
    for line in commit.read_text().splitlines():
        action = json.loads(line) if line.strip() else {}
        if "commitInfo" in action:
            return str(action["commitInfo"].get("engineInfo") or "unknown")
    return "unknown"
