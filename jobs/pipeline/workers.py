"""Worker processes for CPU-bound group work (planning, baselines) off an in-process engine's GIL."""

from __future__ import annotations

import gc
import importlib
import multiprocessing
import os
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, wait
from contextlib import contextmanager

from assignor import AssignmentConfigs, ClientState, GroupState, TaskId, plan_group
from jobs.processes import die_with_parent

_pools: dict[int, ProcessPoolExecutor] = {}
_pools_lock = threading.Lock()


def _warm_up_planner() -> None:
    """Plan one tiny group whose unequal capacities reach the MILP too, so every lazily imported module (scipy's
    HiGHS among them) is loaded before the worker freezes the heap."""
    tasks = frozenset({TaskId(0, 0), TaskId(0, 1), TaskId(0, 2)})
    clients = [ClientState("a", capacity=2, previous_active=tasks), ClientState("b")]
    plan_group(GroupState(clients, tasks, frozenset(), dict.fromkeys(tasks, 100_000)), AssignmentConfigs())


def start_worker() -> None:
    """A worker process's initializer: die with the parent; load and warm up the planner; then gc.freeze() so the
    collector never rescans what the imports left (pandas, pyspark, scipy: hundreds of thousands of objects)
    while the worker plans. Planning allocates many short-lived containers, and each full collection would
    otherwise walk the whole imported heap."""
    die_with_parent()
    # What the workers run (the plan stage's functions) pulls in pyarrow, pandas and pyspark's types: import it
    # here, before the freeze, rather than on the first job (by name: the plan stage imports this module).
    importlib.import_module("jobs.pipeline.plan")

    _warm_up_planner()
    gc.collect()
    gc.freeze()


@contextmanager
def _main_script_hidden() -> Iterator[None]:
    """While workers start: a spawned child re-runs the parent's ``__main__`` (multiprocessing does, for a main
    with a file or a module name), which for a benchmark script or Airflow's CLI means seconds of imports the
    workers never use (the benchmark's: Great Expectations, ~15 s per 1,000 groups planned). The workers need
    only what start_worker imports."""
    main = sys.modules["__main__"]
    saved = {k: main.__dict__.pop(k) for k in ("__file__",) if k in main.__dict__}
    spec = getattr(main, "__spec__", None)
    main.__spec__ = None
    try:
        yield
    finally:
        main.__dict__.update(saved)
        main.__spec__ = spec


def _ready() -> int:
    return os.getpid()


def worker_pool(processes: int) -> ProcessPoolExecutor:
    """Worker processes (one pool per size) that run CPU-bound group work off the engine's GIL; all started at
    once, here, so none re-runs the parent's main script (see _main_script_hidden)."""
    with _pools_lock:
        if processes not in _pools:
            # spawn, not fork: the engine's threads are running in this process.
            pool = ProcessPoolExecutor(
                processes, mp_context=multiprocessing.get_context("spawn"), initializer=start_worker
            )
            with _main_script_hidden():
                # A spawn pool starts a worker per submit while none is idle: n submits at once start all n.
                started = [pool.submit(_ready) for _ in range(processes)]
            wait(started)
            _pools[processes] = pool
        return _pools[processes]


def release_pools() -> None:
    """Stop every worker pool: a stage that has finished with its workers gives their memory (~0.3 GB each)
    back to the stages after it; the next worker_pool call starts new ones."""
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.shutdown(wait=True, cancel_futures=True)
