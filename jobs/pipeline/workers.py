"""Worker processes for CPU-bound group work (planning, baselines) off an in-process engine's GIL."""

from __future__ import annotations

import gc
import importlib
import importlib.abc
import multiprocessing
import os
import queue
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

import pyarrow as pa

from assignor import AssignmentConfigs, ClientState, GroupState, TaskId, plan_group
from jobs.processes import die_with_parent, main_script_hidden

_pools: dict[int, _Pool] = {}
_pools_lock = threading.Lock()
_GEN0_THRESHOLD = 50_000
T = TypeVar("T")


def _warm_up_planner() -> None:
    """Plan one tiny group whose unequal capacities reach the MILP too, so every lazily imported module (scipy's
    HiGHS among them) is loaded before the worker freezes the heap."""
    tasks = frozenset({TaskId(0, 0), TaskId(0, 1), TaskId(0, 2)})
    clients = [ClientState("a", capacity=2, previous_active=tasks), ClientState("b")]
    plan_group(GroupState(clients, tasks, frozenset(), dict.fromkeys(tasks, 100_000)), AssignmentConfigs())


class _NoPandas(importlib.abc.MetaPathFinder):
    """Refuses pandas while installed (see _pyarrow_lists_as_lists)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> None:
        if fullname.partition(".")[0] == "pandas":
            raise ModuleNotFoundError("pandas is refused while pyarrow looks for it", name=fullname)


def _pyarrow_lists_as_lists() -> None:
    """pyarrow imports pandas on its first list-to-array conversion, only to ask whether the list is a pandas object:
    ~0.9 s of CPU per worker, for a library planning never uses. Refused that once, pyarrow takes lists as lists
    from then on; code that does want pandas can still import it."""
    if "pandas" in sys.modules:
        return
    refusal = _NoPandas()
    sys.meta_path.insert(0, refusal)
    try:
        pa.array([0])
    finally:
        sys.meta_path.remove(refusal)


def start_worker() -> None:
    """A worker process's initializer: die with the parent; load and warm up the planner; then gc.freeze() so the
    collector never rescans what the imports left (pyarrow, numpy, scipy: hundreds of thousands of objects)
    while the worker plans. Planning allocates many short-lived containers, and each full collection would
    otherwise walk the whole imported heap."""
    die_with_parent()
    _pyarrow_lists_as_lists()
    # What the workers run (the plan record's functions) pulls in pyarrow: import it here, before the freeze,
    # rather than on the first job (by name: only the workers need it, not every importer of this module). No
    # engine (the stage's frames live apart) and no pandas: planning uses neither.
    importlib.import_module("jobs.pipeline.plan_record")

    _warm_up_planner()
    gc.collect()
    gc.freeze()
    # A group's planning allocates tens of thousands of short-lived containers and frees them all: at the
    # default threshold (700) the collector runs dozens of times per group for nothing (~5 % of a worker's CPU).
    gc.set_threshold(_GEN0_THRESHOLD, 20, 20)


def _ready() -> int:
    return os.getpid()


@dataclass(frozen=True)
class _Pool:
    executor: ProcessPoolExecutor
    owner: threading.Thread
    release: threading.Event


def _new_pool(processes: int) -> ProcessPoolExecutor:
    # spawn, not fork: the engine's threads are running in this process.
    return ProcessPoolExecutor(processes, mp_context=multiprocessing.get_context("spawn"), initializer=start_worker)


def _own_pool(processes: int, made: queue.Queue[ProcessPoolExecutor | BaseException], release: threading.Event) -> None:
    """The owner thread's body: start the workers, hand the pool over, live until the pool is released."""
    pool = None
    try:
        pool = _new_pool(processes)
        with main_script_hidden():
            # A spawn pool starts a worker per submit while none is idle: n submits at once start all n, each
            # handed its start-up data (the hidden main script) before submit returns.
            for _ in range(processes):
                pool.submit(_ready)
    except BaseException as err:  # the caller raises it; workers already started stop
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        made.put(err)
        return
    made.put(pool)
    release.wait()


def worker_pool(processes: int) -> ProcessPoolExecutor:
    """Worker processes (one pool per size) that run CPU-bound group work off the engine's GIL. Returns once they
    are started, not ready: jobs queue behind their imports, so a stage may call this early to have them warm
    by the time it has work.

    The workers are started from a thread of their own that lives until release_pools: the kernel's parent-death
    signal (see start_worker) fires when the *thread* that started a child ends, and the first call may come from
    an engine thread that ends before the pool does."""
    with _pools_lock:
        if processes not in _pools:
            made: queue.Queue[ProcessPoolExecutor | BaseException] = queue.Queue(maxsize=1)
            release = threading.Event()
            owner = threading.Thread(
                target=_own_pool, args=(processes, made, release), name=f"worker-pool-{processes}", daemon=True
            )
            owner.start()
            pool = made.get()
            if isinstance(pool, BaseException):
                raise pool
            _pools[processes] = _Pool(pool, owner, release)
        return _pools[processes].executor


def release_pools() -> None:
    """Stop every worker pool: a stage that has finished with its workers gives their memory (~0.3 GB each)
    back to the stages after it; the next worker_pool call starts new ones."""
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        _stop(pool)


def _stop(pool: _Pool) -> None:
    pool.executor.shutdown(wait=True, cancel_futures=True)
    pool.release.set()
    pool.owner.join()


def run_on_workers(processes: int, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in the shared pool of ``processes`` workers. A worker that dies (killed for memory, crashed)
    breaks the pool and every job in it: the pool is dropped, so the next call starts fresh workers, and
    BrokenProcessPool is raised for the caller to find out with run_alone which job it was."""
    return run_each_on_workers(processes, fn, [args])[0]


def run_each_on_workers(processes: int, fn: Callable[..., T], jobs: Sequence[tuple[Any, ...]]) -> list[T]:
    """``fn(*args)`` for each ``args`` of ``jobs``, all queued at once in the shared pool of ``processes`` workers;
    the results in the jobs' order. A worker's death is handled as in run_on_workers."""
    executor = worker_pool(processes)
    try:
        futures = [executor.submit(fn, *args) for args in jobs]
        return [future.result() for future in futures]
    except BrokenProcessPool:
        with _pools_lock:
            pool = _pools.get(processes)
            if pool is None or pool.executor is not executor:
                raise  # another caller has dropped it already
            del _pools[processes]
        _stop(pool)
        raise


@dataclass(frozen=True)
class WorkerDied:
    """What run_alone returns for a job whose worker died while it ran alone: the job itself killed it."""


def run_alone(jobs: Sequence[tuple[Callable[..., T], tuple[Any, ...]]]) -> list[T | WorkerDied]:
    """Each ``(fn, args)`` job in turn in a private one-worker pool, started afresh after a job kills its worker:
    with nothing else in that pool, a death is that job's doing. Slow (one worker), for the rare call whose
    shared pool broke; the workers are started, and stopped, by the calling thread (see worker_pool)."""
    results: list[T | WorkerDied] = []
    pool: ProcessPoolExecutor | None = None
    try:
        for fn, args in jobs:
            if pool is None:
                with main_script_hidden():
                    pool = _new_pool(1)
                    pool.submit(_ready)
            try:
                results.append(pool.submit(fn, *args).result())
            except BrokenProcessPool:
                results.append(WorkerDied())
                pool.shutdown(wait=True)
                pool = None
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    return results
