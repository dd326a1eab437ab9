"""Plan signing keys on disk: generated once, private half readable by its owner only."""

from __future__ import annotations

import os
from pathlib import Path

from assignor.protocol.plan_keys import PlanSigner


def write_signing_key(directory: Path, key_id: str | None = None) -> tuple[Path, PlanSigner]:
    """A new Ed25519 key in ``<directory>/<key_id>.pem`` (mode 0600, never overwritten) and its signer."""
    signer = PlanSigner.generate(key_id)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{signer.key_id}.pem"
    # O_EXCL: a rotation must never replace a key that signed plans still in force.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise ValueError(f"{path} exists: choose another --key-id (a key is never overwritten)") from None
    with os.fdopen(fd, "wb") as out:
        out.write(signer.pem())
    return path, signer
