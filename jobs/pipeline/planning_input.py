"""The long frame the per-group runners (planning, baselines) take: each group's clients, tasks and offsets."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as sf


def planning_input(reports: DataFrame, tasks: DataFrame, lags: DataFrame) -> DataFrame:
    """One long frame per group for the planner UDF: client rows (each with the tasks it holds, as lists), task rows
    and offset rows.

    ``reports``: member_reports; ``tasks``: group_tasks; ``lags``: task_lags of the same snapshot.
    """
    key = ["snapshot_id", "group_id"]
    fresh = reports.where(~sf.col("stale"))
    nulls = {
        "process_id": "string",
        "capacity": "int",
        "task_id": "string",
        "stateful": "boolean",
        "end_offset_sum": "bigint",
        "offset_sum": "bigint",
        "active_tasks": "array<string>",
        "standby_tasks": "array<string>",
        "warmup_tasks": "array<string>",
    }

    def shaped(frame: DataFrame, kind: str) -> DataFrame:
        present = set(frame.columns)
        columns = [sf.col(c).cast(t) if c in present else sf.lit(None).cast(t) for c, t in nulls.items()]
        return frame.select(
            *key, sf.lit(kind).alias("kind"), *[c.alias(n) for c, n in zip(columns, nulls, strict=True)]
        )

    # What a client holds stays on its row as lists: a row per held task was a third of the rows the engine
    # shuffled to the planner, and of those the planner turned back into Python.
    clients = shaped(
        fresh.select(*key, "process_id", "capacity", "active_tasks", "standby_tasks", "warmup_tasks"), "client"
    )
    ends = lags.groupBy(*key, "task_id").agg(sf.max("end_offset_sum").alias("end_offset_sum"))
    task_rows = shaped(
        tasks.join(ends, [*key, "task_id"], "left").select(*key, "task_id", "stateful", "end_offset_sum"), "task"
    )
    offsets = shaped(
        lags.where(sf.col("offset_sum").isNotNull()).select(*key, "process_id", "task_id", "offset_sum"), "offset"
    )
    return clients.unionByName(task_rows).unionByName(offsets)
