"""The plan-ledger vectors (schemas/vectors/plan_ledger_cases.json): a group's records in topic order, and which
plan its leader honors, with what reason and floor. Written by ``python -m tests.support.vectors``."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from typing import Any

from assignor.protocol.plan_keys import VerifyKeys
from assignor.protocol.plan_ledger import PlanLedger
from assignor.protocol.plans import ApprovedPlan, PlanRejected, Verifier, Withdrawal
from tests.support.signing import FORGER, SIGNER

Entry = tuple[bytes | None, int | None]  # (record value, pad_with_spaces_to)


def _value(record: dict[str, Any]) -> bytes:
    return json.dumps(record).encode()


def _cases(plan: ApprovedPlan, now: int, skew: int) -> list[tuple[str, list[Entry], int | None]]:
    """(name, the group's records in topic order, the floor remembered on disk)."""
    a = _value(plan.to_record(SIGNER, 10))
    b = _value(replace(plan, plan_id="plan-b", created_at=plan.created_at + 1).to_record(SIGNER, 30))
    withdrawal = _value(Withdrawal(plan.plan_id, plan.group_id, plan.created_at + 2, 20).to_record(SIGNER))
    forged = _value(replace(plan, plan_id="plan-forged").to_record(FORGER, 40))
    expired = _value(replace(plan, plan_id="plan-expired", valid_until=now - 1).to_record(SIGNER, 50))
    future = _value(replace(plan, plan_id="plan-ahead", created_at=now + skew + 1).to_record(SIGNER, 60))
    other = _value(replace(plan, plan_id="plan-other", group_id="payments-app").to_record(SIGNER, 70))
    unknown_key = json.loads(_value(plan.to_record(SIGNER, 80)))
    unknown_key["key_id"] = "retired-2024"
    garbage, huge = b"\x00garbage", _value(replace(plan, plan_id="plan-huge").to_record(SIGNER, 90))
    return [
        ("no records: no plan, no reason", [], None),
        ("one verified plan", [(a, None)], None),
        ("a newer plan replaces the older", [(a, None), (b, None)], None),
        ("an older plan after a newer one is a replay: the newer stays", [(b, None), (a, None)], None),
        ("a withdrawal then the withdrawn plan replayed: nothing honored", [(a, None), (withdrawal, None), (a, None)],
         None),
        ("a withdrawal, then a newer plan", [(withdrawal, None), (b, None)], None),
        ("after a restart: the floor on disk outlives a compacted withdrawal", [(a, None)], 20),
        ("the floor on disk equal to the plan's sequence: honored", [(a, None)], 10),
        ("garbage newest: the verified plan stays", [(a, None), (garbage, None)], None),
        ("forged newest: the verified plan stays", [(a, None), (forged, None)], None),
        ("newest signed with an unknown key: the verified plan stays", [(a, None), (_value(unknown_key), None)], None),
        ("newest larger than 1 MiB: the verified plan stays", [(a, None), (huge, (1 << 20) + 1)], None),
        ("newest for another group: the verified plan stays", [(a, None), (other, None)], None),
        ("newest dated in the future: the verified plan stays", [(a, None), (future, None)], None),
        ("a tombstone withdraws nothing", [(a, None), (None, None)], None),
        ("garbage after a withdrawal: still withdrawn", [(withdrawal, None), (garbage, None)], None),
        ("only garbage: no plan, its reason", [(garbage, None)], None),
        ("a newer expired plan: nothing honored, the floor rises", [(a, None), (expired, None)], None),
        ("garbage before a verified plan is forgotten", [(garbage, None), (a, None)], None),
    ]  # fmt: skip


def ledger_vectors(plan: ApprovedPlan, keys: VerifyKeys, now: int, skew: int) -> dict[str, Any]:
    """Each case's records folded by PlanLedger, and the choice at ``now``."""
    verifier = Verifier(keys, skew)
    cases = []
    for name, entries, floor in _cases(plan, now, skew):
        ledger = PlanLedger(plan.group_id).remember(floor)
        records = []
        for value, pad in entries:
            padded = None if value is None else value.ljust(pad or 0, b" ")
            ledger = ledger.offer(padded, verifier, now)
            entry: dict[str, Any] = {"record_b64": None if value is None else base64.b64encode(value).decode()}
            if pad is not None:
                entry["pad_with_spaces_to"] = pad
            records.append(entry)
        choice = ledger.recheck(verifier, now).choice(now)
        reason: PlanRejected | None = choice.reason
        cases.append(
            {
                "name": name,
                "group_id": plan.group_id,
                "remembered_sequence": floor,
                "records": records,
                "expected": {
                    "plan_id": choice.plan.plan_id if choice.plan is not None else None,
                    "reason_code": None if reason is None else str(reason.code),
                    "highest_sequence": choice.sequence,
                },
            }
        )
    rendered = dict(e.split("=") for e in keys.render().split(","))
    return {"keys": rendered, "now_ms": now, "clock_skew_ms": skew, "cases": cases}
