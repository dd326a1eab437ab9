"""Wall time of one assign_high_availability call on large groups: median of 5 runs, JSON lines and a table.

Each group is a balanced, running group that has just gained one instance (the common scale-out case):
previous actives report LATEST_OFFSET, standbys lag a little, every changelog is far beyond the
acceptable recovery lag so that every move needs a warmup.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import statistics
import time
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from assignor import (
    LATEST_OFFSET,
    AssignmentConfigs,
    ClientState,
    GroupAssignment,
    GroupState,
    TaskId,
    assign_high_availability,
)


@dataclass(frozen=True)
class Case:
    name: str
    tasks: int
    clients: int
    standbys: int
    subtopologies: int = 10


CASES = (
    Case("1k tasks x 100 clients, 1 standby", 1_000, 100, 1),
    Case("6k tasks x 2 clients", 6_000, 2, 0),
    Case("10k tasks x 1k clients", 10_000, 1_000, 0),
    Case("100k tasks x 100 clients", 100_000, 100, 0),
)


def build(case: Case, seed: int = 7) -> tuple[GroupState, AssignmentConfigs]:
    """A running group of ``clients - 1`` instances plus one that just joined."""
    rng = random.Random(seed)
    per_sub = case.tasks // case.subtopologies
    tasks = [TaskId(s, p) for s in range(case.subtopologies) for p in range(per_sub)]
    ends = {t: rng.randint(1_000_000, 5_000_000) for t in tasks}
    old = [f"instance-{i:04d}" for i in range(case.clients - 1)] or ["instance-0000"]
    active: dict[str, set[TaskId]] = {p: set() for p in old}
    standby: dict[str, set[TaskId]] = {p: set() for p in old}
    for i, task in enumerate(tasks):
        active[old[i % len(old)]].add(task)
        for r in range(1, min(case.standbys, len(old) - 1) + 1):
            standby[old[(i + r) % len(old)]].add(task)
    clients = []
    for pid in old:
        sums = {t: LATEST_OFFSET for t in active[pid]}
        sums.update({t: ends[t] - rng.randint(0, 20_000) for t in standby[pid]})
        clients.append(ClientState(pid, 1, frozenset(active[pid]), frozenset(standby[pid]), sums))
    if case.clients > 1:
        clients.append(ClientState("instance-new"))
    group = GroupState(clients, frozenset(tasks), frozenset(), ends)
    return group, AssignmentConfigs(num_standby_replicas=case.standbys)


def _timed(group: GroupState, configs: AssignmentConfigs, repeats: int) -> tuple[list[float], GroupAssignment]:
    times = []
    assignment = assign_high_availability(group, configs)
    for _ in range(repeats):
        start = time.perf_counter()
        assignment = assign_high_availability(group, configs)
        times.append(time.perf_counter() - start)
    return times, assignment


def run(case: Case, repeats: int) -> dict[str, object]:
    group, configs = build(case)
    times, assignment = _timed(group, configs, repeats)
    # A long-running leader keeps its long-lived objects out of the collector's way; gc.freeze() shows
    # the assignor's own cost without rescans of the (huge) input.
    gc.collect()
    gc.freeze()
    try:
        frozen, _ = _timed(group, configs, repeats)
    finally:
        gc.unfreeze()
    return {
        "bench": "assign_high_availability",
        "case": case.name,
        "tasks": case.tasks,
        "clients": case.clients,
        "standbys": case.standbys,
        "median_s": round(statistics.median(times), 4),
        "min_s": round(min(times), 4),
        "max_s": round(max(times), 4),
        "runs": repeats,
        "median_s_input_frozen": round(statistics.median(frozen), 4),
        "probing_rebalance_needed": assignment.probing_rebalance_needed,
        "warmups": sum(len(c.warmup) for c in assignment.clients.values()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rows = [run(case, args.repeats) for case in CASES]
    for row in rows:
        print(json.dumps(row))
    table = Table(title=f"assign_high_availability, median of {args.repeats} runs after a warm-up (goal: < 1 s each)")
    for column in ("case", "median s", "min s", "max s", "median s, input frozen", "warmups", "under 1 s"):
        table.add_column(column, justify="left" if column == "case" else "right")
    for row in rows:
        median = float(row["median_s"])  # type: ignore[arg-type]
        table.add_row(
            str(row["case"]),
            f"{median:.3f}",
            f"{row['min_s']:.3f}",
            f"{row['max_s']:.3f}",
            f"{row['median_s_input_frozen']:.3f}",
            str(row["warmups"]),
            "yes" if median < 1 else "NO",
        )
    Console().print(table)


if __name__ == "__main__":
    main()
