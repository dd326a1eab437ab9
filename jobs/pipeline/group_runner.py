"""One runner for CPU-bound per-group work (planning, baselines): groups dealt into engine calls by a hash of their
id, each call's groups handed to worker processes off an in-process engine's GIL, and a group whose work kills its
worker answered for alone, so it costs only itself."""

from __future__ import annotations

import logging
import math
import os
import threading
from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Generic, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as sf

from jobs.pipeline.workers import WorkerDied, run_alone, run_each_on_workers

log = logging.getLogger(__name__)

GROUPS_PER_CALL = 32  # groups one engine call hands over: see run_groups
_CALL = "group_call"
_PROGRESS_EVERY = 1_000
C = TypeVar("C")


@dataclass(frozen=True)
class GroupWork(Generic[C]):
    """What a runner does with one call's groups. ``run(rows, context)``: several groups' rows in, their output
    table out, in whichever process runs it (a module function, and a picklable context: workers get both);
    ``context(group_ids)``: what ``run`` needs beside the rows, built where the engine calls; ``died(rows,
    context)``: the output for one group whose work killed its worker while it ran alone; ``done``: the verb the
    progress log uses ("planned")."""

    run: Callable[[pa.Table, C], pa.Table]
    context: Callable[[list[str]], C]
    died: Callable[[pa.Table, C], pa.Table]
    done: str


def group_udf(work: GroupWork[C], processes: int) -> Callable[[pa.Table], pa.Table]:
    """The applyInArrow function running ``work`` on each call's groups, on ``processes`` workers when > 1."""
    driver = os.getpid()

    def run_call(rows: pa.Table) -> pa.Table:
        ids = [str(g) for g in pc.unique(rows.column("group_id")).to_pylist()]
        context = work.context(ids)
        if processes > 1 and os.getpid() == driver:
            # An in-process engine (Sail) calls this from several threads under one GIL: the work is CPU-bound
            # Python, so each call hands its groups to a worker process and waits without the GIL.
            # Cut into a part per worker, all queued at once: a worker never waits for the engine to hand over the
            # next call, and the last calls of a partition still use every worker (the engine's partitions rarely
            # end together: hashing deals them unequal shares of the calls).
            parts = split_groups(rows, ids, processes)
            try:
                out = pa.concat_tables(run_each_on_workers(processes, work.run, [(part, context) for part in parts]))
            except BrokenProcessPool:
                out = each_alone(work, rows, context)
        else:  # a Python worker process of a JVM engine: already one process per core
            out = work.run(rows, context)
        _count_done(work.done, len(ids))
        return out

    return run_call


def split_groups(rows: pa.Table, ids: list[str], parts: int) -> list[pa.Table]:
    """``rows`` cut into at most ``parts`` tables of whole groups (``ids``: the groups' ids), as many groups each as
    can be."""
    if parts <= 1 or len(ids) <= 1:
        return [rows]
    column = rows.column("group_id")
    shares = [ids[i::parts] for i in range(min(parts, len(ids)))]
    return [rows.filter(pc.is_in(column, value_set=pa.array(share, type=column.type))) for share in shares]


def each_alone(work: GroupWork[C], rows: pa.Table, context: C) -> pa.Table:
    """A call whose worker died: each of its groups run alone in a worker of its own, so only a group that kills
    its worker (memory, a crash) gets ``work.died``'s output, and the rest are run as ever."""
    ids = pc.unique(rows.column("group_id"))
    parts = [rows.filter(pc.equal(rows.column("group_id"), group_id)) for group_id in ids]
    log.warning("a worker died during a call of %d groups: running each of them alone", len(parts))
    outcomes = run_alone([(work.run, (part, context)) for part in parts])
    return pa.concat_tables(
        [
            work.died(part, context) if isinstance(outcome, WorkerDied) else outcome
            for part, outcome in zip(parts, outcomes, strict=True)
        ]
    )


def calls_for(groups: int) -> int:
    """Engine calls for about ``groups`` groups: a call per group costs more handing the group over (to the UDF,
    to a worker and back) than the work itself under Sail, so each call takes about GROUPS_PER_CALL groups."""
    return max(1, math.ceil(groups / GROUPS_PER_CALL))


def run_groups(inputs: DataFrame, udf: Callable[[pa.Table], pa.Table], ddl: str, calls: int) -> DataFrame:
    """``udf``'s rows (``ddl``) for every group of ``inputs``, the groups dealt by a hash of their id into ``calls``
    engine calls (see calls_for)."""
    call = sf.pmod(sf.xxhash64("group_id"), sf.lit(max(1, calls))).alias(_CALL)
    return inputs.select("*", call).groupBy(_CALL).applyInArrow(udf, ddl)


class _Progress:
    """Groups done by this run in this process, logged every _PROGRESS_EVERY (engine threads add concurrently)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = 0

    def restart(self) -> None:
        with self._lock:
            self._done = 0

    def add(self, verb: str, groups: int) -> None:
        with self._lock:
            before = self._done
            self._done = after = before + groups
        if before // _PROGRESS_EVERY != after // _PROGRESS_EVERY:
            log.info("%s %d groups", verb, after // _PROGRESS_EVERY * _PROGRESS_EVERY)


_progress = _Progress()


def restart_progress() -> None:
    """Count from zero: a process may run a stage more than once (the benchmark, tests)."""
    _progress.restart()


def _count_done(verb: str, groups: int) -> None:
    # A module function, not the object: the UDF's closure is pickled with the globals it names, a lock can't be.
    _progress.add(verb, groups)
