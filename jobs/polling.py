"""Waiting for something another process does: poll a condition until a deadline, never a bare sleep."""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_until(
    condition: Callable[[], bool],
    timeout_s: float,
    what: str,
    poll_s: float = 0.2,
    error: type[Exception] = TimeoutError,
) -> None:
    """Poll ``condition`` until it holds; ``error`` naming ``what`` once ``timeout_s`` has passed."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(poll_s)
    raise error(f"timed out after {timeout_s:g} s waiting for {what}")
