"""Plan worker processes start warm: the planner loaded and the heap left by imports frozen out of the collector's
way, so planning a group never rescans pandas', pyspark's and scipy's objects."""

from __future__ import annotations

import gc
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor

from jobs.pipeline.workers import release_pools, start_worker, worker_pool


def _worker_facts() -> tuple[int, bool]:
    return gc.get_freeze_count(), "scipy.optimize" in sys.modules


def test_a_plan_worker_freezes_its_heap_after_loading_the_planner() -> None:
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), initializer=start_worker) as pool:
        frozen, milp_loaded = pool.submit(_worker_facts).result(timeout=120)
    assert milp_loaded  # the warm-up reached the lazily imported MILP, so its modules are frozen too
    assert frozen > 10_000


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
