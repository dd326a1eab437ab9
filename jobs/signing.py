"""Plan signing keys: a KMS-style key service (sign by key id, list public keys) and its file backend.

Only the publish step (and the ``withdraw`` / ``keys revoke`` commands, which publish too) opens a key service;
every other stage verifies with public keys alone (docs/operations.md, "Signing keys"). The file backend keeps the
private key as encrypted PKCS#8 (scrypt-derived key), its passphrase in a second file read at that entry point only.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from assignor.protocol.plan_keys import PlanKeyError, PlanSigner, VerifyKeys, check_key_id

log = logging.getLogger(__name__)

MAX_PASSPHRASE_BYTES = 4096
MIN_PASSPHRASE_BYTES = 12  # a short passphrase turns encryption at rest into a formality


class KeyService(Protocol):
    """Signs with keys it never hands out (a cloud KMS, an HSM, or FileKeyService here)."""

    def sign(self, key_id: str, message: bytes) -> bytes:
        """The Ed25519 signature of ``message`` by key ``key_id``; PlanKeyError for a key it does not hold."""
        ...

    def public_keys(self) -> VerifyKeys:
        """The public halves of the keys it holds, by key id."""
        ...


@dataclass(frozen=True)
class ServiceSigner:
    """One key of a key service, as the plan records' Signer: what publish signs with."""

    service: KeyService
    key_id: str

    def sign(self, message: bytes) -> str:
        return self.service.sign(self.key_id, message).hex()

    def verify_keys(self) -> VerifyKeys:
        return VerifyKeys({self.key_id: self.service.public_keys().keys[self.key_id]})


class FileKeyService:
    """Keys from PEM files (PKCS#8, encrypted when a passphrase is given), decrypted in this process only."""

    def __init__(self, signers: dict[str, PlanSigner]) -> None:
        self._signers = dict(signers)

    @staticmethod
    def open(path: Path, key_id: str | None, passphrase: bytes | None, *, require_encrypted: bool) -> FileKeyService:
        """The key in ``path``; PlanKeyError naming the file when it cannot be read, decrypted, or is plain while
        ``require_encrypted``."""
        try:
            pem = path.read_bytes()
        except OSError as err:
            raise PlanKeyError(f"signing key {path}: {err.strerror}") from None
        encrypted = b"ENCRYPTED PRIVATE KEY" in pem
        if require_encrypted and not encrypted:
            raise PlanKeyError(f"signing key {path} is not encrypted: production mode requires `keys generate "
                               "--passphrase-file` keys (or `keys encrypt`)")  # fmt: skip
        if not encrypted:
            log.warning("signing key %s is not encrypted at rest", path)
            passphrase = None
        try:
            signer = PlanSigner.from_pem(pem, key_id, passphrase)
        except PlanKeyError as err:
            raise PlanKeyError(f"signing key {path}: {err}") from None
        return FileKeyService({signer.key_id: signer})

    def sign(self, key_id: str, message: bytes) -> bytes:
        if key_id not in self._signers:
            raise PlanKeyError(f"no signing key {key_id!r} here (held: {', '.join(sorted(self._signers))})")
        return bytes.fromhex(self._signers[key_id].sign(message))

    def public_keys(self) -> VerifyKeys:
        return VerifyKeys({k: s.private_key.public_key() for k, s in self._signers.items()})

    def key_ids(self) -> list[str]:
        return sorted(self._signers)


def read_passphrase(path: Path) -> bytes:
    """The passphrase file's content without its trailing newline; PlanKeyError when unreadable, empty, short,
    huge, or readable by others."""
    try:
        mode = path.stat().st_mode
        raw = path.read_bytes()[: MAX_PASSPHRASE_BYTES + 1]
    except OSError as err:
        raise PlanKeyError(f"passphrase file {path}: {err.strerror}") from None
    if mode & 0o077:
        raise PlanKeyError(f"passphrase file {path} is readable by others (mode {mode & 0o777:o}): chmod 600 it")
    passphrase = raw.rstrip(b"\r\n")
    if len(passphrase) > MAX_PASSPHRASE_BYTES:
        raise PlanKeyError(f"passphrase file {path} holds more than {MAX_PASSPHRASE_BYTES} bytes")
    if len(passphrase) < MIN_PASSPHRASE_BYTES:
        raise PlanKeyError(f"passphrase in {path} is shorter than {MIN_PASSPHRASE_BYTES} bytes")
    return passphrase


def _write_new(path: Path, data: bytes) -> None:
    # O_EXCL: a rotation must never replace a key that signed plans still in force.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise ValueError(f"{path} exists: choose another --key-id (a key is never overwritten)") from None
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def write_signing_key(
    directory: Path, key_id: str | None = None, passphrase: bytes | None = None
) -> tuple[Path, PlanSigner]:
    """A new Ed25519 key in ``<directory>/<key_id>.pem`` (mode 0600, never overwritten, encrypted with
    ``passphrase`` when given) and its signer."""
    signer = PlanSigner.generate(check_key_id(key_id) if key_id else None)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{signer.key_id}.pem"
    _write_new(path, signer.pem(passphrase))
    return path, signer
