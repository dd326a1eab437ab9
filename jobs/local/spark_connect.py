"""A local Apache Spark Connect server with Delta Lake: pyspark's own distribution plus the delta-spark jars, on
127.0.0.1, as a child JVM that never outlives us. What ``SPARK_REMOTE`` points at when the lake runs on Spark."""

from __future__ import annotations

import logging
import os
import re
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

import pyspark
from pyspark.sql import SparkSession

from jobs.local.jvm import DEFAULT_JVM_DIR, classpath_dir
from jobs.local.server_process import ServerProcess
from jobs.processes import free_port

log = logging.getLogger(__name__)

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
# Spark Connect's pre-shared token (spark.connect.authenticate.token) read from the environment: a --conf would
# show the token in the process list.
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
# What a token may hold: it travels as a parameter of the sc:// URL (";token=..."), where ';', '/' and '=' would
# cut it, and as an HTTP/2 bearer header.
TOKEN_PATTERN = re.compile(r"[A-Za-z0-9._~+-]{16,512}")
# The addresses a server with a token may listen on: its readiness check (and pyspark, without TLS) sends the token
# only to "localhost", which need not reach a server bound to ::1; and a server on every interface would carry it in
# plain gRPC to anyone who can reach it (put a TLS proxy in front).
LOOPBACK_HOSTS = ("127.0.0.1", "localhost")
# A token file larger than this is not a token file (read no further: /dev/zero or a huge file must not hang us).
TOKEN_FILE_MAX_BYTES = 4096


class SparkConnectError(RuntimeError):
    """The Spark Connect server could not be started or did not answer in time."""


def read_token(path: Path) -> str:
    """The pre-shared token in ``path`` (surrounding whitespace dropped); ValueError naming what is wrong."""
    try:
        with path.open("rb") as file:
            raw = file.read(TOKEN_FILE_MAX_BYTES + 1)
        token = raw.decode("ascii").strip()
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"Spark Connect token file {path}: cannot read it: {err}") from None
    if len(raw) > TOKEN_FILE_MAX_BYTES:
        raise ValueError(f"Spark Connect token file {path}: more than {TOKEN_FILE_MAX_BYTES} bytes, not a token")
    if not TOKEN_PATTERN.fullmatch(token):
        raise ValueError(
            f"Spark Connect token file {path}: the token must be 16 to 512 characters of A-Z a-z 0-9 . _ ~ + - "
            f"(it goes into the sc:// URL), got {len(token)} characters"
        )
    return token


def spark_home() -> Path:
    """pyspark's own Spark distribution (its jars and launch scripts)."""
    return Path(pyspark.__file__).resolve().parent


def server_conf(port: int, host: str, work_dir: Path, cores: int, driver_memory_mb: int) -> dict[str, str]:
    """The server's Spark properties: Delta's SQL extension and catalog, loopback only, scratch in ``work_dir``."""
    return {
        "spark.master": f"local[{cores}]",
        "spark.driver.memory": f"{driver_memory_mb}m",
        "spark.driver.host": host,
        "spark.driver.bindAddress": host,
        "spark.connect.grpc.binding.address": host,
        "spark.connect.grpc.binding.port": str(port),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        # Tables are addressed by path (delta.`/lake/t`): no Hive metastore, no metastore_db in the caller's folder.
        "spark.sql.catalogImplementation": "in-memory",
        "spark.sql.warehouse.dir": str(work_dir / "warehouse"),
        "spark.local.dir": str(work_dir / "tmp"),
        # The driver's java.io.tmpdir too: lz4-java unpacks its native library there (see private_tmpdir).
        "spark.driver.extraJavaOptions": f"-Djava.io.tmpdir={(work_dir / 'tmp').resolve()}",
        "spark.ui.enabled": "false",
        # Small local jobs: a few shuffle partitions, not 200 tasks of nothing each.
        "spark.sql.shuffle.partitions": str(max(2, 2 * cores)),
        # Delta rebuilds a table's state from its log in 50 tasks by default: most of a small MERGE's time here.
        "spark.databricks.delta.snapshotPartitions": str(max(1, cores)),
        "spark.sql.session.timeZone": "UTC",
    }


class LocalSparkConnect:
    """Apache Spark Connect on 127.0.0.1 with Delta: ``with LocalSparkConnect() as remote:`` gives ``sc://...``."""

    def __init__(
        self,
        port: int = 0,
        *,
        jvm_dir: Path = DEFAULT_JVM_DIR,
        cores: int = 2,
        driver_memory_mb: int = 1024,
        host: str = "127.0.0.1",
        python: str = sys.executable,
        extra_conf: Mapping[str, str] | None = None,
        token: str | None = None,
    ) -> None:
        if token is not None and not TOKEN_PATTERN.fullmatch(token):
            raise ValueError("LocalSparkConnect: the token must be 16 to 512 characters of A-Z a-z 0-9 . _ ~ + -")
        if token is not None and host not in LOOPBACK_HOSTS:
            # The readiness check (and any client here) can send the token without TLS only to localhost.
            raise ValueError(f"LocalSparkConnect: a server with a token listens on loopback only, not {host!r}")
        self._token = token
        self.host = host
        self._extra_conf = dict(extra_conf or {})
        self.port = port or free_port(host)
        self._jvm_dir = jvm_dir
        self._cores = cores
        self._driver_memory_mb = driver_memory_mb
        self._python = python
        self.work_dir = Path(tempfile.mkdtemp(prefix="rbp-spark-"))
        self._server = ServerProcess("Spark Connect", SparkConnectError, self._tail)

    @property
    def remote(self) -> str:
        """The ``SPARK_REMOTE`` of this server."""
        return f"sc://{self.host}:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.work_dir / "server.log"

    @property
    def running(self) -> bool:
        return self._server.running

    def command(self, delta_jars: list[Path]) -> list[str]:
        """spark-submit of the Connect server class, with the Delta jars and our properties."""
        conf = server_conf(self.port, self.host, self.work_dir, self._cores, self._driver_memory_mb)
        conf.update(self._extra_conf)
        args = [str(spark_home() / "bin" / "spark-submit"), "--class", SERVER_CLASS, "--name", "rebalance-planner"]
        args += ["--jars", ",".join(str(j) for j in delta_jars)]
        for key, value in conf.items():
            args += ["--conf", f"{key}={value}"]
        return [*args, "spark-internal"]

    def start(self, timeout_s: float = 180.0) -> str:
        """Start the server (fetching the Delta jars once) and wait until a session runs a query."""
        if self.running:
            return self.remote
        if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
            raise SparkConnectError("no Java runtime: install a JDK 17 (make does) to run Apache Spark")
        jars = sorted(classpath_dir("spark", self._jvm_dir).resolve().glob("*.jar"))
        (self.work_dir / "tmp").mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "SPARK_HOME": str(spark_home()),
            # The Python UDF workers (the planning UDFs) run our code: the same interpreter as ours.
            "PYSPARK_PYTHON": self._python,
            "SPARK_LOG_DIR": str(self.work_dir),
            "SPARK_CONF_DIR": str(self.work_dir),
        }
        env.pop(TOKEN_ENV, None)
        if self._token is not None:
            env[TOKEN_ENV] = self._token  # every client must send it as its bearer token
        started = time.monotonic()
        self._server.spawn(self.command(jars), self.log_file, env=env, cwd=self.work_dir)
        self._server.await_ready(self._serves, started + timeout_s, self.remote, backoff_s=0.5)
        log.info("Spark Connect with Delta ready on %s in %.1f s", self.remote, time.monotonic() - started)
        return self.remote

    def _serves(self) -> bool:
        # A client asked before the port is open retries inside itself with a backoff growing to a minute a try
        # (pyspark's DefaultPolicy): the first query then waited up to 90 s past the server's start. A plain
        # connect answers at once.
        try:
            socket.create_connection((self.host, self.port), timeout=1.0).close()
        except OSError:
            return False
        # With a token: over loopback as "localhost", the one address pyspark sends a token to without TLS.
        remote = self.remote if self._token is None else f"sc://localhost:{self.port}/;token={self._token}"
        try:
            session = SparkSession.builder.remote(remote).create()
            try:
                session.sql("SELECT 1").collect()
                return True
            finally:
                session.stop()
        except Exception:  # not serving yet: any client error means "try again"; the deadline bounds it
            return False

    def _tail(self, lines: int = 5) -> str:
        if self.log_file.is_file():
            text = self.log_file.read_text(errors="replace").splitlines()
            errors = [line for line in text if "ERROR" in line or "Exception" in line]
            return " | ".join((errors or text)[-lines:])
        return f"see {self.log_file}"

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop the server's process group and wait."""
        self._server.stop(timeout_s)

    def close(self) -> None:
        """Stop the server and remove its scratch folder."""
        self.stop()
        shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> str:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()
