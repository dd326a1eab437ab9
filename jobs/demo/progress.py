"""What every phase of the demo shares: timestamped progress lines, the demo's error, and SIGTERM as Ctrl-C."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from rich.console import Console


class DemoError(RuntimeError):
    """A part of the demo failed (a task of the DAG run, an announcement)."""


@dataclass
class Progress:
    """Timestamped progress lines on the console."""

    console: Console
    started: float

    def __call__(self, message: str) -> None:
        self.console.print(f"[dim]{time.monotonic() - self.started:6.1f}s[/dim] {message}")


@contextmanager
def interrupt_on_sigterm() -> Iterator[None]:
    """SIGTERM ends the demo like Ctrl-C: every context unwinds and stops what it started."""

    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
