"""The embedded Apache Kafka broker: one KRaft node (broker + controller) as a child JVM on loopback."""

from __future__ import annotations

import base64
import json
import logging
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from jobs.kafka_topics import TopicSpec, ensure_topics
from jobs.local.jvm import DEFAULT_JVM_DIR, classpath_dir, private_tmpdir
from jobs.local.server_process import ServerProcess
from jobs.processes import free_port

log = logging.getLogger(__name__)

_STATE_FILE = "embedded-broker.json"
REPO = Path(__file__).resolve().parents[2]
ASSIGNOR_JAR_DIR = REPO / "assignor" / "java" / "broker-assignor" / "target"
# jobs.pipeline.streams_assignor names it too (what publish looks for); the broker must not import the pipeline.
ASSIGNOR_CLASS = "io.rebalanceplanner.broker.PlanFollowingTaskAssignor"
DECISIONS_TOPIC = "_rebalance_assignor_decisions"


class BrokerError(RuntimeError):
    """The embedded broker did not start or stopped unexpectedly."""


@dataclass(frozen=True)
class BrokerIdentity:
    """What must stay the same across restarts on one data directory: the cluster id and the ports."""

    cluster_id: str
    port: int
    controller_port: int

    @staticmethod
    def new(port: int, host: str) -> BrokerIdentity:
        while True:  # Kafka's own ids never start with '-', which command lines would take for an option
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            if not cluster_id.startswith("-"):
                return BrokerIdentity(cluster_id, port or free_port(host), free_port(host))


def server_properties(identity: BrokerIdentity, host: str, log_dirs: Path) -> dict[str, str]:
    """The broker's configuration: one node, replication factor 1, and group timings fit for tests and demos."""
    return {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@{host}:{identity.controller_port}",
        "listeners": f"PLAINTEXT://{host}:{identity.port},CONTROLLER://{host}:{identity.controller_port}",
        "advertised.listeners": f"PLAINTEXT://{host}:{identity.port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(log_dirs),
        "num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        "offsets.topic.num.partitions": "4",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "transaction.state.log.num.partitions": "4",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "share.coordinator.state.topic.num.partitions": "4",
        # A group forms at once, and short sessions are allowed, so a killed member is noticed in seconds.
        "group.initial.rebalance.delay.ms": "0",
        "group.min.session.timeout.ms": "1000",
        # Compacted topics compact within seconds once a segment rolls (topics set their own segment.ms).
        "log.cleaner.backoff.ms": "1000",
        "log.cleaner.threads": "1",
        "log.cleaner.dedupe.buffer.size": str(16 * 1024 * 1024),
        "log.retention.check.interval.ms": "5000",
        "num.network.threads": "2",
        "num.io.threads": "4",
        "num.recovery.threads.per.data.dir": "1",
        "background.threads": "4",
        "auto.leader.rebalance.enable": "false",
        # Topics exist because our code created them, never because a client asked for metadata.
        "auto.create.topics.enable": "false",
    }


SCRAM = "SCRAM-SHA-512"
ADMIN_USER = "admin"  # the broker's own principal in SCRAM mode (inter-broker traffic), a super user


def _jaas(user: str, password: str) -> str:
    # JAAS quoting: the password must not carry a double quote (checked by EmbeddedBroker).
    return f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{user}" password="{password}";'


def scram_properties(users: Mapping[str, str]) -> dict[str, str]:
    """What turns the client listener into SASL_PLAINTEXT with SCRAM and ACLs (KRaft's StandardAuthorizer).

    The controller listener stays PLAINTEXT on loopback; its principal (ANONYMOUS) is a super user because the
    broker half of this node talks to the controller half through it, before any ACL could exist."""
    return {
        "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": SCRAM,
        "sasl.mechanism.inter.broker.protocol": SCRAM,
        f"listener.name.sasl_plaintext.{SCRAM.lower()}.sasl.jaas.config": _jaas(ADMIN_USER, users[ADMIN_USER]),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:{ADMIN_USER};User:ANONYMOUS",
        "allow.everyone.if.no.acl.found": "false",
    }


def broker_assignor_jar(target: Path = ASSIGNOR_JAR_DIR) -> Path:
    """The broker-side streams assignor jar that `make java` builds (assignor/java/broker-assignor)."""
    found = sorted(
        p for p in target.glob("broker-assignor-*.jar") if not p.name.endswith(("-sources.jar", "-tests.jar"))
    )
    if not found:
        raise BrokerError(f"no broker-assignor jar in {target}: run `make java`")
    return found[-1]


@dataclass(frozen=True)
class BrokerAssignor:
    """Our KIP-1357 assignor installed on the embedded broker: its jar and the settings it reads from the broker's."""

    jar: Path
    verify_keys: str = ""  # key_id=<64 hex>[,...], as RBP_PLAN_VERIFY_KEYS; empty: no plan verifies (sticky)
    plans_topic: str = "_rebalance_plans"
    decisions_topic: str = DECISIONS_TOPIC

    @staticmethod
    def built(verify_keys: str = "", plans_topic: str = "_rebalance_plans") -> BrokerAssignor | None:
        """The one `make java` built, or None (logged) without it: the broker then runs without our assignor, and
        publish, which asks the broker, keeps streams groups report-only."""
        try:
            return BrokerAssignor(broker_assignor_jar(), verify_keys, plans_topic)
        except BrokerError as err:
            log.warning("the embedded broker runs without the broker-side streams assignor: %s", err)
            return None

    def properties(self, bootstrap: str) -> dict[str, str]:
        """server.properties entries: sticky stays the default, ours is there for the groups that select it."""
        config = {
            "group.streams.assignors": f"sticky,{ASSIGNOR_CLASS}",
            "rebalance.planner.plans.topic": self.plans_topic,
            "rebalance.planner.decisions.topic": self.decisions_topic,
            "rebalance.planner.client.bootstrap.servers": bootstrap,
        }
        return config | ({"rebalance.planner.verify.keys": self.verify_keys} if self.verify_keys else {})


def log4j_config(log_file: Path) -> str:
    """Log4j 2 settings that write INFO and above to ``log_file`` (the broker's; the tests' Java probes too)."""
    return "\n".join(
        [
            "status = warn",
            "appender.file.type = File",
            "appender.file.name = file",
            f"appender.file.fileName = {log_file}",
            "appender.file.layout.type = PatternLayout",
            "appender.file.layout.pattern = [%d] %p %m (%c)%n",
            "rootLogger.level = INFO",
            "rootLogger.appenderRef.file.ref = file",
            "logger.cleaner.name = kafka.log.LogCleaner",
            "logger.cleaner.level = WARN",
            "",
        ]
    )


def _scram_arg(user: str, password: str) -> str:
    return f"{SCRAM}=[name={user},password={password}]"


class EmbeddedBroker:
    """Apache Kafka on 127.0.0.1: data in `data_dir` (kept) or in a temporary folder removed by `close()`."""

    def __init__(
        self,
        port: int = 0,
        data_dir: Path | None = None,
        *,
        jvm_dir: Path = DEFAULT_JVM_DIR,
        heap_mb: int = 512,
        host: str = "127.0.0.1",
        java: str = "java",
        scram_users: Mapping[str, str] | None = None,
        assignor: BrokerAssignor | None = None,
        with_assignor: bool = True,
    ) -> None:
        """``scram_users`` (user -> password, including ``admin``): SASL/SCRAM with ACLs instead of PLAINTEXT.
        ``assignor``: our streams assignor's jar and settings (default: the built jar, no verify keys; none, with a
        warning, when it is not built); none when ``with_assignor`` is false."""
        if scram_users is not None:
            if ADMIN_USER not in scram_users:
                raise ValueError(f"scram_users must include {ADMIN_USER!r}, the broker's own principal")
            bad = sorted(u for u, pw in scram_users.items() if not pw or '"' in pw or "," in pw or "]" in pw)
            if bad:
                raise ValueError(f"SCRAM passwords of {', '.join(bad)} are empty or hold '\"', ',' or ']'")
        self.scram_users = dict(scram_users) if scram_users is not None else None
        self.host = host
        self._requested_port = port
        self._keep_data = data_dir is not None
        self.data_dir = Path(data_dir) if data_dir is not None else Path(tempfile.mkdtemp(prefix="rbp-kafka-"))
        self._jvm_dir = jvm_dir
        self._heap_mb = heap_mb
        self._java = java
        self._identity: BrokerIdentity | None = None
        self._server = ServerProcess("Apache Kafka", BrokerError, self._log_tail)
        self.assignor = (assignor or BrokerAssignor.built()) if with_assignor else None

    @property
    def port(self) -> int:
        if self._identity is None:
            raise BrokerError("the embedded broker has not been started")
        return self._identity.port

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "server.log"

    @property
    def jvm_tmp(self) -> Path:
        """The JVM's java.io.tmpdir (emptied at every start)."""
        return self.data_dir / "jvm-tmp"

    @property
    def pid(self) -> int | None:
        return self._server.pid

    def start(self, timeout_s: float = 90.0) -> str:
        """Start the JVM (formatting storage on first use) and wait until an Admin call succeeds."""
        if self.running:
            return self.bootstrap
        libs = classpath_dir("kafka", self._jvm_dir)
        classpath = str(libs.resolve() / "*")
        if self.assignor is not None:
            classpath += f":{self.assignor.jar.resolve()}"
        identity, formatted = self._load_identity()
        self._identity = identity
        properties = self.data_dir / "server.properties"
        config = server_properties(identity, self.host, self.data_dir / "logs")
        if self.scram_users is not None:
            client = f"SASL_PLAINTEXT://{self.host}:{identity.port}"
            config |= scram_properties(self.scram_users) | {
                "listeners": f"{client},CONTROLLER://{self.host}:{identity.controller_port}",
                "advertised.listeners": client,
            }
        if self.assignor is not None:
            # The assignor's own clients reach this broker as plain ones do; in SCRAM mode as the broker's principal.
            config |= self.assignor.properties(f"{self.host}:{identity.port}")
            if self.scram_users is not None:
                config |= {
                    "rebalance.planner.client.security.protocol": "SASL_PLAINTEXT",
                    "rebalance.planner.client.sasl.mechanism": SCRAM,
                    "rebalance.planner.client.sasl.jaas.config": _jaas(ADMIN_USER, self.scram_users[ADMIN_USER]),
                }
        properties.write_text("".join(f"{k}={v}\n" for k, v in config.items()), encoding="utf-8")
        log4j = self.data_dir / "log4j2.properties"
        log4j.write_text(log4j_config(self.log_file), encoding="utf-8")
        java = [
            self._java,
            "-Xms64m",
            f"-Xmx{self._heap_mb}m",
            "-XX:+UseSerialGC",  # one small heap on a 2-core machine: no concurrent GC threads
            "-XX:TieredStopAtLevel=1",  # C1 only: starts in half the time, plenty for a test broker
            "-XX:+ExitOnOutOfMemoryError",
            "-Djava.awt.headless=true",
            private_tmpdir(self.jvm_tmp),
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            classpath,
        ]
        if not formatted:
            done = subprocess.run(
                [
                    *java,
                    *("kafka.tools.StorageTool", "format", "-t", identity.cluster_id, "-c", str(properties)),
                    *(arg for u, pw in (self.scram_users or {}).items() for arg in ("--add-scram", _scram_arg(u, pw))),
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                raise BrokerError(f"formatting Kafka storage in {self.data_dir} failed: {done.stdout}{done.stderr}")
            (self.data_dir / _STATE_FILE).write_text(json.dumps(identity.__dict__), encoding="utf-8")
        started = time.monotonic()
        self._server.spawn([*java, "kafka.Kafka", str(properties)], self.data_dir / "jvm.out")
        admin = AdminClient({**self.client_config(), "log_level": 0})
        self._server.await_ready(lambda: self._serves(admin), started + timeout_s, self.bootstrap)
        log.info(
            "Apache Kafka ready on %s in %.1f s (pid %d, data %s)",
            self.bootstrap,
            time.monotonic() - started,
            self._server.pid,
            self.data_dir,
        )
        return self.bootstrap

    def _load_identity(self) -> tuple[BrokerIdentity, bool]:
        state = self.data_dir / _STATE_FILE
        if state.is_file():
            saved = BrokerIdentity(**json.loads(state.read_text(encoding="utf-8")))
            port = self._requested_port or saved.port
            return BrokerIdentity(saved.cluster_id, port, saved.controller_port), True
        self.data_dir.mkdir(parents=True, exist_ok=True)
        return BrokerIdentity.new(self._requested_port, self.host), False

    def client_config(self, user: str = ADMIN_USER) -> dict[str, str]:
        """confluent-kafka properties reaching this broker (as ``user`` in SCRAM mode)."""
        config = {"bootstrap.servers": self.bootstrap}
        if self.scram_users is not None:
            config |= {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": SCRAM,
                "sasl.username": user,
                "sasl.password": self.scram_users[user],
            }
        return config

    def _serves(self, admin: AdminClient) -> bool:
        try:
            admin.describe_cluster(request_timeout=1).result(2)
            admin.list_topics(timeout=2)
            if self.assignor is not None:
                # The assignor never creates topics; publish creates the plans topic, nothing else this one.
                ensure_topics(self.client_config(), [TopicSpec(self.assignor.decisions_topic, compacted=True)])
            return True
        except KafkaException:  # not serving yet; the deadline bounds the wait
            return False

    def _log_tail(self, lines: int = 5) -> str:
        for path in (self.data_dir / "jvm.out", self.log_file):
            if path.is_file():
                errors = [line for line in path.read_text(errors="replace").splitlines() if "ERROR" in line]
                if errors:
                    return " | ".join(errors[-lines:])
        return f"see {self.log_file}"

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop the broker's process group (a controlled shutdown) and wait; the data stays."""
        self._server.stop(timeout_s)

    def kill(self) -> None:
        """Stop the JVM at once (SIGKILL), as a crash would; the data stays."""
        self._server.stop(0.0, sig=9)

    def close(self) -> None:
        """Stop the broker and remove its data unless it lives in a caller's `data_dir`."""
        self.stop()
        if not self._keep_data:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    @property
    def running(self) -> bool:
        return self._server.running

    def __enter__(self) -> EmbeddedBroker:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()
