"""A task's local state: a SQLite key-value store with its changelog checkpoints and input position.

Store updates and checkpoints commit in one transaction, so the checkpointed offsets always describe the
data on disk (what Kafka Streams achieves with its .checkpoint file written after a flush).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path

from assignor.runtime.protocol import Partition

_SCHEMA = """
CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS checkpoint (topic TEXT NOT NULL, partition INTEGER NOT NULL, next_offset INTEGER NOT NULL,
                                       PRIMARY KEY (topic, partition));
CREATE TABLE IF NOT EXISTS input_position (topic TEXT NOT NULL, partition INTEGER NOT NULL,
                                           next_offset INTEGER NOT NULL, PRIMARY KEY (topic, partition));
"""
STORE_FILE = "store.sqlite"

ChangelogRecord = tuple[Partition, int, str, str]  # (changelog partition, offset, key, value)


class TaskStore:
    """One task's store. Positions are next offsets to read (last applied offset + 1)."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / STORE_FILE
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self.positions: dict[Partition, int] = {
            (t, p): o for t, p, o in self._db.execute("SELECT topic, partition, next_offset FROM checkpoint")
        }

    def offset_sum(self, changelogs: Iterable[Partition]) -> int:
        """The KIP-441 offset sum: checkpointed positions summed over the task's changelog partitions."""
        return sum(self.positions.get(p, 0) for p in changelogs)

    def get(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def size(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM kv").fetchone()[0])

    def input_position(self, partition: Partition) -> int | None:
        row = self._db.execute(
            "SELECT next_offset FROM input_position WHERE topic = ? AND partition = ?", partition
        ).fetchone()
        return None if row is None else int(row[0])

    def apply(self, records: Iterable[ChangelogRecord], inputs: Mapping[Partition, int] | None = None) -> int:
        """Apply changelog records (restore, or an active's own writes) and checkpoint, atomically."""
        advanced: dict[Partition, int] = {}
        rows: list[tuple[str, str]] = []
        for partition, offset, key, value in records:
            rows.append((key, value))
            advanced[partition] = max(advanced.get(partition, 0), offset + 1)
        if not rows and not inputs:
            return 0
        with self._transaction():
            self._db.executemany("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", rows)
            self._db.executemany(
                "INSERT OR REPLACE INTO checkpoint (topic, partition, next_offset) VALUES (?, ?, ?)",
                [(t, p, max(o, self.positions.get((t, p), 0))) for (t, p), o in advanced.items()],
            )
            self._db.executemany(
                "INSERT OR REPLACE INTO input_position (topic, partition, next_offset) VALUES (?, ?, ?)",
                [(t, p, o) for (t, p), o in (inputs or {}).items()],
            )
        for partition, offset in advanced.items():
            self.positions[partition] = max(offset, self.positions.get(partition, 0))
        return len(rows)

    def close(self) -> None:
        self._db.close()

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)


class _Transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN")

    def __exit__(self, kind: object, *_: object) -> None:
        self._db.execute("COMMIT" if kind is None else "ROLLBACK")


def read_checkpoints(directory: Path) -> dict[Partition, int]:
    """A closed task's checkpointed positions, without opening it for writing."""
    path = directory / STORE_FILE
    if not path.exists():
        return {}
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {(t, p): o for t, p, o in db.execute("SELECT topic, partition, next_offset FROM checkpoint")}
    except sqlite3.OperationalError:
        return {}
    finally:
        db.close()
