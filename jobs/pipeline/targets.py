"""A plan's target (its last step) read back from plan_assignments, as the assignor's GroupAssignment."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import accumulate
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as sf

from assignor import ClientAssignment, GroupAssignment, TaskId
from assignor.protocol.plans import target_digest
from jobs.lakehouse.lake import Lake

HISTORY_DDL = (
    "event_time bigint, group_id string, plan_id string, snapshot_id string, process_id string, task_id string, "
    "role string, source string"
)


def target_rows(assignments: DataFrame) -> DataFrame:
    """The ACTIVE and STANDBY rows of each plan's last step (the target; warmups are gone by then)."""
    last = assignments.groupBy("plan_id").agg(sf.max("step").alias("step"))
    return assignments.join(last, ["plan_id", "step"]).where(sf.col("role").isin("ACTIVE", "STANDBY"))


def plan_targets(lake: Lake, plan_ids: Sequence[str]) -> dict[str, GroupAssignment]:
    """plan_id -> target, for the given plans."""
    if not plan_ids:
        return {}
    ids = list(plan_ids)
    return targets_of(
        lake.read("plan_assignments").where(sf.col("plan_id").isin(ids)),
        lake.read("plans").where(sf.col("plan_id").isin(ids)),
    )


def _target_cells(assignments: DataFrame) -> tuple[pa.Array, list[tuple[str, str, str, slice]]]:
    """The targets' task ids as one flat array, and each (plan_id, process_id, role) with the slice of it that role
    holds."""
    # One row per (plan, process, role) with its tasks, as Arrow columns: a fleet's targets have millions of task
    # rows, and a Row object per row costs more than the query.
    by_role = (
        target_rows(assignments)
        .groupBy("plan_id", "process_id", "role")
        .agg(sf.collect_list("task_id").alias("tasks"))
        .toArrow()
    )
    tasks = by_role.column("tasks").combine_chunks()
    counts = pc.list_value_length(tasks).to_pylist()
    cells = [
        (plan_id, pid, role, slice(end - count, end))
        for plan_id, pid, role, count, end in zip(
            by_role.column("plan_id").to_pylist(),
            by_role.column("process_id").to_pylist(),
            by_role.column("role").to_pylist(),
            counts,
            accumulate(counts),
            strict=True,
        )
    ]
    return tasks.flatten(), cells


def _draining(plans: DataFrame) -> list[tuple[str, list[str]]]:
    """(plan_id, drained process ids) of the plans that drain processes."""
    return [(r["plan_id"], r["draining"]) for r in plans.where(sf.col("draining").isNotNull()).collect()]


def targets_of(assignments: DataFrame, plans: DataFrame) -> dict[str, GroupAssignment]:
    """plan_id -> target of the plans whose plan_assignments rows are ``assignments`` (``plans``: their plans rows,
    for the processes they drain)."""
    empty: frozenset[TaskId] = frozenset()
    held: dict[str, dict[str, dict[str, frozenset[TaskId]]]] = {}
    flat, cells = _target_cells(assignments)
    # The same few task ids recur in every plan: parse each distinct one once and refer to it by its code.
    encoded = pc.dictionary_encode(flat)
    names = [TaskId.parse(t) for t in encoded.dictionary.to_pylist()]
    codes = encoded.indices.to_pylist()
    for plan_id, pid, role, held_slice in cells:
        held.setdefault(plan_id, {}).setdefault(pid, {})[role] = frozenset(map(names.__getitem__, codes[held_slice]))
    # A drained process holds nothing, so has no rows; the target still names it (empty) so that the leader's
    # target fits the live group while the process runs, instead of being re-balanced onto it.
    for plan_id, drained in _draining(plans):
        for pid in drained:
            held.setdefault(plan_id, {}).setdefault(pid, {})
    return {
        plan_id: GroupAssignment(
            {
                pid: ClientAssignment(active=roles.get("ACTIVE", empty), standby=roles.get("STANDBY", empty))
                for pid, roles in by.items()
            }
        )
        for plan_id, by in held.items()
    }


def target_digests(assignments: DataFrame, plans: DataFrame) -> dict[str, str]:
    """plan_id -> target_digest(target) of the same plans as targets_of, computed from the rows' task id strings
    (no TaskId or GroupAssignment per plan: validating a fleet digests millions of rows). A plan whose target holds
    a task id TaskId does not parse (targets_of refuses it) gets no digest, instead of failing every plan's."""
    flat, cells = _target_cells(assignments)
    malformed = {name for name in pc.unique(flat).to_pylist() if not _parses(name)}
    names = flat.to_pylist()
    refused = {plan_id for plan_id, _, _, held_slice in cells if malformed.intersection(names[held_slice])}
    bodies: dict[str, dict[str, dict[str, list[str]]]] = {}
    for plan_id, pid, role, held_slice in cells:
        if plan_id in refused:
            continue
        # target_json's shape: both roles present, each sorted as strings, an empty process kept.
        roles = bodies.setdefault(plan_id, {}).setdefault(pid, {"active": [], "standby": []})
        roles["active" if role == "ACTIVE" else "standby"] = sorted(set(names[held_slice]))
    for plan_id, drained in _draining(plans):
        for pid in drained:
            if plan_id not in refused:
                bodies.setdefault(plan_id, {}).setdefault(pid, {"active": [], "standby": []})
    return {plan_id: target_digest(body) for plan_id, body in bodies.items()}


def _parses(name: str) -> bool:
    try:
        TaskId.parse(name)
    except ValueError:
        return False
    return True


def history_rows(
    group_id: str, plan_id: str, snapshot_id: str, target: GroupAssignment, source: str, event_time: int
) -> list[tuple[Any, ...]]:
    """assignment_history rows (HISTORY_DDL) of a plan's target: who holds what, as planned or published."""
    return [
        (event_time, group_id, plan_id, snapshot_id, pid, str(task), role, source)
        for pid, ca in target.clients.items()
        for role, tasks in (("ACTIVE", ca.active), ("STANDBY", ca.standby))
        for task in sorted(tasks)
    ]


TARGET_CHANGED = "target changed since validation: its digest no longer matches; plan and validate again"


def changed_since_validation(rows: DataFrame, targets: Mapping[str, GroupAssignment]) -> list[str]:
    """Plans whose target (as read now) no longer has the digest recorded when it was validated."""
    bound = {r["plan_id"]: r["target_digest"] for r in rows.select("plan_id", "target_digest").collect()}
    return sorted(
        plan_id
        for plan_id, digest in bound.items()
        if digest is None or plan_id not in targets or target_digest(targets[plan_id]) != digest
    )
