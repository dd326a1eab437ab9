"""A fixed plan-signing key for tests (never used outside them) and a second key that is not trusted."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from assignor.configs import AssignmentConfigs
from assignor.protocol.decision import LeaderDecision, decide
from assignor.protocol.plan_keys import PlanSigner
from assignor.protocol.plan_ledger import PlanLedger
from assignor.protocol.plans import Verifier
from assignor.state import GroupState

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


def decide_on(
    group_id: str,
    group: GroupState,
    configs: AssignmentConfigs,
    records: bytes | Sequence[bytes | None] | None,
    verifier: Verifier,
    now_ms: int,
    remembered_sequence: int | None = None,
) -> LeaderDecision:
    """A leader's decision on the group's plans-topic records (one value, several in topic order, or none)."""
    values = [] if records is None else [records] if isinstance(records, bytes) else list(records)
    ledger = PlanLedger(group_id).remember(remembered_sequence).offer_all(values, verifier, now_ms)
    plans = None if ledger.verified is None and ledger.rejection is None else ledger.choice(now_ms)
    return decide(group, configs, plans)
