"""A group's planning input: the long frame the per-group runners take, and the assignor's GroupState from it."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as sf

from assignor import ClientState, GroupState, TaskId

if TYPE_CHECKING:  # planner workers import this module: pandas would add a second to each one's start
    import pandas as pd


def planning_input(reports: DataFrame, tasks: DataFrame, lags: DataFrame) -> DataFrame:
    """One long frame per group for the planner UDF: client, held, task and offset rows (primitive columns only).

    ``reports``: member_reports; ``tasks``: group_tasks; ``lags``: task_lags of the same snapshot.
    """
    key = ["snapshot_id", "group_id"]
    fresh = reports.where(~sf.col("stale"))
    nulls = {
        "process_id": "string",
        "capacity": "int",
        "task_id": "string",
        "role": "string",
        "stateful": "boolean",
        "end_offset_sum": "bigint",
        "offset_sum": "bigint",
    }

    def shaped(frame: DataFrame, kind: str) -> DataFrame:
        present = set(frame.columns)
        columns = [sf.col(c).cast(t) if c in present else sf.lit(None).cast(t) for c, t in nulls.items()]
        return frame.select(
            *key, sf.lit(kind).alias("kind"), *[c.alias(n) for c, n in zip(columns, nulls, strict=True)]
        )

    clients = shaped(fresh.select(*key, "process_id", "capacity"), "client")
    held = [
        shaped(
            fresh.select(*key, "process_id", sf.explode(column).alias("task_id"), sf.lit(role).alias("role")), "held"
        )
        for column, role in (("active_tasks", "ACTIVE"), ("standby_tasks", "STANDBY"), ("warmup_tasks", "WARMUP"))
    ]
    ends = lags.groupBy(*key, "task_id").agg(sf.max("end_offset_sum").alias("end_offset_sum"))
    task_rows = shaped(
        tasks.join(ends, [*key, "task_id"], "left").select(*key, "task_id", "stateful", "end_offset_sum"), "task"
    )
    offsets = shaped(
        lags.where(sf.col("offset_sum").isNotNull()).select(*key, "process_id", "task_id", "offset_sum"), "offset"
    )
    frame = clients
    for part in [*held, task_rows, offsets]:
        frame = frame.unionByName(part)
    return frame


# One group's planning_input rows, column by column: a pandas frame, or lists cut from an Arrow table.
PlanningRows: TypeAlias = "pd.DataFrame | Mapping[str, Sequence[Any]]"
PLANNING_COLUMNS = (
    "snapshot_id", "group_id", "kind", "process_id", "capacity", "task_id", "role", "stateful", "end_offset_sum",
    "offset_sum",
)  # fmt: skip


def _missing(value: object) -> bool:
    """A null cell however the rows came: None from Arrow lists, NaN or pandas' NA from a pandas frame."""
    if value is None:
        return True
    try:
        return math.isnan(value)  # type: ignore[arg-type]
    except TypeError:  # pandas.NA has no float value
        return True


def first_value(rows: PlanningRows, column: str) -> str:
    """A column's value in a group's first row (the ids every row of the group shares)."""
    return str(next(iter(rows[column])))


def group_state(rows: PlanningRows) -> GroupState:
    """The assignor's input from one group's planning_input rows."""
    stateful: set[TaskId] = set()
    stateless: set[TaskId] = set()
    ends: dict[TaskId, int] = {}
    capacity: dict[str, int] = {}
    held: dict[str, dict[str, set[TaskId]]] = {}
    sums: dict[str, dict[TaskId, int]] = {}
    # A group's few dozen task ids recur in every held and offset row: parse each once.
    ids: dict[str, TaskId] = {}

    def task_id(text: str) -> TaskId:
        task = ids.get(text)
        if task is None:
            task = ids[text] = TaskId.parse(text)
        return task

    for kind, pid, tid, cap, role, is_stateful, end, offset in zip(
        rows["kind"],
        rows["process_id"],
        rows["task_id"],
        rows["capacity"],
        rows["role"],
        rows["stateful"],
        rows["end_offset_sum"],
        rows["offset_sum"],
        strict=True,
    ):
        if kind == "client":
            capacity[pid] = int(cap)
        elif kind == "held":
            held.setdefault(pid, {}).setdefault(role, set()).add(task_id(tid))
        elif kind == "task":
            task = task_id(tid)
            if is_stateful:
                stateful.add(task)
                ends[task] = 0 if _missing(end) else int(end)
            else:
                stateless.add(task)
        else:
            sums.setdefault(pid, {})[task_id(tid)] = int(offset)
    clients = []
    for pid in sorted(capacity):
        roles = held.get(pid, {})
        clients.append(
            ClientState(
                pid,
                capacity=capacity[pid],
                previous_active=frozenset(roles.get("ACTIVE", ())),
                # Streams counts a warmup as a standby in the previous assignment.
                previous_standby=frozenset(roles.get("STANDBY", set()) | roles.get("WARMUP", set())),
                task_offset_sums=sums.get(pid, {}),
            )
        )
    return GroupState(
        clients=clients,
        stateful_tasks=frozenset(stateful),
        stateless_tasks=frozenset(stateless),
        changelog_end_offset_sums=ends,
    )


def groups_of(rows: pa.Table) -> Iterator[dict[str, list[Any]]]:
    """Each group's planning rows, by column, from a table holding several groups' rows (in the order they came)."""
    # sort_indices is stable: a group's rows keep the order the engine sent them in.
    rows = rows.take(pc.sort_indices(rows, [("group_id", "ascending")]))
    columns = {name: rows.column(name).to_pylist() for name in PLANNING_COLUMNS}
    ids = columns["group_id"]
    start = 0
    for end in range(1, len(ids) + 1):
        if end == len(ids) or ids[end] != ids[start]:
            yield {name: values[start:end] for name, values in columns.items()}
            start = end
