"""A real, unmodified Kafka Streams application for tests: Apache Kafka's WordCountDemo from the
kafka-streams-examples jar (Maven Central, tests/support/streams_examples/pom.xml), one JVM per instance."""

from __future__ import annotations

import argparse
import fcntl
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from jobs.local.jvm import DEFAULT_JVM_DIR, classpath_dir
from jobs.processes import spawn, stop_group

REPO = Path(__file__).resolve().parents[2]
WORDCOUNT_MAIN = "org.apache.kafka.streams.examples.wordcount.WordCountDemo"
INPUT_TOPIC = "streams-plaintext-input"  # fixed by WordCountDemo
OUTPUT_TOPIC = "streams-wordcount-output"


def plugin_jar() -> Path:
    """The plan-honoring plugin jar `make` built (assignor/java/plan-honoring-assignor)."""
    target = REPO / "assignor" / "java" / "plan-honoring-assignor" / "target"
    built = target.glob("plan-honoring-assignor-*.jar")
    jars = [j for j in built if not j.name.endswith(("-sources.jar", "-tests.jar"))]
    if len(jars) != 1:
        raise FileNotFoundError(f"expected one plugin jar in {target} (run `make java`), found {jars}")
    return jars[0]


def streams_examples_classpath(jvm_dir: Path = DEFAULT_JVM_DIR) -> str:
    """The examples jar and its dependencies, fetched with mvn on first use (`make test` fetches them first)."""
    jvm_dir.mkdir(parents=True, exist_ok=True)
    # Two xdist workers may ask at once: one fetches while the other waits, then finds the folder current (both
    # fetching would empty each other's staging folder).
    with (jvm_dir / ".streams_examples.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return str(classpath_dir("streams_examples", jvm_dir, package="tests.support") / "*")


class WordCountInstance:
    """One WordCountDemo JVM (an application instance with ``threads`` stream threads), stopped on exit."""

    def __init__(
        self,
        bootstrap: str,
        application_id: str,
        work_dir: Path,
        name: str,
        threads: int = 1,
        group_protocol: str = "classic",
        extra: Mapping[str, str] | None = None,
    ) -> None:
        """``group_protocol``: ``classic`` (a consumer group) or ``streams`` (KIP-1071: the broker assigns);
        ``extra``: more Kafka Streams properties (the plugin's lines, standbys), as an operator would add them."""
        if group_protocol not in ("classic", "streams"):
            raise ValueError(f"group_protocol must be classic or streams, not {group_protocol!r}")
        self.application_id = application_id
        self.name = name
        self._dir = work_dir / name
        self._dir.mkdir(parents=True, exist_ok=True)
        self.log_file = self._dir / "app.log"
        properties = {
            "application.id": application_id,
            "bootstrap.servers": bootstrap,
            "client.id": f"{application_id}-{name}",
            "state.dir": str(self._dir / "state"),
            "num.stream.threads": str(threads),
            "group.protocol": group_protocol,  # classic is the clients' default in 4.4 too; said so it stays
            # Under the streams protocol these are the group's configs on the broker, not the client's.
            **({"session.timeout.ms": "6000", "heartbeat.interval.ms": "500"} if group_protocol == "classic" else {}),
            "commit.interval.ms": "200",
            "replication.factor": "1",
            **(extra or {}),
        }
        self._config = self._dir / "streams.properties"
        self._config.write_text("".join(f"{k}={v}\n" for k, v in properties.items()), encoding="utf-8")
        self._process: subprocess.Popen[bytes] | None = None

    def start(self, classpath: str) -> WordCountInstance:
        with self.log_file.open("ab") as log:
            self._process = spawn(["java", "-cp", classpath, WORDCOUNT_MAIN, str(self._config)], stdout=log)
        return self

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        text = self.log_file.read_text(encoding="utf-8", errors="replace") if self.log_file.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self._process is not None:
            stop_group(self._process)

    def __enter__(self) -> WordCountInstance:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """`python -m tests.support.streams_app [--jvm-dir DIR]`: fetch the examples' jars (what `make test` runs)."""
    parser = argparse.ArgumentParser(prog="python -m tests.support.streams_app", description=main.__doc__)
    parser.add_argument("--jvm-dir", type=Path, default=DEFAULT_JVM_DIR)
    print(streams_examples_classpath(parser.parse_args(argv).jvm_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
