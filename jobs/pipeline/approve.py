"""Stage 5, approve: a person approves or rejects VALIDATED plans; who decided and when is recorded on the plan,
and the approval record (who, when, each plan's digest) is what publish may sign (docs/plan-lifecycle.md)."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as sf

from assignor import GroupAssignment
from jobs.lakehouse.lake import Lake
from jobs.pipeline import approval_files
from jobs.pipeline.approval_record import ApprovalRecord, ApprovedDigest, Source, short
from jobs.pipeline.plan_bodies import plan_body
from jobs.pipeline.report_only import STREAMS_PROTOCOL_REASON, report_only_reasons
from jobs.pipeline.stage import StageInputError, StageResult, resolve_snapshot
from jobs.pipeline.status import APPROVED_LATER, PlanStatus
from jobs.pipeline.targets import HISTORY_DDL, TARGET_CHANGED, changed_since_validation, history_rows, plan_targets
from jobs.settings import Settings

log = logging.getLogger(__name__)
DECIDED = {PlanStatus.APPROVED: APPROVED_LATER, PlanStatus.REJECTED: (PlanStatus.REJECTED,)}


def held_plans(lake: Lake, approved: DataFrame) -> dict[str, str]:
    """Plan id -> why it is held, for the plans among ``approved`` whose groups are report-only: approving them
    makes them HELD, not APPROVED."""
    rows = approved.select("plan_id", "group_id", "snapshot_id").collect()
    reasons = report_only_reasons(lake, sorted({r["snapshot_id"] for r in rows}))
    # A streams-protocol group can honor a plan once publish selects our broker-side assignor for it: publish
    # decides (it asks the brokers), so approving it here is an approval, not a hold.
    reasons = {g: why for g, why in reasons.items() if why != STREAMS_PROTOCOL_REASON}
    return {
        r["plan_id"]: reasons[r["group_id"]]
        for r in sorted(rows, key=lambda r: r["plan_id"])
        if r["group_id"] in reasons
    }


def held_reason(why: str, note: str | None) -> str:
    """plans.reason of an approved report-only plan: why it is held, then the approver's note, if any."""
    return f"approved, held: {why}" + (f"; note: {note}" if note else "")


@dataclass(frozen=True)
class ApproveResult(StageResult):
    """An approve run, with the approval record of the plans it approved (None when it approved none)."""

    approval: ApprovalRecord | None = None


def _check_approver(settings: Settings, by: str) -> None:
    """The command line's approver must be among RBP_APPROVERS when it is set (required in production mode)."""
    try:
        allowed = settings.required_approvers()
    except ValueError as err:
        raise StageInputError(str(err)) from None
    names = {part.strip() for entry in allowed for part in entry.split(":", 1)}
    if allowed and by not in names:
        raise StageInputError(f"{by} is not among the approvers (RBP_APPROVERS)")


def run_approve(
    lake: Lake,
    settings: Settings,
    *,
    by: str,
    plan_ids: Sequence[str] = (),
    snapshot_id: str | None = None,
    reject: bool = False,
    reason: str | None = None,
    offered: Mapping[str, ApprovedDigest] | None = None,
    at: int | None = None,
) -> ApproveResult:
    """Approve (or reject) the given plans, or every VALIDATED plan of the snapshot. Only VALIDATED plans can be
    approved; a plan that already carries this decision is left as it is, so a re-run writes nothing.

    ``offered``: the digests the approval page showed (Airflow's path), which the approval record then binds;
    without it the plans are bound as the lake holds them now and the record is written to RBP_APPROVALS_DIR.
    ``at``: when the decision was made (ms; Airflow's record of the answer), else now."""
    if not by.strip():
        raise StageInputError("approve needs the name of who decides (--by)")
    if offered is None and not reject:
        _check_approver(settings, by)
    decision = PlanStatus.REJECTED if reject else PlanStatus.APPROVED
    plans = lake.read("plans")
    if plan_ids:
        chosen = plans.where(sf.col("plan_id").isin(list(plan_ids)))
        found = {r["plan_id"]: r["status"] for r in chosen.select("plan_id", "status").collect()}
        unknown = sorted(set(plan_ids) - set(found))
        if unknown:
            raise StageInputError(f"unknown plan_id(s): {', '.join(unknown)}")
        snapshot = None
    else:
        snapshot = resolve_snapshot(lake, snapshot_id)
        chosen = plans.where((sf.col("snapshot_id") == snapshot) & (sf.col("status") == PlanStatus.VALIDATED))
        found = {r["plan_id"]: r["status"] for r in chosen.select("plan_id", "status").collect()}
    allowed = (PlanStatus.VALIDATED, PlanStatus.PENDING) if reject else (PlanStatus.VALIDATED,)
    wrong = {p: s for p, s in found.items() if s not in allowed and s not in DECIDED[decision]}
    if wrong:
        detail = ", ".join(f"{p} is {s}" for p, s in sorted(wrong.items()))
        raise StageInputError(f"only {' or '.join(allowed)} plans can be {decision.lower()}: {detail}")
    todo = sorted(p for p, s in found.items() if s in allowed)
    now = int(time.time() * 1000) if at is None else at
    # Airflow asks again after a failure to record an answer: plans its first attempt approved are in this answer's
    # record too, or publish would find them in none.
    again = [] if reject or offered is None else sorted(p for p, s in found.items() if s == PlanStatus.APPROVED)
    if not todo:
        log.info("approve: nothing to %s", "reject" if reject else "approve")
        approval = _approval_record(settings, by, now, again, {}, offered) if again else None
        return ApproveResult("approve", snapshot, approval=approval)
    note = f"rejected by {by}: {reason}" if reject else reason
    outcomes = []
    targets = {} if reject else plan_targets(lake, todo)
    changed = [] if reject else changed_since_validation(chosen.where(sf.col("plan_id").isin(todo)), targets)
    if changed:
        # Somebody changed what was validated: nobody may approve it; it must be planned and validated again.
        log.error("approve: target changed since validation, rejected: %s", ", ".join(changed))
        tampered = (
            chosen.where(sf.col("plan_id").isin(changed))
            .withColumn("status", sf.lit(PlanStatus.REJECTED))
            .withColumn("reason", sf.lit(TARGET_CHANGED).cast("string"))
        )
        outcomes.append(lake.merge("plans", tampered, update=["status", "reason"]))
        todo = [p for p in todo if p not in changed]
        targets = {p: t for p, t in targets.items() if p not in changed}
    held = {} if reject else held_plans(lake, chosen.where(sf.col("plan_id").isin(todo)))
    # Report-only groups cannot honor a plan: approving theirs records the decision and holds the plan.
    why_held = lake.spark.createDataFrame(
        [(p, held_reason(why, note)) for p, why in held.items()], "plan_id string, held_reason string"
    )
    is_held = sf.col("held_reason").isNotNull()
    updates = (
        chosen.where(sf.col("plan_id").isin(todo))
        .join(why_held, "plan_id", "left")
        .withColumn("status", sf.when(is_held, sf.lit(str(PlanStatus.HELD))).otherwise(sf.lit(str(decision))))
        .withColumn("approved_by", sf.lit(by))
        .withColumn("approved_at", sf.lit(now).cast("bigint"))
        .withColumn("reason", sf.when(is_held, sf.col("held_reason")).otherwise(sf.lit(note).cast("string")))
        .drop("held_reason")
    )
    if todo and not reject:  # what a person approved is the 'planned' assignment, whether or not it gets published
        meta = {r["plan_id"]: r for r in updates.select("plan_id", "group_id", "snapshot_id").collect()}
        rows = [
            row
            for plan_id, target in targets.items()
            for row in history_rows(
                meta[plan_id]["group_id"], plan_id, meta[plan_id]["snapshot_id"], target, "planned", now
            )
        ]
        outcomes.append(lake.merge("assignment_history", lake.spark.createDataFrame(rows, HISTORY_DDL)))
    approval = None
    if not reject and (again or len(held) < len(todo)):
        bound = chosen.where(sf.col("plan_id").isin([p for p in todo if p not in held])).collect()
        approval = _approval_record(settings, by, now, [*bound, *again], targets, offered)
    # The plans row last: once it says APPROVED, a re-run has nothing left to do.
    outcomes.append(lake.merge("plans", updates, update=["status", "approved_by", "approved_at", "reason"]))
    log.info("approve: %d plan(s) %s by %s (%d of them HELD: report-only)", len(todo), decision, by, len(held))
    counts = {decision.lower(): len(todo), **({"target_changed": len(changed)} if changed else {})}
    counts |= {"held": len(held)} if held else {}
    return ApproveResult("approve", snapshot, tuple(outcomes), counts, approval)


def _approval_record(
    settings: Settings,
    by: str,
    now: int,
    approved: Sequence[Row | str],
    targets: Mapping[str, GroupAssignment],
    offered: Mapping[str, ApprovedDigest] | None,
) -> ApprovalRecord:
    """What was approved (plans rows, or plan ids where ``offered``): the digests shown (Airflow), else the plans as
    they are now, valid RBP_PLAN_VALID_MS from now, written to a private file for publish (the command line)."""
    source: Source = "cli" if offered is None else "airflow"
    if offered is not None:
        ids = [a if isinstance(a, str) else a["plan_id"] for a in approved]
        entries = [offered[p] for p in ids if p in offered]
    else:
        valid_until = now + settings.plan_valid_ms
        rows = [a for a in approved if not isinstance(a, str)]
        entries = [ApprovedDigest.of(plan_body(r, targets[r["plan_id"]], valid_until)) for r in rows]
    record = ApprovalRecord(by, now, source, tuple(sorted(entries, key=lambda e: e.plan_id)))
    log.info("approve: %d plan(s) bound to their digests, fingerprint %s", len(entries), short(record.fingerprint))
    if offered is None:
        path = approval_files.save(settings.approval_records, record)
        log.info("approve: approval record written to %s", path)
    return record
