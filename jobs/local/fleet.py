"""Fleets of live groups: every instance a real process running assignor.runtime, fed with input load."""

from __future__ import annotations

import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from assignor.configs import AssignmentConfigs
from assignor.protocol.deferral import DeferralSettings
from assignor.runtime.events import read_events
from assignor.runtime.group_assignor import Subtopology, Topology
from assignor.runtime.instance import EVENTS_FILE
from assignor.runtime.state_dir import StateDirectory
from jobs.kafka_topics import TopicSpec, ensure_topics
from jobs.processes import spawn
from jobs.provisioning import product_topics

log = logging.getLogger(__name__)


def group_topology(group_id: str) -> Topology:
    """The demo application: one stateful subtopology counting input records per key."""
    return Topology((Subtopology(0, (f"{group_id}-input",), (f"{group_id}-counts-changelog",)),))


@dataclass(frozen=True)
class FleetConfig:
    """How the fleet's instances are started; the KIP-441 settings are the leaders'."""

    bootstrap: str
    root: Path
    verify_keys: str  # RBP_PLAN_VERIFY_KEYS of every instance: the public keys plans are checked with
    reports_topic: str = "_rebalance_reports"
    plans_topic: str = "_rebalance_plans"
    kafka_config: Mapping[str, str] = field(default_factory=dict)
    configs: AssignmentConfigs = field(default_factory=AssignmentConfigs)
    partitions: int = 6
    report_interval_s: float = 10.0
    session_timeout_ms: int = 6_000
    deferral: DeferralSettings = field(default_factory=DeferralSettings)
    plan_check_interval_s: float | None = None  # None: the instance's default (5 min)


@dataclass
class InstanceProcess:
    """One instance of one group, running as a child process."""

    group_id: str
    name: str
    state_dir: Path
    process_id: str
    popen: subprocess.Popen[bytes]

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    def events(self) -> list[dict[str, Any]]:
        return read_events(self.state_dir / EVENTS_FILE)


class Fleet:
    """Starts, stops and kills instance processes; creates each group's topics on first use."""

    def __init__(self, config: FleetConfig) -> None:
        self.config = config
        self.instances: dict[tuple[str, str], InstanceProcess] = {}
        # The product's topics as `rebalance-planner setup` makes them (jobs.provisioning), created if missing; their
        # configs are setup's to check: a fleet connects as an application, which may not read topic configs.
        self._ensure(product_topics(config.reports_topic, config.plans_topic))

    def create_group(self, group_id: str) -> Topology:
        topology = group_topology(group_id)
        count = self.config.partitions
        self._ensure(
            [TopicSpec(t, count) for s in topology.subtopologies for t in s.source_topics]
            + [TopicSpec(t, count, compacted=True) for s in topology.subtopologies for t in s.changelog_topics]
        )
        return topology

    def _ensure(self, specs: list[TopicSpec]) -> None:
        ensure_topics({"bootstrap.servers": self.config.bootstrap, **self.config.kafka_config}, specs)

    def state_dir(self, group_id: str, name: str) -> Path:
        return self.config.root / group_id / name

    def process_id(self, group_id: str, name: str) -> str:
        """The instance's persistent process id (made now if it never ran), e.g. to plan for it in advance."""
        return StateDirectory(self.state_dir(group_id, name)).process_id

    def start(
        self,
        group_id: str,
        name: str,
        *,
        protocol_version: int | None = None,
        eager: bool = False,
        rebalance_protocols: str | None = None,
        corrupt_user_data: bool = False,
        capacity: int = 1,
    ) -> InstanceProcess:
        """Start (or restart, keeping its state directory) one instance process."""
        current = self.instances.get((group_id, name))
        if current is not None and current.alive:
            raise ValueError(f"instance {group_id}/{name} is already running")
        c = self.config
        state_dir = self.state_dir(group_id, name)
        process_id = self.process_id(group_id, name)
        args = [
            sys.executable,
            "-m",
            "jobs.cli.runtime",  # `rebalance-planner instance` without the pipeline's heavy imports
            "instance",
            "--group",
            group_id,
            "--bootstrap",
            c.bootstrap,
            "--state-dir",
            str(state_dir),
            "--capacity",
            str(capacity),
            "--acceptable-recovery-lag",
            str(c.configs.acceptable_recovery_lag),
            "--max-warmup-replicas",
            str(c.configs.max_warmup_replicas),
            "--num-standby-replicas",
            str(c.configs.num_standby_replicas),
            "--probing-rebalance-interval-ms",
            str(c.configs.probing_rebalance_interval_ms),
            "--report-interval",
            str(c.report_interval_s),
            "--session-timeout-ms",
            str(c.session_timeout_ms),
        ]
        if c.deferral.scheduled_rebalance_max_delay_ms:
            args += ["--scheduled-rebalance-max-delay-ms", str(c.deferral.scheduled_rebalance_max_delay_ms)]
        if c.deferral.hold_without_caught_up_copy:
            args.append("--hold-without-caught-up-copy")
        if c.plan_check_interval_s is not None:
            args += ["--plan-check-interval", str(c.plan_check_interval_s)]
        if protocol_version is not None:
            args += ["--protocol-version", str(protocol_version)]
        if eager:
            args.append("--eager")
        if rebalance_protocols is not None:  # e.g. "cooperative,eager" (see `instance --help`)
            args += ["--rebalance-protocols", rebalance_protocols]
        if corrupt_user_data:
            args.append("--corrupt-user-data")
        env = {
            **os.environ,
            "RBP_PLAN_VERIFY_KEYS": c.verify_keys,
            "RBP_REPORTS_TOPIC": c.reports_topic,
            "RBP_PLANS_TOPIC": c.plans_topic,
            "PYTHONUNBUFFERED": "1",
        }
        state_dir.mkdir(parents=True, exist_ok=True)
        with (state_dir / "instance.log").open("ab") as out:
            popen = spawn(args, stdout=out, env=env)  # its own process group; it dies with this process
        instance = InstanceProcess(group_id, name, state_dir, process_id, popen)
        self.instances[(group_id, name)] = instance
        log.info("started %s/%s (process %s, pid %d)", group_id, name, process_id[:8], popen.pid)
        return instance

    def stop(self, group_id: str, name: str, timeout_s: float = 30.0) -> None:
        """Graceful stop: the instance leaves the group and closes its stores."""
        instance = self._get(group_id, name)
        if instance.alive:
            instance.popen.send_signal(signal.SIGTERM)
            try:
                instance.popen.wait(timeout_s)
            except subprocess.TimeoutExpired:
                instance.popen.kill()
                instance.popen.wait()
        log.info("stopped %s/%s", group_id, name)

    def kill(self, group_id: str, name: str) -> None:
        """A crash: SIGKILL, no goodbye to the group; the state directory stays."""
        instance = self._get(group_id, name)
        if instance.alive:
            instance.popen.kill()
            instance.popen.wait()
        log.info("killed %s/%s", group_id, name)

    def members(self, group_id: str) -> list[InstanceProcess]:
        return [i for (g, _), i in sorted(self.instances.items()) if g == group_id]

    def close(self) -> None:
        running = [i for i in self.instances.values() if i.alive]
        for instance in running:
            instance.popen.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        for instance in running:
            try:
                instance.popen.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                instance.popen.kill()
                instance.popen.wait()

    def _get(self, group_id: str, name: str) -> InstanceProcess:
        try:
            return self.instances[(group_id, name)]
        except KeyError:
            raise ValueError(f"no instance {group_id}/{name} in this fleet") from None

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class InputLoad:
    """Produces records with random keys to the groups' input topics at a steady total rate."""

    def __init__(
        self, bootstrap: str, topics: Sequence[str], rate_per_s: float, kafka: Mapping[str, str] | None = None
    ) -> None:
        self.topics, self.rate = list(topics), rate_per_s
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, **dict(kafka or {})})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="input-load", daemon=True)
        self.produced = 0

    def start(self) -> InputLoad:
        self._thread.start()
        return self

    def _run(self) -> None:
        rng = random.Random(7)
        tick = 0.05
        per_tick = max(1, round(self.rate * tick))
        while not self._stop.wait(tick):
            for _ in range(per_tick):
                topic = self.topics[rng.randrange(len(self.topics))]
                self._producer.produce(topic, key=f"key-{rng.randrange(1000)}", value=b"1")
                self.produced += 1
            self._producer.poll(0)
        self._producer.flush(10)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(15)

    def __enter__(self) -> InputLoad:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
