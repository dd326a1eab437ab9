"""One bounded run of the streams-groups reader (assignor/java/streams-groups-reader): the Java Admin client lists
and describes every streams-protocol group (KIP-1071) and prints JSON lines, which broker_streams.py parses.

confluent-kafka 2.16 and kafka-python have no streams-group API (ListGroups filtered to streams,
DescribeStreamsGroups), so extract calls Kafka's own Java client once per snapshot: a child JVM that dies with its
parent, killed (with its process group) at the deadline, its stdout read from a file and its errors named.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from jobs.pipeline.stage import StageUnavailable
from jobs.processes import spawn, stop_group

log = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
JAR_DIR = REPO / "assignor" / "java" / "streams-groups-reader" / "target"
JAR_ENV = "RBP_STREAMS_READER_JAR"  # where a deployment keeps the jar when it does not run from a repo checkout
MAX_OUTPUT_BYTES = 1 << 30  # the reader's whole output; a bigger one is refused, not read into memory
_FATAL = b'"kind":"fatal"'


class StreamsGroupsUnreadable(StageUnavailable):
    """The streams-groups reader could not run or did not finish: the cluster's streams groups are unknown."""


def reader_jar(given: Path | None = None) -> Path:
    """The shaded reader jar: ``given`` (RBP_STREAMS_READER_JAR) when set, else the one `make java` built here."""
    if given is not None:
        if not given.is_file():
            raise StreamsGroupsUnreadable(f"{JAR_ENV}={given}: no such file")
        return given
    found = sorted(p for p in JAR_DIR.glob("streams-groups-reader-*.jar") if not p.name.startswith("original-"))
    if not found:
        raise StreamsGroupsUnreadable(f"no streams-groups-reader jar in {JAR_DIR}: run `make java` (or set {JAR_ENV})")
    return found[-1]


def _jaas(mechanism: str, user: str, password: str) -> str:
    module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
    quoted = [v.replace("\\", "\\\\").replace('"', '\\"') for v in (user, password)]
    return f'org.apache.kafka.common.security.{module} required username="{quoted[0]}" password="{quoted[1]}";'


# librdkafka names (RBP_KAFKA_CONFIG) with the same meaning in Kafka's Java clients.
_SAME = ("security.protocol", "client.id", "client.rack", "ssl.endpoint.identification.algorithm")


def java_client_properties(config: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The Java Admin client's properties for RBP_KAFKA_CONFIG's librdkafka ones (SASL PLAIN/SCRAM, TLS CA), and
    the names it cannot carry over (left out; the caller logs them)."""
    props = {k: config[k] for k in _SAME if k in config}
    mechanism = config.get("sasl.mechanism") or config.get("sasl.mechanisms")
    if mechanism:
        props["sasl.mechanism"] = mechanism
        if "sasl.username" in config:
            props["sasl.jaas.config"] = _jaas(mechanism, config["sasl.username"], config.get("sasl.password", ""))
    if "ssl.ca.location" in config:
        props |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": config["ssl.ca.location"]}
    carried = {*_SAME, "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password", "ssl.ca.location"}
    return props, sorted(k for k in config if k not in carried and k != "bootstrap.servers")


def _properties_file(props: Mapping[str, str], folder: Path) -> Path:
    """A Java properties file readable by this user only (it may hold a password)."""
    path = folder / "client.properties"
    escaped = {k: re.sub(r"([\\:=#!\s])", r"\\\1", v) for k, v in props.items()}
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write("".join(f"{k}={v}\n" for k, v in sorted(escaped.items())))
    return path


def read_streams_groups_lines(
    bootstrap: str,
    config: Mapping[str, str],
    timeout_s: float,
    *,
    java: str = "java",
    jar: Path | None = None,
    heap_mb: int = 256,
) -> list[bytes]:
    """Run the reader once (each Admin call bounded by ``timeout_s``, the whole JVM by a few times that) and return
    its output lines; StreamsGroupsUnreadable naming the cause when it cannot start, fails or overruns."""
    jar = reader_jar(jar)
    if shutil.which(java) is None and not Path(java).is_file():
        raise StreamsGroupsUnreadable(f"no `{java}` to run the streams-groups reader (Java 17+ is needed)")
    props, dropped = java_client_properties(config)
    if dropped:
        log.warning("streams-groups reader: RBP_KAFKA_CONFIG properties not carried to Java: %s", ", ".join(dropped))
    timeout_ms = max(1, min(int(timeout_s * 1000), 600_000))
    deadline_s = 30.0 + 4 * timeout_ms / 1000  # JVM start, list, describe, configs, close
    with tempfile.TemporaryDirectory(prefix="rbp-streams-reader-") as work:
        folder = Path(work)
        command = [
            *(java, f"-Xmx{heap_mb}m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", f"-Djava.io.tmpdir={folder}"),
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            *("-jar", str(jar), "--bootstrap", bootstrap, "--timeout-ms", str(timeout_ms)),
            *("--command-config", str(_properties_file(props, folder))),
        ]
        out_path, err_path = folder / "stdout", folder / "stderr"
        started = time.monotonic()
        with out_path.open("wb") as out, err_path.open("wb") as err:
            process = spawn(command, stdout=out, stderr=err)
            try:
                status = process.wait(timeout=deadline_s)
            except subprocess.TimeoutExpired:
                stop_group(process, 5.0)
                raise StreamsGroupsUnreadable(
                    f"the streams-groups reader did not finish within {deadline_s:.0f} s (bootstrap {bootstrap})"
                ) from None
            finally:
                if process.poll() is None:
                    stop_group(process, 5.0)
        size = out_path.stat().st_size
        if size > MAX_OUTPUT_BYTES:
            raise StreamsGroupsUnreadable(f"the streams-groups reader printed {size} bytes, over {MAX_OUTPUT_BYTES}")
        lines = out_path.read_bytes().splitlines()
        stderr_tail = " | ".join(err_path.read_text("utf-8", "replace").strip().splitlines()[-3:])
    fatal = next((line for line in lines if _FATAL in line), None)
    if status != 0 or fatal is not None:
        why = (fatal or b"").decode("utf-8", "replace")[:2000] or stderr_tail or "no output"
        raise StreamsGroupsUnreadable(f"the streams-groups reader failed (exit {status}) on {bootstrap}: {why}")
    log.info("streams-groups reader: %d line(s) in %.1f s", len(lines), time.monotonic() - started)
    return lines
