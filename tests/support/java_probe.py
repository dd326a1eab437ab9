"""A test-scope Java entry point of assignor/java run as a child JVM that answers one JSON line per command line.

The probes (e.g. ``io.rebalanceplanner.kafka.PlanSourceProbe``) live in a module's ``src/test/java`` and run on the
classpath the embedded broker runs on (Kafka's own jars, kafka-clients included) plus the module's compiled classes,
which `make java` (``mvn verify``, a dependency of `make test`) leaves in ``target/``."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from jobs.local.broker import log4j_config
from jobs.local.jvm import classpath_dir
from jobs.polling import wait_until
from jobs.processes import spawn

JAVA_DIR = Path(__file__).resolve().parents[2] / "assignor" / "java"
# Every probe needs the pure core; the plugin's module holds it (the broker-side jar shades it in).
CORE_MODULE = "plan-honoring-assignor"


def probe_classpath(module: str) -> str:
    """The module's classes and test classes, the core's classes, and Kafka's jars (as on a broker)."""
    folders = [JAVA_DIR / module / "target" / "classes", JAVA_DIR / module / "target" / "test-classes"]
    if module != CORE_MODULE:
        folders.append(JAVA_DIR / CORE_MODULE / "target" / "classes")
    missing = [str(f) for f in folders if not f.is_dir()]
    if missing:
        raise FileNotFoundError(f"{', '.join(missing)} not built: run `make java`")
    return os.pathsep.join([*(str(f) for f in folders), str(classpath_dir("kafka").resolve() / "*")])


class JavaProbe:
    """A probe's JVM: ``ask`` writes a command line and returns the JSON line it answers; EOF on stdin ends it."""

    def __init__(self, module: str, main: str, args: Sequence[str], log_dir: Path) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_file = log_dir / f"{main.rsplit('.', 1)[-1]}.log"
        config = log_dir / "log4j2.properties"
        config.write_text(log4j_config(self.log_file), encoding="utf-8")
        self._stderr = (log_dir / "stderr.log").open("wb")
        command = [
            *("java", "-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"),
            f"-Dlog4j2.configurationFile={config}",
            *("-cp", probe_classpath(module), main, *args),
        ]
        # SIGKILL with the parent: it ends a JVM left stopped by frozen() too, which a SIGTERM would not reach.
        self._process = spawn(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, death_signal=signal.SIGKILL
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read_lines, daemon=True).start()

    def _read_lines(self) -> None:
        stdout = self._process.stdout
        assert stdout is not None
        for raw in stdout:
            line = raw.decode("utf-8", "replace").strip()
            if line.startswith("{"):
                self._lines.put(line)
        self._lines.put(None)  # the JVM ended

    def ask(self, command: str, timeout_s: float = 60.0) -> dict[str, Any]:
        """The probe's answer to ``command``; AssertionError with the JVM's log when it ends or does not answer."""
        stdin: IO[bytes] | None = self._process.stdin
        assert stdin is not None
        stdin.write(f"{command}\n".encode())
        stdin.flush()
        try:
            line = self._lines.get(timeout=timeout_s)
        except queue.Empty:
            line = None
        if line is None:
            raise AssertionError(f"the probe gave no answer to {command!r} within {timeout_s:g} s: {self.log_tail()}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def log_tail(self, lines: int = 30) -> str:
        text = self.log_file.read_text(encoding="utf-8", errors="replace") if self.log_file.is_file() else ""
        return "\n".join(text.splitlines()[-lines:])

    @contextmanager
    def frozen(self) -> Iterator[None]:
        """The whole JVM stopped (SIGSTOP, as in a long pause), every thread of it, until the block ends."""
        os.kill(self._process.pid, signal.SIGSTOP)
        try:
            wait_until(self._stopped, 30, "every thread of the probe's JVM stopped", poll_s=0.01)
            yield
        finally:
            os.kill(self._process.pid, signal.SIGCONT)

    def _stopped(self) -> bool:
        """Whether every thread is stopped ('T' in /proc): SIGSTOP reaches the threads of other CPUs a moment later."""
        states = []
        for stat in Path(f"/proc/{self._process.pid}/task").glob("*/stat"):
            with contextlib.suppress(FileNotFoundError):  # a thread that just ended
                states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
        return bool(states) and all(state in "tT" for state in states)

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(10)
        self._stderr.close()

    def __enter__(self) -> JavaProbe:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
