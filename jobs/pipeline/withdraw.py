"""``withdraw``: sign and send a group's withdrawal, then record it in the lake (WITHDRAWN, history rows)."""

from __future__ import annotations

import logging
from typing import Any

from pyspark.sql import functions as sf

from jobs.lakehouse.lake import Lake
from jobs.lakehouse.writer_lock import LakeBusy, writer_lock
from jobs.pipeline.lifecycle import PlanEvent, next_status
from jobs.pipeline.publish import publish_withdrawal
from jobs.pipeline.stage import StageInputError, StageResult, StageUnavailable
from jobs.pipeline.withdrawals import record_withdrawal, withdrawn_reason
from jobs.settings import Settings

log = logging.getLogger(__name__)


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
