"""Fleets of the reference Kafka Streams app (assignor/java/reference-app): one JVM per instance, each with its
own state directory, event log and Kafka Streams log, read back for the system test and the benchmark."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import signal
import subprocess
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import ConsumerGroupState, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from assignor.assignment import GroupAssignment
from assignor.configs import AssignmentConfigs
from assignor.protocol.deferral import DeferralSettings
from assignor.protocol.state_report import StateReport
from assignor.runtime.events import read_events
from assignor.runtime.kafka_io import ChangelogEndOffsets
from jobs.local.direct_plan import live_reports
from jobs.local.fleet_events import Event, EventSource, last_event, processing, processing_intervals
from jobs.local.jvm import private_copy, private_tmpdir
from jobs.polling import wait_until
from jobs.processes import spawn, stop_group

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
JAR_DIR = REPO / "assignor" / "java" / "reference-app" / "target"
STORE = "counts"  # ReferenceApp.STORE: subtopology 1 counts into it
REPARTITION = "rekeyed"  # ReferenceApp's repartition topic (<application.id>-rekeyed-repartition) feeds subtopology 1
# Kafka Streams keeps its process id here (StateDirectory.PROCESS_FILE_NAME), under <state.dir>/<application.id>.
PROCESS_FILE = "kafka-streams-process-metadata"
# The coordinator's line for every generation a member joins (classic protocol; logged as ConsumerCoordinator).
_JOINED = re.compile(r"Successfully joined group with generation Generation\{generationId=(\d+)")
# Kafka's INFO logs are a config dump per client; keep the join lines and the plugin's own.
_LOG_LEVELS = {
    "org.slf4j.simpleLogger.defaultLogLevel": "warn",
    "org.slf4j.simpleLogger.log.org.apache.kafka.clients.consumer.internals.ConsumerCoordinator": "info",
    "org.slf4j.simpleLogger.log.io.rebalanceplanner": "info",
    "org.slf4j.simpleLogger.showDateTime": "true",
}


def reference_app_jar(target: Path = JAR_DIR) -> Path:
    """The runnable (shaded) reference-app jar that `make java` builds."""
    found = sorted(p for p in target.glob("reference-app-*.jar") if re.fullmatch(r"reference-app-[\w.]+\.jar", p.name))
    found = [p for p in found if not p.name.endswith(("-shaded.jar", "-sources.jar", "-tests.jar"))]
    if not found:
        raise FileNotFoundError(f"no reference-app jar in {target}: run `make java`")
    return found[-1]


@dataclass(frozen=True)
class StreamsFleetConfig:
    """One application's instances; ``configs`` are Kafka Streams' own KIP-441 settings (the app raises the
    probing interval to Kafka's 60 s floor; a plan's own interval applies while the plugin honors it)."""

    bootstrap: str
    root: Path
    application_id: str
    partitions: int
    verify_keys: str = ""  # key_id=hex,...: what the plugin checks plans with
    plugin: bool = True
    configs: AssignmentConfigs = field(default_factory=AssignmentConfigs)
    reports_topic: str = "_rebalance_reports"
    plans_topic: str = "_rebalance_plans"
    commit_interval_ms: int = 1_000
    plan_check_interval_ms: int | None = None  # how often a settled group rebalances; None: the plugin default (5 min)
    session_timeout_ms: int = 10_000  # how soon a stopped instance leaves the group (Kafka: 45 s)
    deferral: DeferralSettings = field(default_factory=DeferralSettings)  # the plugin's; default 0: no deferral
    heap_mb: int = 384
    jvm_options: tuple[str, ...] = ("-XX:+UseSerialGC",)  # besides -Xmx: GC, JIT, stacks
    rocksdb_memory_mb: int | None = None  # one RocksDB budget per JVM; None: RocksDB's per-store default
    java: str = "java"
    # classic: a consumer group (the plugin may assign); streams: KIP-1071, the broker assigns and the plugin is unused.
    group_protocol: str = "classic"

    @property
    def input_topic(self) -> str:
        return f"{self.application_id}-input"

    @property
    def changelog_topic(self) -> str:
        return f"{self.application_id}-{STORE}-changelog"

    @property
    def repartition_topic(self) -> str:
        return f"{self.application_id}-{REPARTITION}-repartition"

    @property
    def stateful_tasks(self) -> set[str]:
        return {f"1_{p}" for p in range(self.partitions)}

    @property
    def tasks(self) -> set[str]:
        return {f"{s}_{p}" for s in (0, 1) for p in range(self.partitions)}


@dataclass(frozen=True)
class Footprint:
    """How much of the machine each reference-app JVM of a fleet may take: heap, JVM flags, RocksDB memory."""

    heap_mb: int
    jvm_options: tuple[str, ...]
    rocksdb_memory_mb: int | None

    def apply(self, config: StreamsFleetConfig) -> StreamsFleetConfig:
        """``config`` with this footprint."""
        return dataclasses.replace(
            config, heap_mb=self.heap_mb, jvm_options=self.jvm_options, rocksdb_memory_mb=self.rocksdb_memory_mb
        )


# For a machine running many instances (the demo: ten beside the broker, Airflow and the planner, on two cores).
# bench/streams_footprint.py, demo-sized group, per JVM (2026-11-23, load ~5 from other work): the default footprint
# 196 MB RSS idle, 223 MB peak restoring, 4.1 CPU s to start, 3.4 % CPU idle; LIGHT 105 MB, 110 MB, 2.2 s, 2.0 %.
# C1 only (TieredStopAtLevel=1) trades peak throughput for less compiling: not for streams_bench's millions.
LIGHT = Footprint(
    heap_mb=64,
    jvm_options=(
        "-Xms16m", "-Xss256k", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:CICompilerCount=1",
        "-XX:ReservedCodeCacheSize=32m", "-XX:MaxMetaspaceSize=96m", "-XX:MaxDirectMemorySize=32m",
    ),
    rocksdb_memory_mb=16,
)  # fmt: skip


@dataclass
class StreamsInstance:
    """One reference-app JVM; its stdin is a pipe, so it also exits when this process closes it or dies."""

    name: str
    process_id: str
    state_dir: Path
    popen: subprocess.Popen[bytes]

    @property
    def alive(self) -> bool:
        return self.popen.poll() is None

    @property
    def events_file(self) -> Path:
        return self.state_dir / "events.jsonl"

    @property
    def log_file(self) -> Path:
        return self.state_dir / "app.log"

    def events(self) -> list[Event]:
        return read_events(self.events_file)

    def generations(self) -> list[int]:
        """Every group generation this JVM joined, from Kafka's log."""
        if not self.log_file.exists():
            return []
        return [int(g) for g in _JOINED.findall(self.log_file.read_text(encoding="utf-8", errors="replace"))]

    def log_tail(self, lines: int = 20) -> str:
        text = self.log_file.read_text(encoding="utf-8", errors="replace") if self.log_file.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


class StreamsFleet:
    """Starts, stops and kills reference-app JVMs of one application; fills its input topic."""

    def __init__(self, config: StreamsFleetConfig, jar: Path | None = None) -> None:
        self.config = config
        config.root.mkdir(parents=True, exist_ok=True)
        # A private copy (shared by the fleets beside this one): a `make java` meanwhile must not change the jar under
        # JVMs that are starting.
        self.jar = private_copy(jar or reference_app_jar(), config.root.parent / ".jars")
        self.instances: dict[str, StreamsInstance] = {}
        self._admin: AdminClient | None = None
        self._tmpdir = private_tmpdir(config.root / "jvm-tmp")

    def state_dir(self, name: str) -> Path:
        return self.config.root / name

    def process_id(self, name: str) -> str:
        """The instance's Kafka Streams process id, fixed now if it never ran (so a plan can name it in advance)."""
        path = self.state_dir(name) / self.config.application_id / PROCESS_FILE
        if path.exists():
            return str(uuid.UUID(json.loads(path.read_text(encoding="utf-8"))["processId"]))
        path.parent.mkdir(parents=True, exist_ok=True)
        process_id = str(uuid.uuid4())
        path.write_text(json.dumps({"processId": process_id}), encoding="utf-8")
        return process_id

    def _java(self) -> list[str]:
        props = [f"-D{k}={v}" for k, v in _LOG_LEVELS.items()]
        c = self.config
        return [c.java, f"-Xmx{c.heap_mb}m", self._tmpdir, *c.jvm_options, *props, "-jar", str(self.jar)]

    def start(self, name: str) -> StreamsInstance:
        """Start (or restart, keeping its state directory) one instance."""
        current = self.instances.get(name)
        if current is not None and current.alive:
            raise ValueError(f"instance {name} is already running")
        c = self.config
        state_dir = self.state_dir(name)
        process_id = self.process_id(name)
        args = [
            *self._java(),
            *("--bootstrap", c.bootstrap, "--application-id", c.application_id),
            *("--input-topic", c.input_topic, "--partitions", str(c.partitions)),
            *("--state-dir", str(state_dir), "--events", str(state_dir / "events.jsonl")),
            *("--standbys", str(c.configs.num_standby_replicas)),
            *("--acceptable-recovery-lag", str(c.configs.acceptable_recovery_lag)),
            *("--max-warmup-replicas", str(c.configs.max_warmup_replicas)),
            *("--probing-interval-ms", str(c.configs.probing_rebalance_interval_ms)),
            *("--plugin", "true" if c.plugin and c.group_protocol == "classic" else "false"),
            *("--verify-keys", c.verify_keys, "--plans-topic", c.plans_topic, "--reports-topic", c.reports_topic),
            *("--commit-interval-ms", str(c.commit_interval_ms), "--exit-on-stdin-eof"),
            *("--session-timeout-ms", str(c.session_timeout_ms)),
            *("--scheduled-rebalance-max-delay-ms", str(c.deferral.scheduled_rebalance_max_delay_ms)),
            *("--hold-without-caught-up-copy", "true" if c.deferral.hold_without_caught_up_copy else "false"),
            *("--group-protocol", c.group_protocol),
        ]
        if c.plan_check_interval_ms is not None:
            args += ["--plan-check-interval-ms", str(c.plan_check_interval_ms)]
        if c.rocksdb_memory_mb is not None:
            args += ["--rocksdb-memory-mb", str(c.rocksdb_memory_mb)]
        with (state_dir / "app.log").open("ab") as out:
            popen = spawn(args, stdin=subprocess.PIPE, stdout=out)
        instance = StreamsInstance(name, process_id, state_dir, popen)
        self.instances[name] = instance
        log.info("started %s (process %s, pid %d)", name, process_id[:8], popen.pid)
        return instance

    def stop(self, name: str, timeout_s: float = 45.0) -> None:
        """Graceful stop: Kafka Streams closes its tasks and stores (it does not leave the group on close)."""
        stop_group(self._get(name).popen, timeout_s)
        log.info("stopped %s", name)

    def kill(self, name: str) -> None:
        """A crash: SIGKILL, the state directory stays."""
        stop_group(self._get(name).popen, 0.1, signal.SIGKILL)
        log.info("killed %s", name)

    def members(self) -> list[StreamsInstance]:
        return [self.instances[n] for n in sorted(self.instances)]

    def live(self) -> list[StreamsInstance]:
        return [i for i in self.members() if i.alive]

    def close(self) -> None:
        """Stop every JVM: SIGTERM to all at once (they close in parallel), then whatever is left is killed."""
        running = self.live()
        for instance in running:
            if instance.popen.stdin is not None:
                instance.popen.stdin.close()  # EOF: the app shuts down as on SIGTERM
        deadline = time.monotonic() + 45
        for instance in running:
            stop_group(instance.popen, max(0.1, deadline - time.monotonic()))
        self._admin = None  # confluent_kafka's AdminClient has no close: dropping it ends its threads

    def produce(self, records: int, keys: int, timeout_s: float = 900.0) -> dict[str, Any]:
        """Fill the input topic through the app's produce mode (record i has key and value ``k<i % keys>``)."""
        c = self.config
        args = [*self._java(), "--produce", str(records), "--keys", str(keys), "--bootstrap", c.bootstrap]
        args += ["--input-topic", c.input_topic, "--partitions", str(c.partitions)]
        with (c.root / "produce.log").open("ab") as err:
            popen = spawn(args, stdout=subprocess.PIPE, stderr=err)
            try:
                out, _ = popen.communicate(timeout=timeout_s)
            finally:
                stop_group(popen, 1.0)
        if popen.returncode != 0:
            raise RuntimeError(f"produce mode exited with {popen.returncode}; see {c.root / 'produce.log'}")
        result: dict[str, Any] = json.loads(out.decode("utf-8").strip().splitlines()[-1])
        return result

    def start_settled(
        self, names: Sequence[str], records: int, timeout_s: float = 240.0, input_first: bool = True
    ) -> None:
        """Fill the input with ``records`` records of distinct keys (one changelog record each), start ``names``,
        and wait until the changelogs hold them all and the instances settled: state everywhere, nothing moving.
        Each wait has ``timeout_s``: a warmup placed while the first instance counted alone moves only at Kafka's
        probing rebalance (60 s at the least), seen taking 70 s to settle at load 8.

        ``input_first=False`` starts and settles the instances on an empty input, then fills it: no task moves
        once it has state, so no instance keeps a caught-up copy of a task another one runs (a moved task's old
        owner does, and would rightly take it over if its new owner left)."""
        if input_first:
            self.produce(records, keys=records)
        for name in names:
            self.start(name)
        if not input_first:
            wait_until(lambda: settled(self), timeout_s, f"{', '.join(names)} to settle on an empty input", poll_s=1)
            self.produce(records, keys=records)
        wait_until(lambda: self.changelog_records() >= records, timeout_s, "the input to be counted", poll_s=1)
        wait_until(lambda: settled(self), timeout_s, f"{', '.join(names)} to settle", poll_s=1)

    def changelog_records(self) -> int:
        """Records in the counts changelog (0 until Kafka Streams has created it)."""
        ends = ChangelogEndOffsets(self.config.bootstrap)
        try:
            return sum(ends([(self.config.changelog_topic, p) for p in range(self.config.partitions)]).values())
        except KafkaException:
            return 0
        finally:
            ends.close()

    def coordinator_assignment(self) -> dict[str, set[str]] | None:
        """What the group coordinator assigned each member in the current generation, as tasks per process id,
        when the group is stable; None while it rebalances (or cannot be described). A JVM that started but has
        not joined yet, or one that stopped and whose member has not expired yet, shows here and not in events."""
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.config.bootstrap})
        group = self.config.application_id
        try:
            description = self._admin.describe_consumer_groups([group], request_timeout=10)[group].result()
        except KafkaException:
            return None
        if description.state != ConsumerGroupState.STABLE:
            return None
        subtopology = {self.config.input_topic: 0, self.config.repartition_topic: 1}
        prefix = f"{group}-"
        out: dict[str, set[str]] = {}
        for member in description.members:
            # Kafka Streams names its consumers <application.id>-<process id>-StreamThread-<n>-consumer.
            process_id = member.client_id.removeprefix(prefix).split("-StreamThread-")[0]
            tasks = out.setdefault(process_id, set())
            for tp in member.assignment.topic_partitions:
                tasks.add(f"{subtopology[tp.topic]}_{tp.partition}")
        return out

    def reports(self) -> dict[str, dict[str, Any]]:
        """The newest state report per process id the plugin published for this application."""
        return live_reports(self.config.bootstrap, self.config.reports_topic, self.config.application_id)

    def announce(self, name: str, template: Mapping[str, Any]) -> str:
        """Publish a report for an instance about to join: no tasks, no state. The plugin reports only members
        (from the leader), so without this no plan could name an instance before it joins; returns its id."""
        process_id = self.process_id(name)
        report = dataclasses.replace(
            StateReport.from_json(template),
            process_id=process_id, member_id="", client_id="", host="", generation=-1,
            reported_at=int(time.time() * 1000), active_tasks=(), standby_tasks=(), warmup_tasks=(),
            task_offset_sums={}, task_lags={}, plan_id=None, fallback_reason=None, extra={},
        )  # fmt: skip
        producer = Producer({"bootstrap.servers": self.config.bootstrap})
        producer.produce(self.config.reports_topic, key=report.key.encode(), value=report.encode())
        if producer.flush(15) != 0:
            raise RuntimeError(f"the joining report of {name} was not delivered")
        return process_id

    def _get(self, name: str) -> StreamsInstance:
        try:
            return self.instances[name]
        except KeyError:
            raise ValueError(f"no instance {name} in this fleet") from None

    def __enter__(self) -> StreamsFleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# What the instances did, from their event logs (the Python runtime's vocabulary where it matches).


@dataclass(frozen=True)
class Restore:
    """One restoration of an active task's store: offsets [start, end) at restore_start, records applied."""

    instance: str
    task: str
    t: int
    start_offset: int
    end_offset: int
    restored: int | None  # None while it is still restoring

    @property
    def records(self) -> int:
        """Records the task restored before it could process (while restoring: what it has to restore)."""
        return self.restored if self.restored is not None else self.end_offset - max(self.start_offset, 0)


def assignment(instance: EventSource) -> tuple[set[str], set[str]] | None:
    """(active, standby) the instance holds now, from its last 'assigned' event."""
    last = last_event(instance, "assigned")
    return None if last is None else (set(last["active"]), set(last["standby"]))


def assignments(instances: Iterable[EventSource], since_ms: int = 0) -> list[tuple[int, str, list[str], list[str]]]:
    """Every assignment change seen since ``since_ms``: (t, instance, active, standby), oldest first."""
    seen = [
        (e["t"], i.name, e["active"], e["standby"])
        for i in instances
        for e in i.events()
        if e["event"] == "assigned" and e["t"] >= since_ms
    ]
    return sorted(seen)


def restores(instances: Iterable[EventSource], since_ms: int = 0) -> list[Restore]:
    """Every active restoration that began since ``since_ms`` (Kafka Streams' global restore listener)."""
    found = []
    for instance in instances:
        started: dict[str, Event] = {}
        done: list[tuple[Event, Event | None]] = []
        for e in instance.events():
            if e["event"] == "restore_start":
                started[e["task"]] = e
            elif e["event"] == "restore_end" and e["task"] in started:
                done.append((started.pop(e["task"]), e))
        done += [(s, None) for s in started.values()]
        for s, end in done:
            if s["t"] >= since_ms:
                restored = None if end is None else int(end["restored"])
                found.append(Restore(instance.name, s["task"], s["t"], s["start_offset"], s["end_offset"], restored))
    return sorted(found, key=lambda r: r.t)


def restored_records(instances: Iterable[EventSource], since_ms: int = 0) -> dict[str, int]:
    """Per task: records restored into active stores since ``since_ms`` (standby and warmup catch-up are
    ``standby_restored_records``)."""
    out: dict[str, int] = {}
    for r in restores(instances, since_ms):
        out[r.task] = out.get(r.task, 0) + (r.restored or 0)
    return out


def standby_restored_records(instances: Iterable[EventSource], since_ms: int = 0) -> dict[str, int]:
    """Per task: records loaded into standby stores since ``since_ms`` (warmups and hot standbys: Kafka Streams'
    StandbyUpdateListener sees one role)."""
    out: dict[str, int] = {}
    for instance in instances:
        for e in instance.events():
            if e["event"] == "standby_restored" and e["t"] >= since_ms:
                for task, records in e["tasks"].items():
                    out[task] = out.get(task, 0) + int(records)
    return out


def stopped_tasks(instance: EventSource, since_ms: int = 0) -> set[str]:
    """Tasks the instance stopped processing since ``since_ms``."""
    return {e["task"] for e in instance.events() if e["event"] == "stop" and e["t"] >= since_ms}


def handovers(instances: Iterable[EventSource], since_ms: int) -> int:
    """Times since ``since_ms`` that a task began processing on another instance than the one before it."""
    starts = sorted(
        (start, task, name) for task, spans in processing_intervals(instances).items() for name, start, _ in spans
    )
    last_owner: dict[str, str] = {}
    moved = 0
    for start, task, name in starts:
        if start >= since_ms and task in last_owner and last_owner[task] != name:
            moved += 1
        last_owner[task] = name
    return moved


def generation(instances: Iterable[StreamsInstance]) -> int:
    """The newest group generation any instance joined (0 before the first)."""
    return max((g for i in instances for g in i.generations()), default=0)


def rebalances(instances: Iterable[StreamsInstance], after_generation: int) -> int:
    """Rebalances completed after ``after_generation``: the distinct generations joined since."""
    return len({g for i in instances for g in i.generations() if g > after_generation})


def processed_once(fleet: StreamsFleet) -> bool:
    """Every task processed by exactly one live instance right now (warmups may still be catching up)."""
    running = [t for i in fleet.live() for t in processing(i)]
    return sorted(running) == sorted(fleet.config.tasks)


def settled(fleet: StreamsFleet) -> bool:
    """Every task processed by exactly one live instance, each processing exactly its active tasks, no standby
    anywhere (with num.standby.replicas 0 a standby is a warmup: something is still moving), and the group
    stable with exactly the live instances as members, each assigned by the coordinator what it processes.

    The events alone are not enough: the first instances to join process everything while a later one has started
    but not joined (it logs an empty assignment at start), and a stopped instance stays a member until its session
    expires. Bouncing an instance of such a group is no rolling bounce of a settled one (its departure and the
    newcomer's join meet in one rebalance)."""
    return events_settled(fleet) and fleet.coordinator_assignment() == {
        i.process_id: processing(i) for i in fleet.live()
    }


def events_settled(fleet: StreamsFleet) -> bool:
    """What the instances' own events say of ``settled``: each processes exactly its actives, holds no standby,
    and together they process every task once (the coordinator's view is asked separately, and only after)."""
    held: list[str] = []
    for instance in fleet.live():
        now = assignment(instance)
        if now is None or now[1] or processing(instance) != now[0]:
            return False
        held.extend(now[0])
    return sorted(held) == sorted(fleet.config.tasks)


def at_target(fleet: StreamsFleet, target: GroupAssignment) -> bool:
    """Every live instance holds and processes exactly what the target gives it, and nothing else runs."""
    by_pid = {i.process_id: i for i in fleet.live()}
    if set(by_pid) != set(target.clients):
        return False
    for pid, instance in by_pid.items():
        wanted = target.clients[pid]
        now = assignment(instance)
        active = {str(t) for t in wanted.active}
        if now != (active, {str(t) for t in wanted.standby}) or processing(instance) != active:
            return False
    return True
