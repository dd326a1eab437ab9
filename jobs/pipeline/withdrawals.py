"""A withdrawal recorded in the lake: the plans WITHDRAWN and history rows of the targets taken back. Shared by the
``withdraw`` stage (which signs and sends it) and ``observe`` (which records one it finds on the plans topic)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as sf

from jobs.lakehouse.lake import Lake, MergeOutcome
from jobs.pipeline.lifecycle import PlanEvent, moved_by
from jobs.pipeline.status import PlanStatus
from jobs.pipeline.targets import history_rows, plan_targets

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
