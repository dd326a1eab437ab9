"""What publish signs by under Airflow: the person's answer as Airflow's HITL record keeps it (only the api-server
writes who answered), bound by the offer's digest to the plans and digests the review offered. Nothing a task hands
over through XCom, which any task of the deployment can write, decides what is signed. Pure: no Airflow, no I/O."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from assignor.protocol.strict_json import canonical_json
from jobs.orchestration.decision import OFFER_PARAM, DecisionError, decision
from jobs.pipeline.approval_record import ApprovalRecord, ApprovedDigest, short


def offer_digest(snapshot_id: str, offered: Sequence[ApprovedDigest]) -> str:
    """SHA-256 of the snapshot id and every offered entry (group, plan id, plan digest, validity, configs)."""
    entries = sorted((e.to_json() for e in offered), key=lambda e: str(e["plan_id"]))
    return hashlib.sha256(canonical_json({"snapshot_id": snapshot_id, "offered": entries})).hexdigest()


def offered_entries(reviewed: Mapping[str, Any]) -> tuple[str, tuple[ApprovedDigest, ...]]:
    """The review's snapshot id and offered entries; DecisionError naming what is malformed."""
    snapshot_id = reviewed.get("snapshot_id")
    offered = reviewed.get("offered")
    if not isinstance(snapshot_id, str) or not isinstance(offered, Mapping):
        raise DecisionError("the review's record has no snapshot_id or no offered plans")
    entries = []
    for plan_id, entry in offered.items():
        try:
            found = ApprovedDigest(**entry)
        except TypeError as err:
            raise DecisionError(f"the review's offered entry for {plan_id!r} is malformed: {err}") from None
        if found.plan_id != plan_id:
            raise DecisionError(f"the review's offered entry for {plan_id!r} names plan {found.plan_id!r}")
        entries.append(found)
    return snapshot_id, tuple(entries)


def answered_offer(hitl: Mapping[str, Any]) -> str | None:
    """The offer digest the person's answer carries back (None: the answer carries none)."""
    value = (hitl.get("params_input") or {}).get(OFFER_PARAM)
    return value if isinstance(value, str) else None


def asked_offer(hitl: Mapping[str, Any]) -> str | None:
    """The offer digest the approval step asked with (its form's field), as Airflow's HITL record keeps it."""
    field = (hitl.get("params") or {}).get(OFFER_PARAM)
    value = field.get("value") if isinstance(field, Mapping) else field
    return value if isinstance(value, str) else None


def answered_at_ms(hitl: Mapping[str, Any]) -> int:
    """When the person answered (ms), from Airflow's record (an ISO text over REST, a datetime in the task's event)."""
    value = hitl.get("responded_at")
    try:
        at = value if isinstance(value, datetime) else datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError as err:
        raise DecisionError(f"Airflow's answer has no readable responded_at: {value!r}") from err
    if at.tzinfo is None:
        raise DecisionError(f"Airflow's answer time {value!r} has no time zone")
    return int(at.timestamp() * 1000)


def confirmed_approval(
    hitl: Mapping[str, Any],
    reviewed: Mapping[str, Any],
    timeout_s: float,
    approvers: Sequence[str] = (),
    triggered_by: str | None = None,
) -> ApprovalRecord | None:
    """The approval record Airflow's answer makes of the review's offer; None when it approves nothing (rejected,
    timed out, refused approver); DecisionError when there is no answer or it answers another offer."""
    if not hitl.get("response_received"):
        raise DecisionError("Airflow holds no answer to this run's approval")
    snapshot_id, offered = offered_entries(reviewed)
    made = offer_digest(snapshot_id, offered)
    if not hitl.get("responded_by_user"):  # the timeout's default: nothing is approved, whatever the offer
        return None
    answered = answered_offer(hitl)
    if answered != made:
        shown = short(answered) if answered else "none"
        raise DecisionError(
            f"the answer approves offer {shown}, but the review's record now offers {short(made)}: it changed after "
            "the approval step asked; nothing is signed"
        )
    candidates = {e.group_id: e.plan_id for e in offered}
    d = decision(hitl, candidates, timeout_s, approvers, triggered_by)
    if not d.approve:
        return None
    by_id = {e.plan_id: e for e in offered}
    return ApprovalRecord(d.by, answered_at_ms(hitl), "airflow", tuple(by_id[p] for p in d.approve))
