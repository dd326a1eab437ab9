"""A fixed plan-signing key for tests (never used outside them) and a second key that is not trusted."""

from __future__ import annotations

from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from assignor.protocol.plan_keys import PlanSigner
from assignor.protocol.plans import Verifier

SIGNER = PlanSigner("test-key", Ed25519PrivateKey.from_private_bytes(bytes(range(32))))
VERIFY_KEYS = SIGNER.verify_keys()
VERIFIER = Verifier(VERIFY_KEYS)
# Same key id, different key: what a forger without the private key can at best produce.
FORGER = PlanSigner("test-key", Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33))))


def key_file(directory: Path) -> Path:
    """The test key as a PEM file, as RBP_PLAN_SIGNING_KEY_FILE reads it."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "test-key.pem"
    path.write_bytes(SIGNER.pem())
    return path


def signing_env(directory: Path) -> dict[str, str]:
    """The RBP_ variables that make a pipeline sign, and a group verify, with the test key."""
    return {
        "RBP_PLAN_SIGNING_KEY_FILE": str(key_file(directory)),
        "RBP_PLAN_KEY_ID": SIGNER.key_id,
        "RBP_PLAN_VERIFY_KEYS": VERIFY_KEYS.render(),
    }
