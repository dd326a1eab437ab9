"""The lakehouse pipeline at fleet scale: lags, plan and validate on an engine vs a plain loop.

A synthetic fleet (groups x 64 stateful tasks x 6 instances, 1 standby; settled, restarted, scaled-out and
skewed groups with log-normal changelogs and exponential replica lags) is written straight into the bronze
tables; then each stage is timed, on embedded Sail or on Apache Spark with delta-spark (``--engine spark``: a
local Spark Connect server, or ``--remote sc://...``). The floor is the same plan_group calls in one plain
Python loop, timed before the stages and again after them (the machine's speed drifts; the ratio is to the mean).
Prints JSON lines (with peak memory), then a table. Goals (2-core machine): 10,000 groups through
lags, plan and validate within 60 s; pipeline / floor at most 0.75 at 10,000 and 100,000 groups (issue 35: the
stages use both cores; the floor is one); 100,000 groups within 4 GB.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import logging
import os
import random
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import psutil
from rich.console import Console
from rich.table import Table

from assignor import AssignmentConfigs, ClientState, GroupState, TaskId, plan_group
from jobs.lakehouse.engine import spark_session
from jobs.lakehouse.lake import Lake
from jobs.local.spark_connect import LocalSparkConnect
from jobs.local.synthetic import SyntheticGroup, fleet_end_offsets, fleet_partitions, fleet_records, synthetic_group
from jobs.pipeline.broker_reads import BrokerState
from jobs.pipeline.extract import write_snapshot
from jobs.pipeline.intake import intake_records
from jobs.pipeline.lags import run_lags
from jobs.pipeline.plan import run_plan
from jobs.pipeline.stage import StageResult
from jobs.pipeline.validate import run_validate
from jobs.settings import Kip441Settings, Settings

CAPTURED_AT = 1_700_000_000_000
GOAL_SECONDS, GOAL_RATIO, GOAL_PEAK_MB = 60.0, 0.75, 4096
CHUNK_GROUPS = 5_000


def group_states(fleet: list[SyntheticGroup]) -> list[GroupState]:
    """The planner's input per group, built in plain Python from the same reports and end offsets."""
    states = []
    for g in fleet:
        ends: dict[TaskId, int] = {}
        for (topic, partition), end in g.end_offsets.items():
            sub = int(topic.rsplit("-store", 1)[1].split("-", 1)[0])
            ends[TaskId(sub, partition)] = ends.get(TaskId(sub, partition), 0) + end
        clients = [
            ClientState(
                r.process_id,
                capacity=r.capacity,
                previous_active=frozenset(r.active_tasks),
                previous_standby=frozenset(r.standby_tasks + r.warmup_tasks),
                task_offset_sums=r.task_offset_sums,
            )
            for r in g.reports
        ]
        states.append(GroupState(clients=clients, stateful_tasks=frozenset(ends), changelog_end_offset_sums=ends))
    return states


def floor(states: list[GroupState], configs: AssignmentConfigs) -> float:
    """Seconds for plan_group over every group in one loop."""
    start = time.perf_counter()
    for state in states:
        plan_group(state, configs)
    return time.perf_counter() - start


def timed(run: Callable[[], StageResult]) -> tuple[StageResult, float]:
    start = time.perf_counter()
    result = run()
    return result, time.perf_counter() - start


def load() -> float:
    """The 1-minute load average: other work on the machine skews every number here, so each row says it."""
    return round(os.getloadavg()[0], 2)


def rss_mb() -> float:
    """Resident memory of this process now, in MiB: after each stage, it shows which one holds on to memory."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def stage_row(stage: str, rows: int, seconds: float, tree_peak_mb: float) -> dict[str, Any]:
    """One stage's row, with the load, this process's RSS right after it and the process tree's peak during it."""
    return {
        "stage": stage, "rows": rows, "seconds": seconds, "load": load(), "rss_mb": rss_mb(),
        "tree_peak_mb": tree_peak_mb,
    }  # fmt: skip


class TreePeak:
    """The resident memory of this process and every live descendant (the in-process engine is in this process; the
    planner workers are children), summed and sampled every ``interval`` seconds on a thread; ``take`` returns the
    largest sum since the last ``take``. getrusage cannot give this: a forked child reports its parent's pages."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self._peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tree-peak", daemon=True)

    def _sample(self) -> int:
        me = psutil.Process()
        total = int(me.memory_info().rss)
        for child in me.children(recursive=True):
            with suppress(psutil.Error):  # gone between listing and reading
                total += int(child.memory_info().rss)
        return total

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._peak = max(self._peak, self._sample())

    def take(self) -> float:
        """The peak in MiB since the last take (or the start), this moment included; then start afresh."""
        peak, self._peak = max(self._peak, self._sample()), 0
        return round(peak / 2**20, 1)

    def __enter__(self) -> TreePeak:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()


@contextmanager
def lake_dir(keep: Path | None, groups: int) -> Iterator[Path]:
    """``keep``/<groups> (left for inspection) or a temporary folder."""
    if keep is not None:
        folder = keep / f"{groups}-groups"
        folder.mkdir(parents=True, exist_ok=True)
        yield folder
        return
    with tempfile.TemporaryDirectory(prefix="pipeline-bench-") as tmp:
        yield Path(tmp)


def write_fleet(
    lake_root: Path, remote: str | None, groups: int, seed: int, console: Console, configs: AssignmentConfigs | None
) -> float:
    """Build the synthetic fleet and write its bronze CHUNK_GROUPS groups at a time (the same groups as
    synthetic_fleet, from one generator), each chunk in a session of its own: a Spark Connect session keeps the
    local data it was sent (pyspark caches large local relations on the server) until it ends, so one session
    would hold the whole fleet. Each chunk's plain-loop floor is timed while it is in memory; returns the floor's
    seconds (0 without ``configs``)."""
    rng = random.Random(seed)
    floor_s, written_s = 0.0, 0.0
    for first in range(0, groups, CHUNK_GROUPS):
        chunk = [synthetic_group(f"g{i:05d}", rng) for i in range(first, min(groups, first + CHUNK_GROUPS))]
        intake = intake_records(fleet_records(chunk), fleet_partitions(chunk), CAPTURED_AT, 10**13)
        start = time.perf_counter()
        with spark_session(remote) as spark:
            state = BrokerState(fleet_partitions(chunk), fleet_end_offsets(chunk), {})
            write_snapshot(Lake(spark, lake_root), "bench", CAPTURED_AT, intake, state)
        written_s += time.perf_counter() - start
        if configs is not None:
            floor_s += floor(group_states(chunk), configs)
        console.log(f"{first + len(chunk):,} of {groups:,} groups written; RSS {rss_mb():,.0f} MiB")
    del chunk, intake
    console.log(f"{groups:,} groups: bronze written in {written_s:.1f} s; RSS {rss_mb():,.0f} MiB")
    release_memory()
    console.log(f"RSS {rss_mb():,.0f} MiB once the fleet's freed memory is handed back")
    return floor_s


def floor_again(groups: int, seed: int, configs: AssignmentConfigs, console: Console) -> float:
    """The floor timed once more on the same fleet (the same generator, CHUNK_GROUPS groups at a time), after the
    stages: the machine's speed drifts by several percent within an hour, so a floor timed only before the stages
    can stand for a different machine than the one that ran them."""
    rng = random.Random(seed)
    seconds = 0.0
    for first in range(0, groups, CHUNK_GROUPS):
        chunk = [synthetic_group(f"g{i:05d}", rng) for i in range(first, min(groups, first + CHUNK_GROUPS))]
        seconds += floor(group_states(chunk), configs)
        console.log(f"floor again: {first + len(chunk):,} of {groups:,} groups")
    return seconds


def release_memory() -> None:
    """Hand the heap's free pages back to the system: the fleet's objects are gone once bronze is written, but
    glibc keeps the freed memory of its many arenas (Python's and the in-process engine's threads') mapped."""
    gc.collect()
    with suppress(OSError, AttributeError):  # not glibc: nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def bench(
    groups: int,
    seed: int,
    console: Console,
    skip_floor: bool,
    remote: str | None,
    keep: Path | None,
    bucket_groups: int | None = None,
    floor_once: bool = False,
) -> list[dict[str, Any]]:
    """Time lags, plan and validate for one fleet size on the engine at ``remote`` (None: Sail), and the floor
    before and after them (``floor_once``: before only); the ratio is to the floors' mean."""
    rows: list[dict[str, Any]] = []
    with lake_dir(keep, groups) as tmp:
        settings = Settings(lake_root=tmp / "lake", kip441=Kip441Settings(num_standby_replicas=1))
        if bucket_groups is not None:
            settings = settings.model_copy(update={"stage_bucket_groups": bucket_groups})
        configs = None if skip_floor else settings.kip441.configs()
        with TreePeak() as tree:
            floor_s = write_fleet(settings.lake_root, remote, groups, seed, console, configs)
            floor_load = load()
            fleet_peak = tree.take()
            with spark_session(remote) as spark:
                lake = Lake(spark, settings.lake_root)
                lags, lag_s = timed(lambda: run_lags(lake, settings, "bench"))
                rows.append(stage_row("lags", lags.outcomes[0].inserted, lag_s, tree.take()))
                console.log(f"lags: {lag_s:.1f} s, tree peak {rows[-1]['tree_peak_mb']:,.0f} MiB")
                plan, plan_s = timed(lambda: run_plan(lake, settings, "bench"))
                rows.append(stage_row("plan", plan.outcomes[0].inserted, plan_s, tree.take()))
                peak = rows[-1]["tree_peak_mb"]
                console.log(f"plan: {plan_s:.1f} s ({dict(plan.counts)}), tree peak {peak:,.0f} MiB")
                validate, validate_s = timed(lambda: run_validate(lake, settings, "bench"))
                rows.append(stage_row("validate", sum(validate.counts.values()), validate_s, tree.take()))
                peak = rows[-1]["tree_peak_mb"]
                console.log(f"validate: {validate_s:.1f} s ({dict(validate.counts)}), tree peak {peak:,.0f} MiB")
                assignments = plan.outcomes[1].inserted
    floors = [(floor_s, floor_load)]
    if configs is not None and not floor_once:
        after_s = floor_again(groups, seed, configs, console)
        floors.append((after_s, load()))
    total = lag_s + plan_s + validate_s
    rows.append({"stage": "lags+plan+validate", "rows": groups, "seconds": total, "goal_s": GOAL_SECONDS})
    stages_peak = max(r.get("tree_peak_mb", 0.0) for r in rows)
    # The goal is the stages' memory; building and writing the synthetic fleet is the benchmark's own work.
    rows.append(
        {"stage": "peak memory (MiB)", "peak_rss_mb": stages_peak, "fleet_peak_mb": fleet_peak, "goal_mb": GOAL_PEAK_MB}
    )
    if not skip_floor:
        for when, (seconds, at_load) in zip(("before", "after"), floors, strict=False):
            rows.append({"stage": f"floor {when} the stages", "rows": groups, "seconds": seconds, "load": at_load})
        floor_s = sum(seconds for seconds, _ in floors) / len(floors)
        rows.append({"stage": "floor (plain loop)", "rows": groups, "seconds": floor_s, "floors": len(floors)})
        rows.append({"stage": "ratio plan/floor", "ratio": plan_s / floor_s})
        rows.append({"stage": "ratio pipeline/floor", "ratio": total / floor_s, "goal": GOAL_RATIO})
    for row in rows:
        row["groups"] = groups
        row["engine"] = "sail" if remote is None else "spark"
        row["plan_assignments"] = assignments
        row["bucket_groups"] = settings.stage_bucket_groups
        if "seconds" in row:
            row["rows_per_s"] = row["rows"] / row["seconds"] if row["seconds"] else None
    return rows


@contextmanager
def engine(name: str, remote: str | None, driver_memory_mb: int, console: Console) -> Iterator[str | None]:
    """The Spark Connect address to run on: None for embedded Sail, else ``remote`` or a local server's."""
    if name == "sail":
        yield None
    elif remote:
        yield remote
    else:
        with LocalSparkConnect(driver_memory_mb=driver_memory_mb) as started:
            console.log(f"Apache Spark Connect with Delta on {started}")
            yield started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, nargs="+", default=[1_000, 10_000], help="fleet sizes")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--skip-floor", action="store_true", help="do not time the plain-loop floor")
    parser.add_argument(
        "--floor-once", action="store_true", help="time the floor before the stages only, not again after them"
    )
    parser.add_argument("--engine", choices=("sail", "spark"), default="sail", help="embedded Sail or Apache Spark")
    parser.add_argument("--remote", help="with --engine spark: an existing Spark Connect server (default: start one)")
    parser.add_argument("--lake", type=Path, help="keep each fleet's lake under this folder for inspection")
    parser.add_argument("--bucket-groups", type=int, help="groups per bucket in each stage (default: the setting's)")
    # The synthetic fleet reaches the server as local data, held in the driver's heap while bronze is written:
    # 1 GB runs out at 10,000 groups.
    parser.add_argument(
        "--driver-memory-mb", type=int, default=1024, help="with --engine spark, no --remote: the local server's heap"
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    console = Console(stderr=True)
    results = []
    with engine(args.engine, args.remote, args.driver_memory_mb, console) as remote:
        for groups in args.groups:
            rows = bench(
                groups, args.seed, console, args.skip_floor, remote, args.lake, args.bucket_groups, args.floor_once
            )
            for row in rows:
                print(json.dumps({"bench": "pipeline", **row}), flush=True)
                results.append(row)
    name = "embedded Sail" if args.engine == "sail" else "Apache Spark with delta-spark"
    table = Table(title=f"pipeline on {name} vs plan_group in a plain loop")
    for column in ("groups", "stage", "rows", "seconds", "rows/s", "ratio", "load avg"):
        table.add_column(column, justify="left" if column == "stage" else "right")
    for r in results:
        table.add_row(
            f"{r['groups']:,}",
            r["stage"],
            f"{r['rows']:,}" if "rows" in r else "",
            f"{r['seconds']:.1f}" if "seconds" in r else "",
            f"{r['rows_per_s']:,.0f}" if r.get("rows_per_s") else "",
            f"{r['ratio']:.2f}" if "ratio" in r else (f"{r['peak_rss_mb']:,.0f}" if "peak_rss_mb" in r else ""),
            f"{r['load']:.1f}" if "load" in r else "",
        )
    out = Console(width=120)  # wide enough not to wrap when stdout is a file
    out.print(table)
    out.print(
        f"goals: lags+plan+validate <= {GOAL_SECONDS:.0f} s for 10,000 groups; pipeline/floor <= {GOAL_RATIO}; "
        f"peak memory <= {GOAL_PEAK_MB:,} MiB for 100,000 groups "
        "(the process tree during the stages: this one with Sail in it, planner workers, a local Spark server's JVM)"
    )


if __name__ == "__main__":
    main()
