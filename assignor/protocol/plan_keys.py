"""Ed25519 keys for plan records: the pipeline signs with a private key, applications verify by key id."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

_KEY_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class PlanKeyError(ValueError):
    """A key or key list that cannot be used; the message names it."""


def public_hex(key: Ed25519PublicKey) -> str:
    """The raw 32-byte public key in lowercase hex: what verifiers are configured with."""
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()


def fingerprint(key: Ed25519PublicKey) -> str:
    """A default key id: the first 16 hex digits of SHA-256 of the raw public key."""
    return hashlib.sha256(bytes.fromhex(public_hex(key))).hexdigest()[:16]


def check_key_id(key_id: str) -> str:
    if not _KEY_ID.fullmatch(key_id):  # fullmatch: "$" alone lets a trailing newline through
        raise PlanKeyError(f"key id {key_id!r} must be 1-64 characters of letters, digits, '.', '_' or '-'")
    return key_id


@dataclass(frozen=True)
class VerifyKeys:
    """The public keys an application accepts plans from, by key id (several at once during a rotation)."""

    keys: Mapping[str, Ed25519PublicKey]

    @staticmethod
    def parse(text: str) -> VerifyKeys:
        """``id=<64 hex>[,id2=<64 hex>...]``, the format of RBP_PLAN_VERIFY_KEYS and the plugin's setting."""
        keys: dict[str, Ed25519PublicKey] = {}
        for entry in filter(None, (part.strip() for part in text.split(","))):
            key_id, sep, hex_key = entry.partition("=")
            if not sep or not _HEX64.match(hex_key.strip().lower()):
                raise PlanKeyError(
                    f"verify key {entry[:80]!r} must read key_id=<64 hex digits of an Ed25519 public key>"
                )
            key_id = check_key_id(key_id.strip())
            if key_id in keys:
                raise PlanKeyError(f"verify key id {key_id!r} appears twice")
            keys[key_id] = Ed25519PublicKey.from_public_bytes(bytes.fromhex(hex_key.strip().lower()))
        return VerifyKeys(keys)

    def verifies(self, key_id: str, signature: bytes, message: bytes) -> bool:
        try:
            self.keys[key_id].verify(signature, message)
        except InvalidSignature:
            return False
        return True

    def render(self) -> str:
        return ",".join(f"{key_id}={public_hex(key)}" for key_id, key in sorted(self.keys.items()))


class Signer(Protocol):
    """Whatever signs records for one key id: a key held here (PlanSigner) or a key service (jobs.signing)."""

    @property
    def key_id(self) -> str: ...

    def sign(self, message: bytes) -> str:
        """The Ed25519 signature of ``message`` in lowercase hex."""
        ...

    def verify_keys(self) -> VerifyKeys: ...


@dataclass(frozen=True)
class PlanSigner:
    """The pipeline's signing key and the id verifiers know its public half by."""

    key_id: str
    private_key: Ed25519PrivateKey

    @staticmethod
    def generate(key_id: str | None = None) -> PlanSigner:
        private = Ed25519PrivateKey.generate()
        return PlanSigner(check_key_id(key_id or fingerprint(private.public_key())), private)

    @staticmethod
    def from_pem(pem: bytes, key_id: str | None = None, passphrase: bytes | None = None) -> PlanSigner:
        """A PKCS#8 PEM private key (as ``keys generate`` writes), encrypted with ``passphrase`` when given."""
        try:
            private = serialization.load_pem_private_key(pem, password=passphrase)
        except TypeError:
            wanted = "is encrypted: a passphrase is needed" if passphrase is None else "is not encrypted"
            raise PlanKeyError(f"the private key {wanted}") from None
        except ValueError:
            # cryptography says the same for a wrong passphrase and a damaged file; neither detail helps an attacker.
            raise PlanKeyError("not a PEM private key, or the passphrase is wrong") from None
        if not isinstance(private, Ed25519PrivateKey):
            raise PlanKeyError(f"plan signing keys are Ed25519, not {type(private).__name__}")
        return PlanSigner(check_key_id(key_id or fingerprint(private.public_key())), private)

    def pem(self, passphrase: bytes | None = None) -> bytes:
        """PKCS#8 PEM; encrypted (the best scheme cryptography has, scrypt-derived key) with ``passphrase``."""
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(passphrase) if passphrase else serialization.NoEncryption()
        )
        return self.private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)

    def verify_keys(self) -> VerifyKeys:
        return VerifyKeys({self.key_id: self.private_key.public_key()})

    def sign(self, message: bytes) -> str:
        return self.private_key.sign(message).hex()
