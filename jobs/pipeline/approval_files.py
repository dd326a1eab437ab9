"""Approval records of the command line: one 0600 file per approval under RBP_APPROVALS_DIR (a 0700 folder).

The Airflow path keeps its record in the approval task's XCom instead. A file is trusted only if this user owns it
and nobody else can write it: the folder must be outside anything the lake's engine can write."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from jobs.pipeline.approval_record import MAX_BYTES, ApprovalRecord, ApprovalRecordError, short


def save(directory: Path, record: ApprovalRecord) -> Path:
    """Write the record as a new file only this user can read or write; its path."""
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(directory, 0o700)  # mkdir's mode is masked by the umask and ignored for an existing folder
    path = directory / f"{record.approved_at}-{short(record.fingerprint)}.json"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(record.to_bytes())
    return path


def load(path: Path) -> ApprovalRecord:
    """One approval file; ApprovalRecordError when it is not a private regular file of this user or not a record."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as err:
        raise ApprovalRecordError(f"approval file {path}: {err.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ApprovalRecordError(f"approval file {path}: not a regular file")
        if info.st_uid != os.getuid():
            raise ApprovalRecordError(f"approval file {path}: owned by uid {info.st_uid}, not by this user")
        if info.st_mode & 0o077:
            raise ApprovalRecordError(f"approval file {path}: mode {oct(info.st_mode & 0o777)}, must be 0600")
        raw = f.read(MAX_BYTES + 1)
    try:
        return ApprovalRecord.from_bytes(raw)
    except ApprovalRecordError as err:
        raise ApprovalRecordError(f"{path}: {err}") from None


def load_all(directory: Path) -> list[ApprovalRecord]:
    """Every approval file in the folder (none when it does not exist); a file that is not one fails the read."""
    if not directory.is_dir():
        return []
    info = directory.stat()
    if info.st_uid != os.getuid() or info.st_mode & 0o022:
        # Whoever else can write the folder could add a record of their own making.
        raise ApprovalRecordError(f"approval folder {directory}: must be this user's and writable by nobody else")
    return [load(p) for p in sorted(directory.glob("*.json"))]
