"""What publish may sign: only plans an approval record lists, only with the body approved, only records that verify.

Kept apart from publish.py: the lake says which plans are APPROVED, but only the approval record, which the lake's
engine cannot rewrite, says what a named person approved."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from pyspark.sql import Row

from assignor import GroupAssignment
from assignor.protocol.plan_keys import Signer, VerifyKeys
from assignor.protocol.plans import ApprovedPlan, PlanRejected, read_record
from jobs.pipeline.approval_record import ApprovalRecord, approved_entries, short
from jobs.pipeline.plan_bodies import plan_body
from jobs.pipeline.stage import StageInputError
from jobs.settings import Settings

log = logging.getLogger(__name__)
REFUSED = "refused at publish"


def bind(
    rows: Sequence[Row], targets: Mapping[str, GroupAssignment], approvals: Sequence[ApprovalRecord]
) -> tuple[list[ApprovedPlan], dict[str, str]]:
    """(the plans to sign, attributed to their approver; plan_id -> why the others are refused). A plan is signed
    only if an approval record lists it and its body rebuilt from the lake has the plan_digest approved."""
    entries = approved_entries(approvals)
    plans: list[ApprovedPlan] = []
    refused: dict[str, str] = {}
    for row in rows:
        plan_id = row["plan_id"]
        found = entries.get(plan_id)
        if found is None:
            refused[plan_id] = f"{REFUSED}: plan {plan_id} is APPROVED in the lake but no approval record lists it"
            continue
        record, entry = found
        body = plan_body(row, targets[plan_id], entry.valid_until)
        differences = entry.differences(body)
        if differences:
            refused[plan_id] = (
                f"{REFUSED}: plan {plan_id} is not what {record.approved_by} approved (digest "
                f"{short(body.plan_digest)}, approved {short(entry.plan_digest)}): {'; '.join(differences)}"
            )
            continue
        plans.append(replace(body, approved_by=record.approved_by, approved_at=record.approved_at))
    for why in sorted(refused.values()):
        log.error("publish: %s", why)
    return plans, refused


def publish_keys(settings: Settings, signer: Signer) -> VerifyKeys:
    """The keys publish checks its own records with: the groups' (RBP_PLAN_VERIFY_KEYS); without them, outside
    production mode, the signing key's own public key (a record that would not verify anywhere is still caught)."""
    try:
        keys = settings.plan_verifier().keys
    except ValueError as err:
        raise StageInputError(f"RBP_PLAN_VERIFY_KEYS: {err}") from None
    if keys.keys:
        return keys
    if settings.production:
        raise StageInputError("RBP_PLAN_VERIFY_KEYS is not set: publish cannot verify what it signs")
    log.warning("publish: RBP_PLAN_VERIFY_KEYS is not set: records are checked with the signing key alone")
    return signer.verify_keys()


def verification_error(record: Mapping[str, Any], plan: ApprovedPlan, keys: VerifyKeys) -> str | None:
    """None when the signed record, read as a leader reads it, verifies and is the approved plan; else why not."""
    try:
        read = read_record(json.dumps(record).encode("utf-8"), keys)  # the bytes publish sends
    except PlanRejected as err:
        return f"{REFUSED}: plan {plan.plan_id}'s signed record does not verify with the verify keys: {err}"
    if not isinstance(read, ApprovedPlan) or read.plan_digest != plan.plan_digest or read.group_id != plan.group_id:
        return f"{REFUSED}: plan {plan.plan_id}'s signed record does not read back as the plan approved"
    return None
