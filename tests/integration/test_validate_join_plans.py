"""Apache Spark never broadcasts a per-task side of validation's joins, however small it looks.

Spark sizes a Delta read by its compressed Parquet files: at 10,000 groups a per-task side looked smaller than
the broadcast threshold and building its hash table ran out of memory. Over empty Parquet files every side is
tiny, so without the queries' own sort-merge hints Spark broadcasts them all: these plans show the hints hold.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from jobs.lakehouse.tables import table_schema
from jobs.pipeline.checks import (
    assignment_checks,
    balance_checks,
    holding_facts,
    step_task_checks,
    task_copy_checks,
)

# The build keys of a broadcast hash join in Spark's plan: "BroadcastHashJoin [left keys], [right keys], ...".
BROADCAST = re.compile(r"BroadcastHashJoin \[([^\]]*)\], \[([^\]]*)\]")


def empty(spark: SparkSession, table: str, folder: Path) -> DataFrame:
    """An empty file scan (an empty in-memory frame would be optimized away with every join on it)."""
    schema = table_schema(table).ddl
    spark.createDataFrame([], schema).write.parquet(str(folder / table))
    return spark.read.schema(schema).parquet(str(folder / table))


def physical_plan(frame: DataFrame) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        frame.explain()
    return out.getvalue()


def test_validation_datasets_join_per_task_rows_by_sort_merge_on_apache_spark(
    apache_spark: SparkSession, tmp_path: Path
) -> None:
    tables = ("plan_assignments", "plans", "member_reports", "group_tasks", "task_lags")
    assignments, plans, reports, tasks, lags = (empty(apache_spark, t, tmp_path) for t in tables)
    facts = holding_facts(assignments, tasks, lags)
    datasets = {
        "holding_facts": facts,
        "plan_assignments": assignment_checks(facts, reports),
        "step_tasks": step_task_checks(assignments, tasks),
        "task_copies": task_copy_checks(facts, tasks, lags, plans),
        "plan_balance": balance_checks(assignments, plans, reports, tasks),
    }
    for name, frame in datasets.items():
        plan = physical_plan(frame)
        assert "SortMergeJoin" in plan, f"{name}: no sort-merge join at all:\n{plan}"
        broadcast_on_tasks = [m.group(0) for m in BROADCAST.finditer(plan) if "task_id" in m.group(1)]
        assert not broadcast_on_tasks, f"{name} broadcasts per-task rows: {broadcast_on_tasks}"
