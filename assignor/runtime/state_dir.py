"""An instance's state directory: its persistent process id and one sub-directory per task it held.

One instance at a time: ``lock`` takes an OS lock (``flock``) on a file in the directory, which the kernel
releases when the holder's process ends however it ends, so a crash never leaves a stale lock behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import uuid
from pathlib import Path
from typing import IO

from assignor.runtime.protocol import Partition
from assignor.runtime.store import read_checkpoints
from assignor.task import TaskId

PROCESS_ID_FILE = "process.id"
LOCK_FILE = ".lock"
# The highest plan sequence this instance acted on as its group's leader, per group: the replay floor that
# survives a restart even when the plans topic no longer holds the record that set it (compaction).
PLAN_SEQUENCE_FILE = "plan-sequence.json"
# The plan-signing key ids a verified revocation took back: kept like the floor, so a revocation read once is not
# forgotten when the plans topic loses it (a restart after compaction, or a record rewritten under its key).
REVOKED_KEYS_FILE = "revoked-keys.json"
MAX_REVOKED_KEYS = 1024
MAX_REVOKED_KEYS_BYTES = 80 * MAX_REVOKED_KEYS  # what remember_revoked_keys can write: a quoted 64-character id, ", "
_KEY_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
MAX_SEQUENCE = 2**53 - 1
MAX_PLAN_SEQUENCE_BYTES = 64 * 1024


class StateDirectoryError(ValueError):
    """A state directory that cannot be used; the message names it and says why (bad input, not a bug)."""


class StateDirectoryLocked(StateDirectoryError):
    """Another live process holds the state directory."""

    def __init__(self, root: Path, holder_pid: int | None) -> None:
        holder = f"process {holder_pid}" if holder_pid is not None else "another process"
        super().__init__(
            f"state directory {root} is in use by {holder}: two instances must never share one "
            "(stop the other instance or give this one its own --state-dir)"
        )
        self.root = root
        self.holder_pid = holder_pid


class StateDirectory:
    """Where an instance keeps everything that must survive a restart (like Kafka Streams' state.dir)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        (root / "tasks").mkdir(exist_ok=True)
        self._lock_file: IO[str] | None = None

    def lock(self) -> None:
        """Hold the directory for this process until ``unlock`` or the process ends; fail at once if it is held."""
        if self._lock_file is not None:
            return
        path = self.root / LOCK_FILE
        # "a+" neither truncates (the holder's pid stays readable) nor fails when the file is absent.
        handle = path.open("a+", encoding="utf-8")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            raise StateDirectoryLocked(self.root, _holder_pid(path)) from None
        except BaseException:
            handle.close()
            raise
        # The pid only names the holder in the loser's message; the flock itself is what excludes.
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._lock_file = handle

    def unlock(self) -> None:
        if self._lock_file is None:
            return
        handle, self._lock_file = self._lock_file, None
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        handle.close()

    @property
    def process_id(self) -> str:
        """A UUID made on first start and kept, so a restarted instance is recognised by the leader."""
        path = self.root / PROCESS_ID_FILE
        if not path.exists():
            _create_once(path, f"{uuid.uuid4()}\n")
        return _read_process_id(path)

    def task_dir(self, task: TaskId) -> Path:
        return self.root / "tasks" / str(task)

    def local_tasks(self) -> list[TaskId]:
        """Tasks with state on disk, whether or not the instance holds them now."""
        found = []
        for child in sorted((self.root / "tasks").iterdir()):
            try:
                found.append(TaskId.parse(child.name))
            except ValueError:
                continue
        return found

    def checkpoints(self, task: TaskId) -> dict[Partition, int]:
        return read_checkpoints(self.task_dir(task))

    def plan_sequence(self, group_id: str) -> int | None:
        """The highest plan sequence remembered for the group, or None; a damaged file is an error naming it."""
        return _read_sequences(self.root / PLAN_SEQUENCE_FILE).get(group_id)

    def revoked_keys(self) -> frozenset[str]:
        return read_revoked_keys(self.root)

    def remember_revoked_keys(self, key_ids: frozenset[str]) -> None:
        remember_revoked_keys(self.root, key_ids)

    def remember_plan_sequence(self, group_id: str, sequence: int) -> None:
        """Keep ``sequence`` for the group if it is higher than the one kept (written whole, fsynced, renamed)."""
        if not 1 <= sequence <= MAX_SEQUENCE:
            raise ValueError(f"plan sequence {sequence} is outside 1..{MAX_SEQUENCE}")
        path = self.root / PLAN_SEQUENCE_FILE
        known = _read_sequences(path)
        if known.get(group_id, 0) >= sequence:
            return
        known[group_id] = sequence
        _write_json(self.root, path, known)


def _write_json(root: Path, path: Path, value: object) -> None:
    """``value`` as ``path`` whole or not at all: written beside it, fsynced, renamed over it."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8") as out:
        out.write(json.dumps(value, sort_keys=True))
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, path)
    _fsync_directory(root)


def _bounded_json(path: Path, what: str, remedy: str, max_bytes: int = MAX_PLAN_SEQUENCE_BYTES) -> object:
    """``path``'s JSON, read only up to ``max_bytes``; anything else is an error naming the file."""
    raw = path.read_bytes()
    if len(raw) > max_bytes:
        raise StateDirectoryError(f"{path} is larger than {max_bytes} bytes: not {what}")
    try:
        return json.loads(raw)
    except ValueError as err:
        raise StateDirectoryError(f"{path} is not JSON ({err}): {remedy}") from None


def read_revoked_keys(root: Path) -> frozenset[str]:
    """The revoked key ids kept in ``root``; a damaged file is an error naming it (never silently forgotten)."""
    path = root / REVOKED_KEYS_FILE
    if not path.exists():
        return frozenset()
    loaded = _bounded_json(path, "a revoked-keys file", "restore it", MAX_REVOKED_KEYS_BYTES)
    if not isinstance(loaded, list) or not all(isinstance(k, str) and _KEY_ID.fullmatch(k) for k in loaded):
        raise StateDirectoryError(f"{path} must be a JSON list of key ids")
    return frozenset(loaded)


def remember_revoked_keys(root: Path, key_ids: frozenset[str]) -> None:
    """Add ``key_ids`` to the kept revoked key ids (written whole, fsynced, renamed); never removes one."""
    known = read_revoked_keys(root)
    if key_ids <= known:
        return
    merged = known | key_ids
    if len(merged) > MAX_REVOKED_KEYS or not all(_KEY_ID.fullmatch(k) for k in key_ids):
        raise ValueError(f"revoked key ids must be at most {MAX_REVOKED_KEYS} valid key ids")
    _write_json(root, root / REVOKED_KEYS_FILE, sorted(merged))


def _read_sequences(path: Path) -> dict[str, int]:
    if not path.exists():
        return {}
    loaded = _bounded_json(path, "a plan sequence file", "restore it, or delete it to forget the floor")
    if not isinstance(loaded, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_SEQUENCE for v in loaded.values()
    ):
        raise StateDirectoryError(f"{path} must map group ids to sequences in 1..{MAX_SEQUENCE}")
    return {str(k): int(v) for k, v in loaded.items()}


def _create_once(path: Path, text: str) -> None:
    """Write ``path`` whole or not at all, and never replace it once it exists.

    The text goes to a temporary file that is fsynced, then hard-linked into place: a crash leaves either no
    file or the complete one, and when two processes race to make the first id (the fleet reads the id of an
    instance it is about to start), the first link wins and the other reads that one."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    try:
        with tmp.open("x", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
        _fsync_directory(path.parent)
    finally:
        tmp.unlink(missing_ok=True)


def _read_process_id(path: Path) -> str:
    """The stored id; a file that is not one UUID is an error, never silently replaced.

    A new id would make this instance a stranger to the group: the leader and any approved plan know it by
    the old id, and its local state would be reported under a name no plan mentions. Only an operator can
    tell a damaged disk from a copied directory, so the message says what to do."""
    text = path.read_text(encoding="utf-8", errors="replace").strip()
    try:
        uuid.UUID(text)
    except ValueError:
        raise StateDirectoryError(
            f"{path} does not hold a process id (expected one UUID, found {text[:60]!r}): restore it from a backup, "
            "or delete it to give this instance a new identity"
        ) from None
    return text


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _holder_pid(path: Path) -> int | None:
    try:
        return int(path.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None
