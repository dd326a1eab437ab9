"""The key-revocation vectors (schemas/vectors/key_revocation_cases.json): which revocation records verify, and
what a group's leader honors when revocations arrive among its plan records. Written by
``python -m tests.support.vectors``."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from typing import Any

from assignor.protocol.key_revocation import KeyRevocation, read_revocation
from assignor.protocol.plan_keys import Signer, VerifyKeys
from assignor.protocol.plan_ledger import PlanLedger
from assignor.protocol.plans import ApprovedPlan, PlanRejected, Verifier, Withdrawal
from assignor.protocol.strict_json import canonical_json
from tests.support.signing import FORGER, SIGNER


def _value(record: dict[str, Any]) -> bytes:
    return json.dumps(record).encode()


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode()


def _resigned(record: dict[str, Any], signer: Signer, **changes: Any) -> dict[str, Any]:
    """``record`` with ``changes``, signed again: a field the rules refuse, under a signature that verifies."""
    fields = {k: v for k, v in record.items() if k != "signature"} | changes
    return {**fields, "signature": signer.sign(canonical_json(fields))}


def _newline_after(record: dict[str, Any], name: str) -> dict[str, Any]:
    # A regex's "$" also matches before a final newline: both languages must refuse it, not only Java.
    return {**record, name: record[name] + "\n"}


def _revocations(rotated: Signer, now: int) -> list[tuple[str, bytes]]:
    revoke_old = KeyRevocation(SIGNER.key_id, now - 1000, "security@example.com", "laptop stolen")
    good = revoke_old.to_record(rotated)
    edited = dict(good, reason="nothing happened")
    unknown = KeyRevocation(SIGNER.key_id, now, "x", "").to_record(replace_key_id(FORGER, "retired-2024"))
    extra = dict(good, extra=1)
    bad_id = dict(good, revoked_key_id="bad id!")
    return [
        ("revocation signed by another trusted key", _value(good)),
        ("a key revokes itself", _value(revoke_old.to_record(SIGNER))),
        ("revocation edited after signing: bad signature", _value(edited)),
        ("revocation forged with the revoked key's id: bad signature", _value(revoke_old.to_record(FORGER))),
        ("revocation signed by a key nobody trusts", _value(unknown)),
        ("revocation with an unexpected field", _value(extra)),
        ("revocation of an invalid key id", _value(bad_id)),
        ("revocation of an unsupported version", _value(dict(good, schema_version=2))),
        ("revocation whose signature ends in a newline", _value(_newline_after(good, "signature"))),
        (
            "revocation of a key id ending in a newline",
            _value(_resigned(good, rotated, revoked_key_id=SIGNER.key_id + "\n")),
        ),
        ("a plan record is not a revocation", _value(_sample_plan(now).to_record(SIGNER, 10))),
        ("garbage", b"\x00garbage"),
    ]


def replace_key_id(signer: Any, key_id: str) -> Any:
    return replace(signer, key_id=key_id)


def _sample_plan(now: int) -> ApprovedPlan:
    from tests.support.vectors import _plan  # noqa: PLC0415 (the vectors module imports this one)

    return _plan()


def _ledger_cases(plan: ApprovedPlan, rotated: Signer, now: int) -> list[tuple[str, list[tuple[str, bytes]]]]:
    revoke_old = _value(KeyRevocation(SIGNER.key_id, now - 1000, "security@example.com", "").to_record(rotated))
    revoke_new = _value(KeyRevocation(rotated.key_id, now - 500, "mallory", "").to_record(SIGNER))
    forged_revocation = _value(KeyRevocation(rotated.key_id, now, "mallory", "").to_record(FORGER))
    old = _value(plan.to_record(SIGNER, 10))
    new = _value(replace(plan, plan_id="plan-new").to_record(rotated, 20))
    old_later = _value(replace(plan, plan_id="plan-old-later").to_record(SIGNER, 30))
    withdrawal_old = _value(Withdrawal(plan.plan_id, plan.group_id, plan.created_at + 2, 25).to_record(SIGNER))
    new_newline = _value(_newline_after(replace(plan, plan_id="plan-new").to_record(rotated, 20), "signature"))
    r, v = "record", "revocation"
    return [
        ("rotation: the new key's plan is honored", [(r, old), (r, new)]),
        ("rotation: the old key still honored until revoked", [(r, new), (r, old_later)]),
        ("after the revocation a plan of the revoked key is refused", [(v, revoke_old), (r, old)]),
        ("a revocation drops the plan the revoked key signed; the floor stays", [(r, old), (v, revoke_old)]),
        ("a revocation leaves a plan of another key honored", [(r, new), (v, revoke_old)]),
        ("a newer plan of a trusted key after the revocation is honored", [(r, old), (v, revoke_old), (r, new)]),
        ("a withdrawal signed by a revoked key withdraws nothing", [(r, new), (v, revoke_old), (r, withdrawal_old)]),
        ("a forged revocation revokes nothing", [(r, new), (v, forged_revocation)]),
        ("either key may revoke the other: both revoked, nothing honored", [(r, new), (v, revoke_new),
                                                                           (v, revoke_old)]),
        ("a revocation repeated changes nothing more", [(r, new), (v, revoke_old), (v, revoke_old)]),
        ("a plan whose signature ends in a newline is refused", [(r, old), (v, revoke_old), (r, new_newline)]),
    ]  # fmt: skip


def revocation_vectors(plan: ApprovedPlan, rotated: Signer, keys: VerifyKeys, now: int, skew: int) -> dict[str, Any]:
    """Revocation records and what they revoke; ledger cases folding records and revocations in order."""
    records = []
    for name, value in _revocations(rotated, now):
        try:
            revoked: str | None = read_revocation(value, keys).revoked_key_id
            code = None
        except PlanRejected as why:
            revoked, code = None, str(why.code)
        records.append({"name": name, "record_b64": _b64(value), "revoked_key_id": revoked, "reason_code": code})
    cases = []
    for name, events in _ledger_cases(plan, rotated, now):
        verifier, ledger, revoked_ids = Verifier(keys, skew), PlanLedger(plan.group_id), frozenset[str]()
        for kind, value in events:
            if kind == "record":
                ledger = ledger.offer(value, verifier, now)
                continue
            try:
                revoked_ids |= {read_revocation(value, keys).revoked_key_id}
            except PlanRejected:
                continue  # an unverifiable revocation revokes nothing
            verifier, ledger = verifier.revoking(revoked_ids), ledger.revoke(revoked_ids)
        choice = ledger.recheck(verifier, now).choice(now)
        cases.append(
            {
                "name": name,
                "group_id": plan.group_id,
                "events": [{kind: _b64(value)} for kind, value in events],
                "expected": {
                    "plan_id": None if choice.plan is None else choice.plan.plan_id,
                    "reason_code": None if choice.reason is None else str(choice.reason.code),
                    "highest_sequence": choice.sequence,
                    "revoked": sorted(revoked_ids),
                },
            }
        )
    rendered = dict(e.split("=") for e in keys.render().split(","))
    return {"keys": rendered, "now_ms": now, "clock_skew_ms": skew, "revocations": records, "ledger_cases": cases}
