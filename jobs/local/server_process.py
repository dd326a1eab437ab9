"""A local server we start and own (the embedded Kafka broker, Spark Connect): spawned so that it never outlives
us, waited for until it serves or fails, stopped as a process group."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from jobs.processes import spawn, stop_group


class ServerProcess:
    """One child server's lifecycle; its owner says how to tell it serves and where its errors are logged."""

    def __init__(self, name: str, error: type[Exception], log_tail: Callable[[], str]) -> None:
        self.name, self._error, self._log_tail = name, error, log_tail
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def spawn(
        self, command: Sequence[str], out: Path, *, env: Mapping[str, str] | None = None, cwd: Path | None = None
    ) -> None:
        """Start the server, its output appended to ``out``."""
        with out.open("ab") as sink:
            self._process = spawn(command, stdout=sink, env=env, cwd=cwd)

    def await_ready(self, serves: Callable[[], bool], deadline: float, where: str, backoff_s: float = 0.0) -> None:
        """Return once ``serves()`` is true; raise the owner's error when the server exits first or by the deadline
        (stopping it then)."""
        assert self._process is not None, "spawn first"
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                status, self._process = self._process.returncode, None
                raise self._error(f"{self.name} exited with status {status} while starting: {self._log_tail()}")
            if serves():
                return
            if backoff_s:
                time.sleep(backoff_s)  # a pause between connection attempts, not synchronisation
        self.stop()
        raise self._error(f"{self.name} did not answer on {where} in time: {self._log_tail()}")

    def stop(self, timeout_s: float = 30.0, sig: int | None = None) -> None:
        """Signal the server's process group (SIGTERM unless ``sig``), wait, then kill what is left."""
        if self._process is not None:
            if sig is None:
                stop_group(self._process, timeout_s)
            else:
                stop_group(self._process, timeout_s, sig=sig)
            self._process = None
