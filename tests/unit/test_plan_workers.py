"""Plan worker processes start warm: the planner loaded, the heap left by imports frozen out of the collector's way
(planning a group never rescans pyspark's and scipy's objects) and the collector run rarely; they outlive the
thread that started them."""

from __future__ import annotations

import gc
import multiprocessing
import os
import sys
import threading
from concurrent.futures import ProcessPoolExecutor

import pyarrow as pa
from pysail.spark import SparkConnectServer
from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import to_arrow_schema

from assignor import AssignmentConfigs
from jobs.lakehouse.engine import embedded, spark_session
from jobs.pipeline.plan_record import PLANNED_SCHEMA, PlanCall
from jobs.pipeline.restore_rates import RestoreRates
from jobs.pipeline.workers import release_pools, start_worker, worker_pool
from tests.support.planning_rows import two_client_rows
from tests.support.worker_probes import loaded_modules, plan_then_list_modules


def _worker_facts() -> tuple[int, bool, int]:
    return gc.get_freeze_count(), "scipy.optimize" in sys.modules, gc.get_threshold()[0]


def test_a_plan_worker_freezes_its_heap_after_loading_the_planner() -> None:
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), initializer=start_worker) as pool:
        frozen, milp_loaded, gen0 = pool.submit(_worker_facts).result(timeout=120)
    assert milp_loaded  # the warm-up reached the lazily imported MILP, so its modules are frozen too
    assert frozen > 10_000
    assert gen0 > gc.get_threshold()[0]  # collects far less often than a default process: see start_worker


def test_released_pools_stop_their_workers_and_a_later_call_starts_new_ones() -> None:
    first = worker_pool(1).submit(os.getpid).result(timeout=120)
    release_pools()
    assert not _alive(first)  # shutdown(wait=True) has joined it
    second = worker_pool(1).submit(os.getpid).result(timeout=120)
    try:
        assert second != first
    finally:
        release_pools()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_pool_started_from_a_thread_outlives_it_and_its_workers_load_no_pandas() -> None:
    # The first planner call comes from an engine thread; the kernel's parent-death signal follows the thread
    # that started a child, so workers started by that thread itself died when it ended.
    started: list[ProcessPoolExecutor] = []
    caller = threading.Thread(target=lambda: started.append(worker_pool(1)))
    caller.start()
    caller.join(timeout=120)
    assert started, "worker_pool did not return within 120 s"
    try:
        modules = started[0].submit(loaded_modules).result(timeout=120)
        assert worker_pool(1) is started[0]  # one pool: a later call gets the same workers
        assert "jobs.pipeline.plan_record" in modules and "scipy.optimize" in modules
        assert "pandas" not in modules  # a second of each worker's start, for nothing a worker uses
    finally:
        release_pools()
    assert not any(t.name.startswith("worker-pool-") for t in threading.enumerate())  # released: the owner ended


def test_a_worker_converting_plans_to_arrow_loads_neither_pandas_nor_an_engine(spark: SparkSession) -> None:
    # pyarrow imports pandas on its first list-to-array conversion unless the worker refused it (start_worker).
    schema = to_arrow_schema(spark.createDataFrame([], PLANNED_SCHEMA).schema)
    rows = pa.Table.from_pandas(two_client_rows(100, -2).assign(group_id="g1"), preserve_index=False)
    call = PlanCall(AssignmentConfigs(), {"g1": RestoreRates().for_group("g1")}, 1, schema)
    try:
        planned, modules = worker_pool(1).submit(plan_then_list_modules, rows, call).result(timeout=120)
    finally:
        release_pools()
    assert planned == 1
    assert "pandas" not in modules
    # Nor an engine: what a worker runs lives apart from the stage's frames (planning_input, plan_frames).
    assert not {"pyspark", "deltalake"} & set(modules)


def test_a_session_on_sail_in_this_process_is_embedded(spark: SparkSession) -> None:
    assert embedded(spark)


def test_a_session_given_a_remote_is_not_embedded() -> None:
    # A live server, stopped only after its session: a client session left to a server that is gone blocks
    # retrying when it is finally collected (it once hung a later query's UDF thread in CI).
    server = SparkConnectServer(port=0)
    server.start(background=True)
    try:
        assert server.listening_address is not None
        with spark_session(f"sc://localhost:{server.listening_address[1]}") as remote:
            assert not embedded(remote)
    finally:
        server.stop()
