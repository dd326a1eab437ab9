"""What a group's leader knows of the group's plan records, folded in topic order: the order rule by sequence.

The rule (schemas/vectors/README.md, "Plan ledger"; the Java core's PlanLedger is the same): each record is checked
against the highest verified sequence known so far; a verified plan or withdrawal becomes the group's verified
record and raises that floor; a record that does not verify changes nothing verified and is only remembered as the
newest refused one, with its reason. So a garbage, forged or replayed newest record never undoes a verified plan.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from assignor.protocol.plans import (
    ApprovedPlan,
    PlanRejected,
    Reason,
    SignedRecord,
    Verifier,
    record_sequence,
    usable,
)
from assignor.protocol.strict_json import strict_loads


@dataclass(frozen=True)
class PlanChoice:
    """What a leader does with its group's plans now: honor ``plan`` (or none), and the reason to report."""

    plan: ApprovedPlan | None
    reason: PlanRejected | None  # with a plan: why the newest record was not it; without: why none is honored
    sequence: int | None  # the highest verified sequence: what the leader has acted on and remembers


@dataclass(frozen=True)
class PlanLedger:
    """One group's plan records folded in order: the verified record with the highest sequence, and the newest
    record after it when that one did not verify."""

    group_id: str
    highest_sequence: int | None = None  # of every verified record, and of any floor remembered (state dir)
    verified: SignedRecord | None = None
    refused: bytes | None = None  # the newest record, when it did not verify (re-checked: it may be dated ahead)
    rejection: PlanRejected | None = None
    verified_key: str | None = None  # the key id that signed ``verified``: a revocation of it drops the record

    def remember(self, sequence: int | None) -> PlanLedger:
        """Raise the floor to a sequence this leader (or an earlier one) already acted on."""
        if sequence is None or (self.highest_sequence is not None and sequence <= self.highest_sequence):
            return self
        return replace(self, highest_sequence=sequence)

    def offer(self, value: bytes | None, verifier: Verifier, now_ms: int) -> PlanLedger:
        """Fold the next record of the group (topic order). A tombstone is unsigned: it withdraws nothing."""
        if value is None:
            return self
        try:
            record = verifier.check(value, self.group_id, now_ms, self.highest_sequence)
        except PlanRejected as rejected:
            return replace(self, refused=value, rejection=rejected)
        return PlanLedger(self.group_id, record_sequence(record), record, verified_key=_key_id(value))

    def revoke(self, key_ids: frozenset[str]) -> PlanLedger:
        """Drop the verified record if a revoked key signed it: nothing is honored until a newer record verifies
        (the floor stays, so the plans it replaced do not come back). Offer later records with a verifier that
        refuses ``key_ids`` (Verifier.revoking)."""
        if self.verified is None or self.verified_key not in key_ids:
            return self
        why = PlanRejected(Reason.REVOKED_KEY, f"key_id {self.verified_key!r} was revoked by a signed key revocation")
        return PlanLedger(self.group_id, self.highest_sequence, None, None, why)

    def offer_all(self, values: Iterable[bytes | None], verifier: Verifier, now_ms: int) -> PlanLedger:
        ledger = self
        for value in values:
            ledger = ledger.offer(value, verifier, now_ms)
        return ledger

    def recheck(self, verifier: Verifier, now_ms: int) -> PlanLedger:
        """Check the refused newest record again if it was only dated in the future (time may have caught up)."""
        if self.refused is None or self.rejection is None or self.rejection.code is not Reason.FUTURE:
            return self
        return self.offer(self.refused, verifier, now_ms)

    def choice(self, now_ms: int) -> PlanChoice:
        """The verified plan while it is valid, whatever the refused newest record was; else none, with the
        reason (the refused record's first: it is what the group's operators last published)."""
        if self.verified is None:
            return PlanChoice(None, self.rejection, self.highest_sequence)
        try:
            plan = usable(self.verified, now_ms)
        except PlanRejected as why:
            return PlanChoice(None, self.rejection or why, self.highest_sequence)
        return PlanChoice(plan, self.rejection, self.highest_sequence)


def _key_id(value: bytes) -> str:
    """The key id of a record that just verified (so it parses and names one)."""
    key_id = strict_loads(value)["key_id"]
    assert isinstance(key_id, str)
    return key_id
