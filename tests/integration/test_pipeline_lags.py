"""The lags stage has exactly assignor.compute_lags' semantics, on random groups, through the real engine."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from assignor import LATEST_OFFSET, ClientState, GroupState, TaskId, compute_lags
from assignor.lags import lag_is_caught_up
from jobs.lakehouse.tables import table_schema
from jobs.pipeline.lags import task_lags
from tests.support.pipeline_data import group_frames, held_state_only, random_groups, report_rows

pytestmark = pytest.mark.engines  # every spark test here runs on Sail and on Apache Spark with delta-spark


@settings(max_examples=8)
@given(
    seed=st.integers(0, 2**32 - 1),
    acceptable=st.sampled_from((0, 100, 10_000)),
    reported=st.sampled_from(("offset_sums", "lags", "lags_and_offset_sums")),
)
def test_task_lags_equal_compute_lags_on_random_groups(
    spark: SparkSession, seed: int, acceptable: int, reported: str
) -> None:
    """Also when the reports carry lags, as the Kafka Streams plugin sends them: with the offset sums it derives
    (every task an instance has state for counts) and without them (only the tasks it holds count)."""
    groups = random_groups(seed, 12)
    reports, tasks, offsets = group_frames(spark, groups, as_lags=reported != "offset_sums")
    if reported == "lags_and_offset_sums":
        reports = plugin_reports(spark, groups)
    rows = task_lags(reports, tasks, offsets, acceptable).collect()
    got = {(r["group_id"], r["process_id"], r["task_id"]): (r["lag"], r["caught_up"]) for r in rows}
    if reported == "lags":  # an old lag counts only for tasks the instance holds: others have no state
        groups = {gid: held_state_only(g) for gid, g in groups.items()}
    expected = {
        (gid, pid, str(task)): (lag, lag_is_caught_up(lag, acceptable))
        for gid, group in groups.items()
        for pid, lags in compute_lags(group).items()
        for task, lag in lags.items()
    }
    assert got == expected


def plugin_reports(spark: SparkSession, groups: dict[str, GroupState]) -> DataFrame:
    """member_reports as the plugin writes them when it could list end offsets: lags and offset sums."""
    names = table_schema("member_reports").column_names
    sums_at = names.index("task_offset_sums")
    rows = [
        (*lagged[:sums_at], summed[sums_at], *lagged[sums_at + 1 :])
        for lagged, summed in zip(report_rows(groups, as_lags=True), report_rows(groups), strict=True)
    ]
    return spark.createDataFrame(rows, table_schema("member_reports").ddl)


def test_plugin_offset_sums_count_for_tasks_not_held_and_lags_for_tasks_held(spark: SparkSession) -> None:
    """Between the report and the snapshot 1,000 records reach each changelog: the warmup that kept up still
    lags 40, the state an instance left behind now lags 1,000 more, and an instance without sums gets none."""
    held, left, active = TaskId(1, 0), TaskId(1, 1), TaskId(1, 2)
    then = {held: 5_000, left: 5_000, active: 5_000}
    a = ClientState("a", previous_active=frozenset({held, left, active}), task_offset_sums=dict.fromkeys(then, -2))
    b = ClientState("b", previous_standby=frozenset({held}), task_offset_sums={held: 4_960, left: 4_900})
    c = ClientState("c", task_offset_sums={left: 4_900})
    group = GroupState([a, b, c], frozenset(then), changelog_end_offset_sums=then)
    reports = plugin_reports(spark, {"g": group})
    lags_only = sf.col("process_id") == "c"
    reports = reports.withColumn(
        "task_offset_sums",
        sf.when(lags_only, sf.create_map().cast("map<string,bigint>")).otherwise(sf.col("task_offset_sums")),
    )
    later = GroupState(group.clients, group.stateful_tasks, changelog_end_offset_sums={t: 6_000 for t in then})
    _, tasks, offsets = group_frames(spark, {"g": later})
    lags = {(r["process_id"], r["task_id"]): r["lag"] for r in task_lags(reports, tasks, offsets, 100).collect()}
    assert lags == {
        **{("a", str(t)): LATEST_OFFSET for t in then},
        ("b", "1_0"): 40, ("b", "1_1"): 1_100, ("b", "1_2"): 6_000,
        ("c", "1_0"): 6_000, ("c", "1_1"): 6_000, ("c", "1_2"): 6_000,
    }  # fmt: skip


def test_stale_reports_get_no_lags(spark: SparkSession) -> None:
    groups = random_groups(3, 3)
    reports, tasks, offsets = group_frames(spark, groups)
    stale_pid = groups["g0"].clients[0].process_id
    reports = reports.withColumn("stale", sf.col("process_id") == stale_pid)
    processes = {r["process_id"] for r in task_lags(reports, tasks, offsets, 10_000).collect()}
    expected = {c.process_id for g in groups.values() if g.stateful_tasks for c in g.clients} - {stale_pid}
    assert processes == expected
