"""The sequence publish gives each signed record of a group (plan or withdrawal): per group, strictly increasing.

``sequence = max(publish time in ms, highest verified sequence of the group on the plans topic + 1)``: time keeps
sequences increasing across publishers that never read each other, the topic keeps them increasing when a clock
goes back. Only records that verify (signature by one of our keys, right group) count, so nobody who can write to
the topic but cannot sign can push the sequence up to its bound. Leaders refuse a record whose sequence is lower
than the highest they know (assignor/protocol/plan_ledger.py); docs/plan-lifecycle.md says more.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from assignor.protocol.key_revocation import is_revocation_key, revoked_key_ids
from assignor.protocol.plan_keys import Signer, VerifyKeys
from assignor.protocol.plans import MAX_SEQUENCE, PlanRejected, read_record, record_sequence
from assignor.runtime.kafka_io import iter_records

if TYPE_CHECKING:
    from jobs.settings import Settings


class RevokedSigningKey(ValueError):
    """The configured signing key was revoked: groups refuse whatever it signs, so nothing is signed with it."""


class SequenceExhausted(ValueError):
    """A group's next sequence would pass 2^53 - 1 (what every JSON reader holds exactly)."""


def next_sequence(highest: int | None, now_ms: int) -> int:
    """The group's next sequence: the publish time in ms, or one past the highest on the topic if that is later."""
    candidate = max(now_ms, (highest or 0) + 1, 1)
    if candidate > MAX_SEQUENCE:
        raise SequenceExhausted(f"the next plan sequence {candidate} is beyond {MAX_SEQUENCE}")
    return candidate


def highest_sequences(
    records: Iterable[tuple[bytes | None, bytes | None]], keys: VerifyKeys, group_ids: Collection[str]
) -> dict[str, int]:
    """The highest verified sequence per group among ``(key, value)`` plans-topic records."""
    highest: dict[str, int] = {}
    for key, value in records:
        if key is None or value is None:
            continue
        group_id = key.decode("utf-8", errors="replace")
        if group_id not in group_ids:
            continue
        try:
            record = read_record(value, keys)
        except PlanRejected:
            continue  # an unverifiable record sets no floor for anyone
        if record.group_id == group_id:
            highest[group_id] = max(highest.get(group_id, 0), record_sequence(record))
    return highest


def assign_sequences(
    properties: Mapping[str, str], topic: str, keys: VerifyKeys, group_ids: Collection[str], now_ms: int,
    timeout_s: float, signing_key_id: str | None = None,
) -> dict[str, int]:  # fmt: skip
    """Read the plans topic from its log start and give each group its next sequence; RevokedSigningKey when a
    verified revocation on the topic names ``signing_key_id`` (every group would refuse what it signs)."""
    if not group_ids:
        return {}
    bootstrap = properties["bootstrap.servers"]
    config = {k: v for k, v in properties.items() if k != "bootstrap.servers"}
    revocations: list[bytes | None] = []

    def plan_records() -> Iterator[tuple[bytes | None, bytes | None]]:
        for _, _, key, value in iter_records(bootstrap, topic, config, timeout_s):
            if is_revocation_key(key):
                revocations.append(value)
            else:
                yield key, value

    highest = highest_sequences(plan_records(), keys, set(group_ids))
    if signing_key_id is not None and signing_key_id in revoked_key_ids(revocations, keys):
        raise RevokedSigningKey(f"the signing key {signing_key_id!r} is revoked on {topic}: sign with a new key")
    return {group_id: next_sequence(highest.get(group_id), now_ms) for group_id in group_ids}


def publish_sequences(
    settings: Settings, bootstrap: str, signer: Signer, group_ids: Collection[str], now_ms: int
) -> dict[str, int]:
    """What publish and withdraw call: the next sequence of each group, counting records signed by the signing key
    or any configured verify key (a rotated-out key's records still hold the floor)."""
    keys = VerifyKeys({**VerifyKeys.parse(settings.plan_verify_keys).keys, **signer.verify_keys().keys})
    properties = settings.kafka_properties(bootstrap)
    return assign_sequences(
        properties, settings.plans_topic, keys, group_ids, now_ms, settings.kafka_timeout_s, signer.key_id
    )
