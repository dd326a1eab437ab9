"""A plan's target (its last step) read back from plan_assignments, as the assignor's GroupAssignment."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as sf

from assignor import ClientAssignment, GroupAssignment, TaskId
from jobs.lake import Lake


def target_rows(assignments: DataFrame) -> DataFrame:
    """The ACTIVE and STANDBY rows of each plan's last step (the target; warmups are gone by then)."""
    last = assignments.groupBy("plan_id").agg(sf.max("step").alias("step"))
    return assignments.join(last, ["plan_id", "step"]).where(sf.col("role").isin("ACTIVE", "STANDBY"))


def plan_targets(lake: Lake, plan_ids: Sequence[str]) -> dict[str, GroupAssignment]:
    """plan_id -> target, for the given plans."""
    if not plan_ids:
        return {}
    assignments = lake.read("plan_assignments").where(sf.col("plan_id").isin(list(plan_ids)))
    held: dict[str, dict[str, dict[str, set[TaskId]]]] = {}
    for r in target_rows(assignments).select("plan_id", "process_id", "task_id", "role").collect():
        roles = held.setdefault(r["plan_id"], {}).setdefault(r["process_id"], {"ACTIVE": set(), "STANDBY": set()})
        roles[r["role"]].add(TaskId.parse(r["task_id"]))
    return {
        plan_id: GroupAssignment(
            {
                pid: ClientAssignment(active=frozenset(r["ACTIVE"]), standby=frozenset(r["STANDBY"]))
                for pid, r in by.items()
            }
        )
        for plan_id, by in held.items()
    }
