"""The lags stage has exactly assignor.compute_lags' semantics, on random groups, through the real engine."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import functions as sf

from assignor import compute_lags
from assignor.lags import lag_is_caught_up
from jobs.pipeline.lags import task_lags
from tests.support.pipeline_data import group_frames, held_state_only, random_groups

pytestmark = pytest.mark.engines  # every spark test here runs on Sail and on Apache Spark with delta-spark


@settings(max_examples=8)
@given(seed=st.integers(0, 2**32 - 1), acceptable=st.sampled_from((0, 100, 10_000)), as_lags=st.booleans())
def test_task_lags_equal_compute_lags_on_random_groups(
    spark: SparkSession, seed: int, acceptable: int, as_lags: bool
) -> None:
    """Also when the reports carry lags, as the Kafka Streams plugin sends them, rather than offset sums."""
    groups = random_groups(seed, 12)
    reports, tasks, offsets = group_frames(spark, groups, as_lags=as_lags)
    rows = task_lags(reports, tasks, offsets, acceptable).collect()
    got = {(r["group_id"], r["process_id"], r["task_id"]): (r["lag"], r["caught_up"]) for r in rows}
    if as_lags:  # a plugin's (possibly old) lag counts only for tasks the instance holds: others have no state
        groups = {gid: held_state_only(g) for gid, g in groups.items()}
    expected = {
        (gid, pid, str(task)): (lag, lag_is_caught_up(lag, acceptable))
        for gid, group in groups.items()
        for pid, lags in compute_lags(group).items()
        for task, lag in lags.items()
    }
    assert got == expected


def test_stale_reports_get_no_lags(spark: SparkSession) -> None:
    groups = random_groups(3, 3)
    reports, tasks, offsets = group_frames(spark, groups)
    stale_pid = groups["g0"].clients[0].process_id
    reports = reports.withColumn("stale", sf.col("process_id") == stale_pid)
    processes = {r["process_id"] for r in task_lags(reports, tasks, offsets, 10_000).collect()}
    expected = {c.process_id for g in groups.values() if g.stateful_tasks for c in g.clients} - {stale_pid}
    assert processes == expected
