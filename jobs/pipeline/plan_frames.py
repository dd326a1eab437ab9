"""The planner's output as frames: plans rows with their groups' settings, and plan_assignments rows (apart from
plan_record, which the planner workers load: they need no engine)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as sf

from jobs.lakehouse.tables import table_schema
from jobs.pipeline.plan_record import STEP_COLUMNS


def plan_rows(planned: DataFrame, group_settings: DataFrame) -> DataFrame:
    """plans rows from the planner's output, with each group's KIP-441 settings the plan was made with, where they
    came from and what they change (``group_settings``: group_settings.settings_frame), in the table's order."""
    joined = planned.join(group_settings, "group_id", "left")
    present = set(joined.columns)
    return joined.select(*[c for c in table_schema("plans").column_names if c in present])


def explode_assignments(planned: DataFrame) -> DataFrame:
    """plan_assignments rows from the planner's ``assignments`` column, one per struct."""
    entries = planned.select("plan_id", "snapshot_id", "group_id", sf.explode("assignments").alias("entry"))
    return entries.select("plan_id", "snapshot_id", "group_id", *[sf.col(f"entry.{c}").alias(c) for c in STEP_COLUMNS])
