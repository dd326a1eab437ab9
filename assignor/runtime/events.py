"""An instance's event log: one JSON line per meaningful event, beside its state, plus a log line."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("assignor.runtime")


class EventLog:
    """Appends ``{"t": epoch_ms, "event": name, ...}`` lines; operators and tests read the same file."""

    def __init__(self, path: Path, name: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.name = name
        self._file = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def emit(self, event: str, **fields: Any) -> None:
        record = {"t": int(time.time() * 1000), "event": event, **fields}
        with self._lock:
            self._file.write(json.dumps(record, sort_keys=True, default=str) + "\n")
            self._file.flush()
        details = " ".join(f"{k}={v}" for k, v in sorted(fields.items()))
        log.info("[%s] %s %s", self.name, event, details)

    def close(self) -> None:
        with self._lock:
            self._file.close()


def read_events(path: Path) -> list[dict[str, Any]]:
    """Every complete event line of a log (a line being written is skipped)."""
    if not path.exists():
        return []
    events = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return events
