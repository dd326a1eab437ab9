"""One planner call plans several groups: each group's rows are cut out in the order they came and planned alone."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import to_arrow_schema

from assignor import AssignmentConfigs
from jobs.pipeline.group_input import group_state, groups_of
from jobs.pipeline.plan_record import PLANNED_SCHEMA, STEP_COLUMNS, plan_record, planned_arrow
from jobs.pipeline.status import PlanStatus
from tests.support.planning_rows import two_client_rows


def _group(group_id: str, end_offset_sum: int) -> pd.DataFrame:
    return two_client_rows(end_offset_sum, -2).assign(group_id=group_id)


def test_a_calls_rows_are_cut_into_groups_keeping_each_groups_row_order() -> None:
    g1, g2 = _group("g1", 100), _group("g2", 200)
    # Interleaved as an engine may deliver them: g2's rows reversed among g1's.
    mixed = pd.concat([g1.iloc[:3], g2.iloc[::-1], g1.iloc[3:]], ignore_index=True)
    cut = list(groups_of(pa.Table.from_pandas(mixed, preserve_index=False)))
    assert [group["group_id"][0] for group in cut] == ["g1", "g2"]
    assert cut[0]["task_id"] == g1["task_id"].tolist()
    assert cut[1]["kind"] == g2.iloc[::-1]["kind"].tolist()


def test_a_group_cut_from_a_call_plans_as_its_pandas_rows_do() -> None:
    rows = pd.concat([_group("g1", 100), _group("g2", 5_000)], ignore_index=True)
    for group in groups_of(pa.Table.from_pandas(rows, preserve_index=False)):
        alone = rows[rows["group_id"] == group["group_id"][0]]
        assert group_state(group) == group_state(alone)
        assert plan_record(group, AssignmentConfigs(), None, 1) == plan_record(alone, AssignmentConfigs(), None, 1)


def test_planned_rows_become_arrow_column_by_column_with_each_groups_steps(spark: SparkSession) -> None:
    schema = to_arrow_schema(spark.createDataFrame([], PLANNED_SCHEMA).schema)
    good = plan_record(_group("g1", 100), AssignmentConfigs(), None, 1)
    bad = plan_record(_group("g2", 100).assign(task_id="nonsense"), AssignmentConfigs(), None, 1)
    assert bad["status"] == PlanStatus.REJECTED
    table = planned_arrow([good, bad, good], schema)
    assert table.schema == schema
    rows = table.to_pylist()
    steps = [dict(zip(STEP_COLUMNS, e, strict=True)) for e in zip(*good["assignments"].values(), strict=True)]
    assert rows[0]["assignments"] == steps == rows[2]["assignments"] and rows[1]["assignments"] == []
    assert rows[1]["reason"] == bad["reason"] and rows[0]["moves"] == good["moves"]
    assert {k: v for k, v in rows[0].items() if k != "assignments"} == {
        k: v for k, v in good.items() if k != "assignments"
    }


def test_the_plans_row_carries_the_restore_lower_bound() -> None:
    # p2 has no state and B1 gives it one of p1's two tasks: a whole 100,000-offset changelog at the least.
    record = plan_record(_group("g1", 100_000), AssignmentConfigs(), None, 1)
    assert record["restore_lower_bound"] == 100_000 == record["restore_offsets"]
    rejected = plan_record(_group("g2", 100).assign(task_id="nonsense"), AssignmentConfigs(), None, 1)
    assert rejected["restore_lower_bound"] is None
