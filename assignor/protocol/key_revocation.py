"""Signed key revocations on the plans topic: a key id taken back without redeploying the groups.

A revocation names one key id; it is honored when it verifies with any key the group trusts (the revoked one
included: the owner of a stolen key may revoke it). Revocations are never undone, so their order does not matter:
a leader refuses every record of a revoked key from the moment it has read the revocation, and drops the plan such
a key signed (schemas/vectors/README.md, "Key revocation"; the Java core's KeyRevocation is the same rule).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from assignor.protocol.plan_keys import Signer, VerifyKeys, check_key_id
from assignor.protocol.plans import MAX_SEQUENCE, SIGNATURE, PlanRejected, Reason, field_problem, signature_verifies
from assignor.protocol.strict_json import MalformedJson, canonical_json, strict_loads

REVOCATION_SCHEMA_VERSION = 1
RECORD_TYPE = "key_revocation"
# The plans topic key of a revocation: one per revoked key id, so compaction keeps every revocation. Group ids
# never start with it (docs/operations.md, "Rotating and revoking keys").
TOPIC_KEY_PREFIX = "_rbp_key_revocation/"
MAX_REVOCATION_BYTES = 16 * 1024  # a revocation is a few hundred bytes; anything larger is not one
# What one reader keeps of the revocation records it meets on the plans topic (about 3,000 real ones): only the
# pipeline may write that topic, and a reader's memory stays bounded whatever it holds.
MAX_HELD_BYTES = 1024 * 1024
MAX_TEXT = 1024
_FIELDS: dict[str, type] = {
    "schema_version": int,
    "type": str,
    "revoked_key_id": str,
    "revoked_at": int,
    "revoked_by": str,
    "reason": str,
    "key_id": str,
    "signature": str,
}


@dataclass(frozen=True)
class KeyRevocation:
    """One key id taken back: by whom, when (ms since the epoch) and why."""

    revoked_key_id: str
    revoked_at: int
    revoked_by: str
    reason: str

    @property
    def topic_key(self) -> bytes:
        return topic_key(self.revoked_key_id)

    def to_record(self, signer: Signer) -> dict[str, Any]:
        """The signed record (schemas/key_revocation.schema.json)."""
        fields: dict[str, Any] = {
            "schema_version": REVOCATION_SCHEMA_VERSION,
            "type": RECORD_TYPE,
            "revoked_key_id": check_key_id(self.revoked_key_id),
            "revoked_at": self.revoked_at,
            "revoked_by": self.revoked_by,
            "reason": self.reason,
            "key_id": signer.key_id,
        }
        fields["signature"] = signer.sign(canonical_json(fields))
        return fields


def topic_key(revoked_key_id: str) -> bytes:
    """The plans-topic key a revocation of ``revoked_key_id`` is written under."""
    return (TOPIC_KEY_PREFIX + check_key_id(revoked_key_id)).encode("utf-8")


def is_revocation_key(key: bytes | None) -> bool:
    return key is not None and key.startswith(TOPIC_KEY_PREFIX.encode("utf-8"))


def _malformed(detail: str) -> PlanRejected:
    return PlanRejected(Reason.MALFORMED, f"key revocation: {detail}")


def read_revocation(value: bytes, keys: VerifyKeys) -> KeyRevocation:
    """The revocation a record carries, verified with ``keys``; PlanRejected (malformed, unsupported_version,
    unknown_key, bad_signature) otherwise."""
    if len(value) > MAX_REVOCATION_BYTES:
        raise _malformed(f"{len(value)} bytes, more than {MAX_REVOCATION_BYTES}")
    try:
        record = strict_loads(value, max_bytes=MAX_REVOCATION_BYTES)
    except MalformedJson as err:
        raise _malformed(str(err)) from None
    if not isinstance(record, dict):
        raise _malformed("not a JSON object")
    problem = field_problem(record, _FIELDS)
    if problem is not None:
        raise _malformed(problem)
    extra = sorted(set(record) - set(_FIELDS))
    if extra:
        raise _malformed(f"unexpected field {extra[0]!r}")
    if record["schema_version"] != REVOCATION_SCHEMA_VERSION:
        raise PlanRejected(
            Reason.UNSUPPORTED_VERSION,
            f"key revocation schema_version {record['schema_version']} (supported: {REVOCATION_SCHEMA_VERSION})",
        )
    if record["type"] != RECORD_TYPE:
        raise _malformed(f"type must be {RECORD_TYPE!r}")
    for name in ("revoked_key_id", "key_id"):
        try:
            check_key_id(record[name])
        except ValueError as err:
            raise _malformed(str(err)) from None
    if not 0 <= record["revoked_at"] <= MAX_SEQUENCE:
        raise _malformed(f"revoked_at {record['revoked_at']} is outside 0..{MAX_SEQUENCE}")
    if not 1 <= len(record["revoked_by"]) <= MAX_TEXT or len(record["reason"]) > MAX_TEXT:
        raise _malformed(f"revoked_by must be 1-{MAX_TEXT} characters and reason at most {MAX_TEXT}")
    if not SIGNATURE.fullmatch(record["signature"]):
        raise _malformed("signature must be 128 lowercase hex digits")
    key_id = record["key_id"]
    if key_id not in keys.keys:
        raise PlanRejected(Reason.UNKNOWN_KEY, f"key revocation signed with key_id {key_id!r}, not a verify key")
    if not signature_verifies(record, keys):
        raise PlanRejected(Reason.BAD_SIGNATURE, f"key revocation signature does not verify with key {key_id!r}")
    return KeyRevocation(record["revoked_key_id"], record["revoked_at"], record["revoked_by"], record["reason"])


def kept_by_reader(value: bytes | None, held_bytes: int) -> bool:
    """Whether a reader keeps a revocation record it met, holding ``held_bytes`` of them already: not one larger
    than a revocation can be, nor any past MAX_HELD_BYTES (Java's TopicPlanSource keeps the same bound)."""
    size = len(value or b"")
    return size <= MAX_REVOCATION_BYTES and held_bytes + size <= MAX_HELD_BYTES


def revoked_key_ids(values: Iterable[bytes | None], keys: VerifyKeys) -> frozenset[str]:
    """The key ids the verifiable revocations among ``values`` revoke; the others are ignored (and logged by the
    caller if it wants: an unverifiable revocation revokes nothing)."""
    revoked = set()
    for value in values:
        if value is None:
            continue
        try:
            revoked.add(read_revocation(value, keys).revoked_key_id)
        except PlanRejected:
            continue
    return frozenset(revoked)
