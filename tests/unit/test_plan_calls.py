"""One planner call plans several groups: each group's rows are cut out in the order they came and planned alone, and a
call's groups are shared among the workers."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import to_arrow_schema

from assignor import AssignmentConfigs
from jobs.pipeline import group_input
from jobs.pipeline.group_input import group_state, groups_of
from jobs.pipeline.group_runner import split_groups
from jobs.pipeline.plan_record import PLANNED_SCHEMA, STEP_COLUMNS, StepEntries, plan_record, planned_arrow
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
    steps = [dict(zip(STEP_COLUMNS, e, strict=True)) for e in zip(*good["assignments"].columns().values(), strict=True)]
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


def test_a_call_is_cut_into_a_part_per_worker_of_whole_groups_covering_every_row() -> None:
    rows = pa.Table.from_pandas(
        pd.concat([_group(f"g{i}", 100 * i) for i in range(5)], ignore_index=True), preserve_index=False
    )
    ids = [f"g{i}" for i in range(5)]
    parts = split_groups(rows, ids, 2)
    assert len(parts) == 2
    held = [set(p.column("group_id").to_pylist()) for p in parts]
    assert held[0].isdisjoint(held[1]) and held[0] | held[1] == set(ids)
    assert sorted(len(h) for h in held) == [2, 3]
    assert sum(p.num_rows for p in parts) == rows.num_rows
    # A group's rows keep their order within its part, as groups_of cuts them.
    for part in parts:
        for group in groups_of(part):
            alone = rows.filter(pc.equal(rows.column("group_id"), group["group_id"][0]))
            assert group["task_id"] == alone.column("task_id").to_pylist()
    assert split_groups(rows, ids[:1], 2) == [rows] and split_groups(rows, ids, 1) == [rows]
    assert len(split_groups(rows, ids, 8)) == 5  # never an empty part


def test_parsed_task_ids_are_shared_across_groups_but_bounded() -> None:
    group_input.task_id.cache_clear()
    first = group_state(_group("g1", 100))
    assert group_input.task_id.cache_info().currsize == len(first.stateful_tasks | first.stateless_tasks)
    parsed = group_input.task_id.cache_info().misses
    assert group_state(_group("g2", 100)) is not None
    assert group_input.task_id.cache_info().misses == parsed  # the second group's tasks were all parsed already
    for i in range(2, 6):  # each group names tasks of a subtopology of its own
        rows = _group(f"g{i}", 100)
        renamed = rows.assign(
            task_id=rows["task_id"].map(lambda t, i=i: None if t is None else f"{i}_{t.split('_')[1]}"),
            active_tasks=rows["active_tasks"].map(lambda ts, i=i: _renamed(ts, i)),
            standby_tasks=rows["standby_tasks"].map(lambda ts, i=i: _renamed(ts, i)),
            warmup_tasks=rows["warmup_tasks"].map(lambda ts, i=i: _renamed(ts, i)),
        )
        state = group_state(renamed)
        assert {t.subtopology for t in state.stateful_tasks} == {i}
    assert group_input.task_id.cache_info().maxsize == 65_536
    # A task id that does not parse is refused, not remembered.
    size = group_input.task_id.cache_info().currsize
    bad = _group("g9", 100).assign(task_id="nonsense")
    with pytest.raises(ValueError, match="nonsense"):
        group_state(bad)
    assert group_input.task_id.cache_info().currsize == size


def _renamed(tasks: object, subtopology: int) -> object:
    if not isinstance(tasks, list | tuple):
        return tasks
    return [f"{subtopology}_{t.split('_')[1]}" for t in tasks]


def test_a_plans_entries_become_one_arrow_row_each_whatever_the_mix_of_runs(spark: SparkSession) -> None:
    schema = to_arrow_schema(spark.createDataFrame([], PLANNED_SCHEMA).schema)
    record = plan_record(_group("g1", 100), AssignmentConfigs(), None, 1)
    entries = StepEntries(
        steps=[1, 1, 2, 3],
        processes=["p2", "p1", "p1", "p3"],
        roles=[0, 2, 1, 0],
        lengths=[2, 1, 3, 1],
        tasks=["0_1", "0_2", "1_0", "0_0", "0_3", "1_1", "2_7"],
    )
    table = planned_arrow([{**record, "assignments": entries}, {**record, "assignments": StepEntries()}], schema)
    got = table.to_pylist()
    assert got[0]["assignments"] == [
        {"step": 1, "process_id": "p2", "task_id": "0_1", "role": "ACTIVE"},
        {"step": 1, "process_id": "p2", "task_id": "0_2", "role": "ACTIVE"},
        {"step": 1, "process_id": "p1", "task_id": "1_0", "role": "WARMUP"},
        {"step": 2, "process_id": "p1", "task_id": "0_0", "role": "STANDBY"},
        {"step": 2, "process_id": "p1", "task_id": "0_3", "role": "STANDBY"},
        {"step": 2, "process_id": "p1", "task_id": "1_1", "role": "STANDBY"},
        {"step": 3, "process_id": "p3", "task_id": "2_7", "role": "ACTIVE"},
    ]
    assert got[1]["assignments"] == []
    assert [dict(zip(STEP_COLUMNS, e, strict=True)) for e in zip(*entries.columns().values(), strict=True)] == (
        got[0]["assignments"]
    )
