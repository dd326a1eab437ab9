"""``withdraw``: sign and send a group's withdrawal, then record it in the lake (WITHDRAWN, history rows)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as sf

from jobs.lakehouse.lake import Lake, MergeOutcome
from jobs.lakehouse.writer_lock import LakeBusy, writer_lock
from jobs.pipeline.lifecycle import PlanEvent, moved_by, next_status
from jobs.pipeline.publish import publish_withdrawal
from jobs.pipeline.stage import StageInputError, StageResult, StageUnavailable
from jobs.pipeline.status import PlanStatus
from jobs.pipeline.targets import history_rows, plan_targets
from jobs.settings import Settings

log = logging.getLogger(__name__)
HISTORY_WITH_REASON_DDL = (
    "event_time bigint, group_id string, plan_id string, snapshot_id string, process_id string, task_id string, "
    "role string, source string, reason string"
)
WITHDRAWN_SOURCE = "withdrawn"


def withdrawn_reason(created_at: int, by: str) -> str:
    """The plans.reason of a plan a signed withdrawal took back."""
    return f"withdrawn by {by}: signed withdrawal dated {created_at} on the plans topic"


def record_withdrawal(
    lake: Lake, group_id: str, plan_ids: Sequence[str], withdrawn_at: int, reason: str
) -> tuple[MergeOutcome, ...]:
    """Mark the given plans of ``group_id`` WITHDRAWN where their status allows it, with ``assignment_history``
    rows (source withdrawn) of the targets taken back. Plans already WITHDRAWN (or final) are left alone, so a
    repeat writes nothing."""
    if not plan_ids or not lake.exists("plans"):
        return ()
    plans = lake.read("plans").where(
        (sf.col("group_id") == group_id)
        & sf.col("plan_id").isin(list(plan_ids))
        & sf.col("status").isin(*moved_by(PlanEvent.WITHDRAWN))
    )
    rows = plans.select("plan_id", "snapshot_id", "status").collect()
    if not rows:
        return ()
    targets = plan_targets(lake, [r["plan_id"] for r in rows])
    history = [
        (*row, reason)
        for r in rows
        if r["plan_id"] in targets
        for row in history_rows(
            group_id, r["plan_id"], r["snapshot_id"], targets[r["plan_id"]], WITHDRAWN_SOURCE, withdrawn_at
        )
    ]
    outcomes = []
    if history:
        frame = lake.spark.createDataFrame(history, HISTORY_WITH_REASON_DDL)
        outcomes.append(lake.merge("assignment_history", frame))
    # The plans row last: once it says WITHDRAWN a repeat finds nothing to do.
    updates = with_status(plans, PlanStatus.WITHDRAWN, reason).withColumn(
        "withdrawn_at", sf.lit(withdrawn_at).cast("bigint")
    )
    outcomes.append(lake.merge("plans", updates, update=["status", "reason", "withdrawn_at"]))
    log.info("withdraw: plan(s) %s of %s now WITHDRAWN", sorted(r["plan_id"] for r in rows), group_id)
    return tuple(outcomes)


def with_status(plans: DataFrame, status: PlanStatus, reason: str | None) -> DataFrame:
    """``plans`` rows with a new status and reason (the columns a status change writes)."""
    return plans.withColumn("status", sf.lit(str(status))).withColumn("reason", sf.lit(reason).cast("string"))


def run_withdraw(lake: Lake, settings: Settings, bootstrap: str, group_id: str, plan_id: str, by: str) -> StageResult:
    """Publish a signed withdrawal of ``group_id``'s plan, then record it: the plan WITHDRAWN, history rows.

    A plan the lake does not know is still withdrawn on the topic (taking a plan back must never be blocked by
    the lake); one it knows for another group is bad input, and nothing is sent."""
    known = _plan_row(lake, plan_id)
    if known is not None and known["group_id"] != group_id:
        raise StageInputError(f"plan {plan_id} is for group {known['group_id']!r}, not {group_id!r}: nothing sent")
    record = publish_withdrawal(settings, bootstrap, group_id, plan_id)
    created_at = int(record["created_at"])
    counts: dict[str, int] = {}
    if known is None:
        log.warning("withdraw: plan %s is not in the lake: withdrawal sent, nothing recorded", plan_id)
        counts["unknown_plan"] = 1
        return StageResult("withdraw", None, (), counts)
    status = known["status"]
    if next_status(status, PlanEvent.WITHDRAWN) is None:
        log.warning("withdraw: plan %s is %s: withdrawal sent, status kept", plan_id, status)
        return StageResult("withdraw", known["snapshot_id"], (), {"status_kept": 1})
    try:
        with writer_lock(lake.root, "withdraw", settings.lake_lock_timeout_s):
            outcomes = record_withdrawal(lake, group_id, [plan_id], created_at, withdrawn_reason(created_at, by))
    except LakeBusy as err:
        # The record is on the topic already; observe reads it there and records it when it next runs.
        raise StageUnavailable(f"withdrawal sent, but the lake was busy ({err}): observe will record it") from err
    return StageResult("withdraw", known["snapshot_id"], outcomes, {"withdrawn": 1})


def _plan_row(lake: Lake, plan_id: str) -> dict[str, Any] | None:
    if not lake.exists("plans"):
        return None
    row = lake.read("plans").where(sf.col("plan_id") == plan_id).select("plan_id", "group_id", "snapshot_id", "status")
    found = row.first()
    return None if found is None else found.asDict()
