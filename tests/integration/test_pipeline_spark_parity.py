"""The pure transformations give identical results on Sail and on Apache Spark's own local Spark Connect server."""

from __future__ import annotations

import os
import random
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from pyspark import SparkContext
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as sf

from jobs.pipeline.checks import (
    assignment_checks,
    holding_facts,
    instance_task_checks,
    step_checks,
    step_task_checks,
    task_copy_checks,
)
from jobs.pipeline.history import owners_at
from jobs.pipeline.lags import task_lags
from jobs.pipeline.plan import plan_groups
from jobs.pipeline.plan_frames import explode_assignments
from jobs.pipeline.plan_record import PLANNED_SCHEMA
from jobs.pipeline.planning_input import planning_input
from jobs.pipeline.restore_rates import RestoreRates
from jobs.pipeline.targets import HISTORY_DDL
from jobs.settings import Kip441Settings, Settings
from tests.support.pipeline_data import HISTORY_ROWS, group_frames, random_groups

JVM_PORT = 15002  # where pyspark starts its local Spark Connect server


@pytest.fixture(scope="module")
def jvm_spark() -> Iterator[SparkSession]:
    """Apache Spark (JVM, local[2]) behind Spark Connect, started from the pip package; fails loudly if it can't."""
    saved = dict(os.environ)
    os.environ["PYSPARK_PYTHON"] = sys.executable  # its Python workers need this venv's pandas and our code
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    try:
        SparkSession.builder.remote("local[2]").getOrCreate()  # starts the JVM server (may return another session)
        session = SparkSession.builder.remote(f"sc://localhost:{JVM_PORT}").create()
        session.conf.set("spark.sql.shuffle.partitions", "4")
        if session.conf.get("spark.master") != "local[2]":
            pytest.fail("the session on port 15002 is not the local[2] JVM Spark server")
    except Exception as err:  # no JVM, no Java 17, port taken: say so instead of skipping
        pytest.fail(f"Apache Spark local[2] Spark Connect server did not start ({type(err).__name__}: {err})")
    yield session
    session.stop()
    if SparkContext._active_spark_context is not None:
        SparkContext._active_spark_context.stop()
    os.environ.clear()
    os.environ.update(saved)


def _plain(value: Any) -> Any:
    if isinstance(value, Row):
        return tuple(_plain(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _plain(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_plain(v) for v in value)
    return value


def rows(frame: DataFrame) -> list[tuple[Any, ...]]:
    """Collected rows as sorted plain tuples, column order fixed by name."""
    return sorted((_plain(r) for r in frame.select(*sorted(frame.columns)).collect()), key=repr)


def _on(spark: SparkSession, seed: int) -> dict[str, list[tuple[Any, ...]]]:
    groups = random_groups(seed, 6)
    reports, tasks, offsets = group_frames(spark, groups)
    lags = task_lags(reports, tasks, offsets, 100)
    settings = Settings(kip441=Kip441Settings(num_standby_replicas=1, acceptable_recovery_lag=100))
    udf_output = plan_groups(
        planning_input(reports, tasks, lags), settings.kip441.configs(), RestoreRates(50.0), 1, processes=1
    )
    # Run the planner UDF once; the checks below read its result many times.
    planned = spark.createDataFrame(udf_output.collect(), PLANNED_SCHEMA)
    assignments = explode_assignments(planned)
    history = spark.createDataFrame(HISTORY_ROWS, HISTORY_DDL)
    facts = holding_facts(assignments, tasks, lags)
    standbys = planned.select("plan_id", sf.lit(1).alias("num_standby_replicas"))
    return {
        "task_lags": rows(lags),
        "planned": rows(planned),
        "plan_assignments": rows(assignments),
        "assignment_checks": rows(assignment_checks(facts, reports)),
        "task_copy_checks": rows(task_copy_checks(facts, tasks, lags, standbys)),
        "step_task_checks": rows(step_task_checks(assignments, tasks)),
        "instance_task_checks": rows(instance_task_checks(assignments)),
        "step_checks": rows(step_checks(assignments)),
        "owners_latest": rows(owners_at(history, "g0")),
        "owners_at_22": rows(owners_at(history, "g0", "0_0", 22)),
        "owners_at_12": rows(owners_at(history, "g0", None, 12)),
    }


def test_pure_transformations_agree_between_sail_and_apache_spark(spark: SparkSession, jvm_spark: SparkSession) -> None:
    seed = random.Random(5).randint(0, 2**31)
    sail, jvm = _on(spark, seed), _on(jvm_spark, seed)
    assert sail["task_lags"] and sail["plan_assignments"] and sail["owners_latest"]
    for name in sail:
        assert sail[name] == jvm[name], f"{name} differs between Sail and Apache Spark"
