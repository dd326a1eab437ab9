"""A planner worker that dies (killed for memory, crashed) costs only the group that killed it: the broken pool is
replaced, the call's other groups are planned alone, and the group that kills its worker alone is REJECTED."""

from __future__ import annotations

import os
import sys
import threading
from concurrent.futures.process import BrokenProcessPool

import pandas as pd
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import to_arrow_schema

from assignor import AssignmentConfigs
from jobs.lakehouse.tables import table_schema
from jobs.pipeline import plan
from jobs.pipeline.baselines import baselines_udf
from jobs.pipeline.plan_record import PLANNED_SCHEMA, PlanCall, plan_table
from jobs.pipeline.restore_rates import RestoreRates
from jobs.pipeline.status import PlanStatus
from jobs.pipeline.workers import WorkerDied, release_pools, run_alone, run_on_workers
from tests.support.dying_planner import POISON, baselines_or_die, die, plan_or_die
from tests.support.planning_rows import two_client_rows


@pytest.fixture(autouse=True)
def _released() -> object:
    yield
    release_pools()


def test_a_dead_worker_drops_its_pool_and_the_next_call_gets_fresh_workers() -> None:
    before = run_on_workers(1, os.getpid)
    with pytest.raises(BrokenProcessPool):
        run_on_workers(1, die)
    after = run_on_workers(1, os.getpid)
    assert after != before  # a new worker: the broken pool was not handed out again


def test_jobs_run_alone_name_the_one_that_kills_its_worker() -> None:
    first, died, last = run_alone([(os.getpid, ()), (die, ()), (os.getpid, ())])
    assert died == WorkerDied()  # the second job, by its place
    assert isinstance(first, int) and isinstance(last, int) and first != last  # restarted after the death


def _rows(*group_ids: str) -> pa.Table:
    frame = pd.concat([two_client_rows(100, -2).assign(group_id=g) for g in group_ids], ignore_index=True)
    return pa.Table.from_pandas(frame, preserve_index=False)


def test_a_group_that_kills_its_worker_is_rejected_and_the_rest_of_its_call_are_planned(spark: SparkSession) -> None:
    schema = to_arrow_schema(spark.createDataFrame([], PLANNED_SCHEMA).schema)
    configs, rates = AssignmentConfigs(), RestoreRates()
    udf = plan.planner_udf(configs, rates, 1, 2, schema, planner=plan_or_die)
    out = {r["group_id"]: r for r in udf(_rows("g1", POISON, "g2")).to_pylist()}
    assert out.keys() == {"g1", POISON, "g2"}
    assert out[POISON]["status"] == PlanStatus.REJECTED and out[POISON]["assignments"] == []
    assert "worker process planning this group alone died" in out[POISON]["reason"]
    call = PlanCall(configs, {g: rates.for_group(g) for g in ("g1", "g2")}, 1, schema)
    expected = plan_table(_rows("g1", "g2"), call)
    assert [out["g1"], out["g2"]] == expected.to_pylist()
    # The next call is planned by fresh shared workers, as if nothing had happened.
    assert udf(_rows("g1", "g2")).to_pylist() == expected.to_pylist()


def test_a_group_whose_baselines_kill_the_worker_goes_without_and_the_next_group_gets_them(
    spark: SparkSession,
) -> None:
    schema = to_arrow_schema(spark.createDataFrame([], table_schema("plan_baselines").ddl).schema)
    replay = baselines_udf(AssignmentConfigs(), RestoreRates(), 2, schema, records=baselines_or_die)
    assert replay(_rows(POISON)).num_rows == 0
    after = replay(_rows("g1"))
    assert set(after.column("group_id").to_pylist()) == {"g1"} and after.num_rows > 0


def test_calls_running_alone_at_once_each_find_their_death_and_leave_the_main_module_as_it_was() -> None:
    # Every call a death broke runs alone at the same time (the engine's threads); each hides the main script
    # while its worker starts, and overlapping hides must not leave it hidden.
    main = sys.modules["__main__"]
    before = (main.__dict__.get("__file__"), getattr(main, "__spec__", None))
    results: list[list[object]] = [[], []]

    def alone(slot: int) -> None:
        results[slot] = list(run_alone([(die, ()), (os.getpid, ())]))

    threads = [threading.Thread(target=alone, args=(slot,)) for slot in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    for died, pid in results:
        assert died == WorkerDied() and isinstance(pid, int)
    assert (main.__dict__.get("__file__"), getattr(main, "__spec__", None)) == before
