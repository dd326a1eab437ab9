"""A group's planning input as the per-group runners get it (planning_input.py's rows), and the assignor's GroupState
from it; loaded by the planner workers, so it needs no engine."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from assignor import ClientState, GroupState, TaskId

if TYPE_CHECKING:  # planner workers import this module: pandas would add a second to each one's start
    import pandas as pd


# One group's planning_input rows, column by column: a pandas frame, or lists cut from an Arrow table.
PlanningRows: TypeAlias = "pd.DataFrame | Mapping[str, Sequence[Any]]"
PLANNING_COLUMNS = (
    "snapshot_id", "group_id", "kind", "process_id", "capacity", "task_id", "stateful", "end_offset_sum", "offset_sum",
    "active_tasks", "standby_tasks", "warmup_tasks",
)  # fmt: skip


def _missing(value: object) -> bool:
    """A null cell however the rows came: None from Arrow lists, NaN or pandas' NA from a pandas frame."""
    if value is None:
        return True
    try:
        return math.isnan(value)  # type: ignore[arg-type]
    except TypeError:  # pandas.NA has no float value
        return True


def _missing_list(value: object) -> bool:
    """A null list cell: a pandas frame may hold NaN there (a list, tuple or array is a value, even empty)."""
    return isinstance(value, float) and math.isnan(value)


def first_value(rows: PlanningRows, column: str) -> str:
    """A column's value in a group's first row (the ids every row of the group shares)."""
    return str(next(iter(rows[column])))


# Parsed task ids, shared by every group a process converts: a fleet's groups name the same few dozen tasks in every
# client's lists and offset rows. Bounded, and a name that does not parse raises each time (never cached).
task_id = functools.lru_cache(maxsize=65_536)(TaskId.parse)


def group_state(rows: PlanningRows) -> GroupState:
    """The assignor's input from one group's planning_input rows."""
    stateful: set[TaskId] = set()
    stateless: set[TaskId] = set()
    ends: dict[TaskId, int] = {}
    capacity: dict[str, int] = {}
    held: dict[str, tuple[frozenset[TaskId], frozenset[TaskId]]] = {}
    sums: dict[str, dict[TaskId, int]] = {}

    def tasks(names: Any) -> frozenset[TaskId]:
        return frozenset() if names is None or _missing_list(names) else frozenset(map(task_id, names))

    for kind, pid, tid, cap, is_stateful, end, offset, active, standby, warmup in zip(
        rows["kind"],
        rows["process_id"],
        rows["task_id"],
        rows["capacity"],
        rows["stateful"],
        rows["end_offset_sum"],
        rows["offset_sum"],
        rows["active_tasks"],
        rows["standby_tasks"],
        rows["warmup_tasks"],
        strict=True,
    ):
        if kind == "client":
            capacity[pid] = int(cap)
            # Streams counts a warmup as a standby in the previous assignment.
            held[pid] = (tasks(active), tasks(standby) | tasks(warmup))
        elif kind == "task":
            task = task_id(tid)
            if is_stateful:
                stateful.add(task)
                ends[task] = 0 if _missing(end) else int(end)
            else:
                stateless.add(task)
        else:
            sums.setdefault(pid, {})[task_id(tid)] = int(offset)
    clients = [
        ClientState(
            pid,
            capacity=capacity[pid],
            previous_active=held[pid][0],
            previous_standby=held[pid][1],
            task_offset_sums=sums.get(pid, {}),
        )
        for pid in sorted(capacity)
    ]
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
