"""Plan worker processes start warm: the planner loaded and the heap left by imports frozen out of the collector's
way, so planning a group never rescans pandas', pyspark's and scipy's objects."""

from __future__ import annotations

import gc
import multiprocessing
import sys
from concurrent.futures import ProcessPoolExecutor

from jobs.pipeline.workers import start_worker


def _worker_facts() -> tuple[int, bool]:
    return gc.get_freeze_count(), "scipy.optimize" in sys.modules


def test_a_plan_worker_freezes_its_heap_after_loading_the_planner() -> None:
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"), initializer=start_worker) as pool:
        frozen, milp_loaded = pool.submit(_worker_facts).result(timeout=120)
    assert milp_loaded  # the warm-up reached the lazily imported MILP, so its modules are frozen too
    assert frozen > 10_000
