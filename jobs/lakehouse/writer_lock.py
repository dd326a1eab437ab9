"""One writer at a time per lake: stages take an exclusive lock on the lake root before they write.

Delta commits are atomic one by one, but a stage is several commits computed from what it read first: two stages
writing at once (observe and publish, two planning runs) could each decide from a state the other is changing.
The lock is a POSIX advisory lock on a file in the lake root, released by the kernel if its holder dies, so a killed
stage never leaves the lake locked. It guards lakes on a local or shared POSIX file system, which is what `Lake`
writes to.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)

LOCK_FILE = "_writer.lock"


class LakeBusy(RuntimeError):
    """Another stage kept the lake's writer lock for the whole wait; the message names it."""


def _holder(handle: int) -> str:
    os.lseek(handle, 0, os.SEEK_SET)
    raw = os.read(handle, 4096)
    try:
        who = json.loads(raw)
        return f"{who['stage']} (pid {who['pid']} on {who['host']})"
    except (ValueError, KeyError, TypeError):
        return "another stage"


@contextmanager
def writer_lock(root: Path, stage: str, timeout_s: float, poll_s: float = 0.5) -> Iterator[None]:
    """Hold the lake's writer lock while the block runs; waits at most ``timeout_s`` for it (LakeBusy after)."""
    root.mkdir(parents=True, exist_ok=True)
    handle = os.open(root / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout_s
        waiting_logged = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = _holder(handle)
                if time.monotonic() >= deadline:
                    raise LakeBusy(f"lake {root} is being written by {holder}; waited {timeout_s:g} s") from None
                if not waiting_logged:
                    log.info("%s waits for the lake's writer lock, held by %s", stage, holder)
                    waiting_logged = True
                time.sleep(poll_s)
        os.ftruncate(handle, 0)
        os.lseek(handle, 0, os.SEEK_SET)
        os.write(handle, json.dumps({"stage": stage, "pid": os.getpid(), "host": socket.gethostname()}).encode())
        try:
            yield
        finally:
            os.ftruncate(handle, 0)
            fcntl.flock(handle, fcntl.LOCK_UN)
    finally:
        os.close(handle)
