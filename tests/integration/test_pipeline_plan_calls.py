"""Dealing groups into planner calls changes nothing: one group per call, a few per call or all in one."""

from __future__ import annotations

from typing import Any

from pyspark.sql import SparkSession

from jobs.pipeline.lags import task_lags
from jobs.pipeline.plan import plan_groups
from jobs.pipeline.planning_input import planning_input
from jobs.pipeline.restore_rates import RestoreRates
from jobs.settings import Kip441Settings
from tests.support.pipeline_data import group_frames, random_groups


def _planned(spark: SparkSession, calls: int, processes: int) -> list[tuple[Any, ...]]:
    reports, tasks, offsets = group_frames(spark, random_groups(11, 7))
    inputs = planning_input(reports, tasks, task_lags(reports, tasks, offsets, 100))
    configs = Kip441Settings(num_standby_replicas=1, acceptable_recovery_lag=100).configs()
    planned = plan_groups(inputs, configs, RestoreRates(50.0), 1, processes=processes, calls=calls)
    return sorted((tuple(r) for r in planned.select(*sorted(planned.columns)).collect()), key=repr)


def test_groups_plan_alike_however_they_are_dealt_into_calls(spark: SparkSession) -> None:
    alone = _planned(spark, calls=1_000, processes=1)
    assert len(alone) == 7
    assert _planned(spark, calls=1, processes=1) == alone
    assert _planned(spark, calls=3, processes=2) == alone  # in worker processes, as under Sail by default
