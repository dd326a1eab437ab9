"""A plan's body rebuilt from the lake (its plans row and target): what a person approves and publish signs."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import Row
from pyspark.sql import functions as sf

from assignor import GroupAssignment, TaskId
from assignor.protocol.plans import ApprovedPlan
from jobs.lakehouse.lake import Lake
from jobs.pipeline.targets import plan_targets
from jobs.settings import Kip441Settings

UNSIGNED = ""  # approved_by of a body not yet approved: publish fills it from the approval record


def plan_body(row: Row, target: GroupAssignment, valid_until: int) -> ApprovedPlan:
    """The plan of one plans row and its target, valid until ``valid_until``, not yet attributed to an approver."""
    configs = Kip441Settings.from_columns(row.asDict()).configs()  # the settings the plan was made with
    return ApprovedPlan(
        plan_id=row["plan_id"],
        group_id=row["group_id"],
        snapshot_id=row["snapshot_id"],
        created_at=int(row["created_at"]),
        valid_until=valid_until,
        approved_by=UNSIGNED,
        approved_at=0,
        configs=configs,
        target=target,
        move_order=tuple(TaskId.parse(t) for t in (row["move_order"] or [])),
    )


def plan_bodies(lake: Lake, plan_ids: Sequence[str], valid_until: int) -> dict[str, ApprovedPlan]:
    """plan_id -> body, as the lake holds the given plans now; a plan without a target is left out."""
    if not plan_ids:
        return {}
    rows = lake.read("plans").where(sf.col("plan_id").isin(list(plan_ids))).collect()
    targets = plan_targets(lake, [r["plan_id"] for r in rows])
    return {r["plan_id"]: plan_body(r, targets[r["plan_id"]], valid_until) for r in rows if r["plan_id"] in targets}
