"""Planner vs the KIP-441 baseline over seeded scenario families: JSON lines, a table and an HTML report.

For every group the baseline is replayed with the simulator (full catch-up) until it stops probing; the
planner's figures are its plan's metrics. Also times plan_group (median wall time) on groups of 64 tasks x 6
clients, 1,000 x 100 and 10,000 x 1,000, each with 1 standby; every timing row records the load average, since
other work on the machine skews the timings (``--speed`` runs only those).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console
from rich.progress import track
from rich.table import Table

from assignor import (
    CORE_BUILD,
    LATEST_OFFSET,
    AssignmentConfigs,
    ClientState,
    GroupState,
    TaskId,
    assign_high_availability,
    plan_group,
)
from assignor.baselines import baseline_cost
from assignor.simulation import catch_up_fully
from jobs.report.bench_page import Figures, render_bench_page
from jobs.report.charts import Chart, grouped_bars
from jobs.report.model import Assignor

sys.path.insert(0, str(Path(__file__).parent))
from assignor_bench import Case, build

METRICS = ("moves", "warmups", "rounds", "restore_offsets")


@dataclass(frozen=True)
class Outcome:
    family: str
    seed: int
    baseline: dict[str, int]
    broker: dict[str, int]  # Kafka's broker-side streams assignment (KIP-1071), replayed like the baseline
    planner: dict[str, int]
    lower_bound: int
    seconds: float
    restore_lower_bound: int = 0  # GroupPlan.restore_lower_bound: what any assignment must restore


def _tasks(rng: random.Random, subs: int, per_sub: tuple[int, int]) -> list[TaskId]:
    return [TaskId(s, p) for s in range(subs) for p in range(rng.randint(*per_sub))]


def _settled(
    rng: random.Random, n: int, configs: AssignmentConfigs, *, capacities: tuple[int, ...] = (1,), zones: int = 0
) -> GroupState:
    """A group that has run for a while under the planner: everything caught up, nothing pending."""
    tasks = _tasks(rng, rng.randint(1, 3), (4, 24))
    ends = {t: rng.randint(50_000, 5_000_000) for t in tasks}
    clients = [
        ClientState(
            f"i{i:02d}",
            capacity=rng.choice(capacities),
            client_tags={"zone": f"z{i % zones}"} if zones else {},
        )
        for i in range(n)
    ]
    empty = GroupState(clients, frozenset(tasks), frozenset(), ends)
    return catch_up_fully(empty, plan_group(empty, configs).target)


def scale_out(rng: random.Random) -> tuple[GroupState, AssignmentConfigs]:
    configs = AssignmentConfigs(num_standby_replicas=rng.choice((0, 1)))
    group = _settled(rng, rng.randint(2, 9), configs)
    return replace(group, clients=(*group.clients, ClientState("new"))), configs


def scale_out_uniform(rng: random.Random) -> tuple[GroupState, AssignmentConfigs]:
    """Scale out where every changelog is the same size: restore cost is proportional to moves."""
    configs = AssignmentConfigs()
    settled = _settled(rng, rng.randint(2, 9), configs)
    ends = dict.fromkeys(settled.changelog_end_offset_sums, 1_000_000)
    clients = tuple(
        replace(c, task_offset_sums={t: s if s == LATEST_OFFSET else 1_000_000 for t, s in c.task_offset_sums.items()})
        for c in settled.clients
    )
    return replace(settled, clients=(*clients, ClientState("new")), changelog_end_offset_sums=ends), configs


def scale_in(rng: random.Random) -> tuple[GroupState, AssignmentConfigs]:
    configs = AssignmentConfigs(num_standby_replicas=rng.choice((0, 1)))
    group = _settled(rng, rng.randint(3, 10), configs)
    gone = rng.randrange(len(group.clients))
    return replace(group, clients=tuple(c for i, c in enumerate(group.clients) if i != gone)), configs


def rolling_restart(rng: random.Random) -> tuple[GroupState, AssignmentConfigs]:
    """One instance restarted; standbys lag far behind, so its tasks failed over to lagging copies."""
    configs = AssignmentConfigs(num_standby_replicas=1)
    group = _settled(rng, rng.randint(3, 8), configs)
    ends = group.changelog_end_offset_sums
    restarted = rng.randrange(len(group.clients))
    clients = []
    for i, client in enumerate(group.clients):
        sums = {
            t: (s if s == LATEST_OFFSET else max(0, ends[t] - rng.randint(20_000, 400_000)))
            for t, s in client.task_offset_sums.items()
        }
        if i == restarted:
            sums = {t: ends[t] - rng.randint(0, 5_000) for t in client.task_offset_sums}
            client = replace(client, previous_active=frozenset(), previous_standby=frozenset())  # noqa: PLW2901
        clients.append(replace(client, task_offset_sums=sums))
    return replace(group, clients=tuple(clients)), configs


def skewed_capacities(rng: random.Random) -> tuple[GroupState, AssignmentConfigs]:
    configs = AssignmentConfigs(num_standby_replicas=rng.choice((0, 1)))
    group = _settled(rng, rng.randint(2, 6), configs, capacities=(1, 1, 2, 4))
    return replace(group, clients=(*group.clients, ClientState("new", capacity=rng.choice((1, 2, 4))))), configs


def tagged_racks(rng: random.Random) -> tuple[GroupState, AssignmentConfigs]:
    configs = AssignmentConfigs(num_standby_replicas=rng.choice((1, 2)), rack_aware_assignment_tags=("zone",))
    group = _settled(rng, rng.randint(3, 9), configs, zones=3)
    newcomer = ClientState("new", client_tags={"zone": f"z{rng.randrange(3)}"})
    return replace(group, clients=(*group.clients, newcomer)), configs


def random_groups(rng: random.Random) -> tuple[GroupState, AssignmentConfigs]:
    """Arbitrary history: owners, standbys and lags at random (incl. -3 and state ahead of the log)."""
    tasks = _tasks(rng, rng.randint(1, 3), (2, 20))
    ends = {t: rng.choice((0, 5_000, 20_000, rng.randint(0, 2_000_000))) for t in tasks}
    pids = [f"i{i:02d}" for i in range(rng.randint(1, 10))]
    clients = []
    owner = {t: rng.choice(pids) for t in tasks}
    for pid in pids:
        active = frozenset(t for t in tasks if owner[t] == pid)
        sums = {t: LATEST_OFFSET for t in active}
        for t in tasks:
            if t not in active and rng.random() < 0.3:
                sums[t] = rng.choice((-3, ends[t] + 10, max(0, ends[t] - rng.randint(0, 50_000))))
        clients.append(ClientState(pid, rng.randint(1, 3), active, frozenset(), sums))
    configs = AssignmentConfigs(num_standby_replicas=rng.choice((0, 1, 2)), max_warmup_replicas=rng.randint(1, 4))
    return GroupState(clients, frozenset(tasks), frozenset(), ends), configs


FAMILIES: dict[str, Callable[[random.Random], tuple[GroupState, AssignmentConfigs]]] = {
    "scale out by one": scale_out,
    "scale out, uniform changelogs": scale_out_uniform,
    "scale in by one": scale_in,
    "rolling restart, lagging standbys": rolling_restart,
    "skewed capacities": skewed_capacities,
    "tagged racks": tagged_racks,
    "random": random_groups,
}


def _forced(counts: dict[str, int], total: int, capacity: dict[str, int], orphans: int) -> int:
    """Moves no balanced split of ``total`` tasks can avoid: the excess over ceiling shares, or the shortfall
    under floor shares that orphaned tasks (whose owner left) cannot fill."""
    whole = sum(capacity.values())
    excess = sum(max(0, counts[p] - -(-total * c // whole)) for p, c in capacity.items())
    shortfall = sum(max(0, total * c // whole - counts[p]) for p, c in capacity.items())
    return max(excess, shortfall - orphans)


def lower_bound(group: GroupState) -> int:
    """A lower bound on moves: sum(max(0, load - quota)) per client, per subtopology too (B2), both ways."""
    capacity = {c.process_id: c.capacity for c in group.clients}

    def forced(tasks: frozenset[TaskId]) -> int:
        owned = {c.process_id: len(c.previous_active & tasks) for c in group.clients}
        return _forced(owned, len(tasks), capacity, len(tasks) - sum(owned.values()))

    subs = sorted({t.subtopology for t in group.all_tasks})
    per_sub = sum(forced(frozenset(t for t in group.all_tasks if t.subtopology == s)) for s in subs)
    return max(forced(group.all_tasks), per_sub)


def measure(family: str, seed: int) -> Outcome:
    group, configs = FAMILIES[family](random.Random(seed))
    start = time.perf_counter()
    plan = plan_group(group, configs)
    seconds = time.perf_counter() - start
    # The same replay the pipeline's baselines stage records, so the bench and plan_baselines agree.
    costs = {
        side: {m: int(getattr(cost.cost, m)) for m in METRICS}
        for side, name in (("baseline", "kip441"), ("broker", "streams_broker"))
        for cost in (baseline_cost(group, configs, name),)
    }
    planner = {m: int(getattr(plan.cost, m)) for m in METRICS}
    return Outcome(
        family, seed, costs["baseline"], costs["broker"], planner, lower_bound(group), seconds, plan.restore_lower_bound
    )


def _summary(outcomes: list[Outcome]) -> dict[str, Any]:
    row: dict[str, Any] = {"family": outcomes[0].family, "groups": len(outcomes)}
    for m in METRICS:
        for side in ("baseline", "broker", "planner"):
            values = [getattr(o, side)[m] for o in outcomes]
            row[f"{side}_{m}_median"] = statistics.median(values)
            row[f"{side}_{m}_worst"] = max(values)
    row["lower_bound_median"] = statistics.median(o.lower_bound for o in outcomes)
    row["at_lower_bound"] = sum(1 for o in outcomes if o.planner["moves"] == o.lower_bound)
    # Plan restore over its lower bound, over the groups that must restore something.
    ratios = [o.planner["restore_offsets"] / o.restore_lower_bound for o in outcomes if o.restore_lower_bound]
    row["restore_vs_bound_median"] = round(statistics.median(ratios), 3) if ratios else None
    row["restore_vs_bound_worst"] = round(max(ratios), 3) if ratios else None
    row["restore_within_1_2_of_bound"] = sum(1 for r in ratios if r <= 1.2)
    row["restore_bound_groups"] = len(ratios)
    row["never_worse"] = sum(1 for o in outcomes if all(o.planner[m] <= o.baseline[m] for m in METRICS))
    row["plan_seconds_median"] = round(statistics.median(o.seconds for o in outcomes), 4)
    row["plan_seconds_max"] = round(max(o.seconds for o in outcomes), 4)
    return row


# The bench's sides as the report names them, so both pages share labels and colours.
SIDES = (("baseline", Assignor.KIP441), ("broker", Assignor.STREAMS_BROKER), ("planner", Assignor.PLAN))


def _chart(rows: list[dict[str, Any]], metric: str) -> Chart:
    """Median ``metric`` per family, the planner beside both baselines."""
    frame = pd.DataFrame.from_records(
        [
            {"label": r["family"], "assignor": who.label, "value": float(r[f"{side}_{metric}_median"])}
            for r in rows
            for side, who in SIDES
        ]
    )
    title = f"Median {metric.replace('_', ' ')} per group"
    present = [who for _, who in SIDES]
    svg = grouped_bars(frame, present, [r["family"] for r in rows], metric.replace("_", " "), title)
    return Chart(
        title,
        f"Bar chart of the median {metric.replace('_', ' ')} per family, for {' and '.join(a.label for a in present)}.",
        svg,
    )


def write_html(rows: list[dict[str, Any]], speed: list[dict[str, Any]], path: Path) -> None:
    timings = Figures(
        "plan_group wall time, with the load average when each case finished",
        ("case", "tasks", "clients", "runs", "median ms", "min ms", "load 1m", "load 5m", "load 15m"),
        tuple(
            (
                r["case"],
                r["tasks"],
                r["clients"],
                r["runs"],
                r["median_s"] * 1000,
                r["min_s"] * 1000,
                r["load_avg_1m"],
                r["load_avg_5m"],
                r["load_avg_15m"],
            )
            for r in speed
        ),
    )
    summary = Figures(
        "Medians per family: KIP-441 / the broker-side model / the planner (the JSON lines carry the worst cases)",
        (
            "family",
            "groups",
            *(f"{m.replace('_', ' ')}: {short}" for m in METRICS for short in ("KIP-441", "broker", "planner")),
            "planner never worse than KIP-441",
            "planner at the moves lower bound",
        ),
        tuple(
            (
                r["family"],
                r["groups"],
                *(r[f"{side}_{m}_median"] for m in METRICS for side, _ in SIDES),
                r["never_worse"],
                r["at_lower_bound"],
            )
            for r in rows
        ),
    )
    lead = (
        "Seeded groups of each family, planned by the planner and replayed under KIP-441 and under the broker-side "
        "streams assignment until they stop probing. Moves are owner changes summed over every round; restore is "
        "in offsets. Smaller is better throughout."
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    page = render_bench_page(
        "Planner vs KIP-441 and the broker-side assignment",
        lead,
        [t for t in (timings, summary) if t.rows],
        [_chart(rows, m) for m in METRICS],
    )
    path.write_text(page, encoding="utf-8")


@dataclass(frozen=True)
class SpeedCase:
    name: str
    tasks: int
    clients: int
    subtopologies: int
    runs: int
    lagging: bool = False  # one instance restarted with lagging state instead of one new instance
    partial: bool = False  # long-lived: mixed changelog sizes, partial state spread widely (partial_state_group)


SPEED_CASES = (
    SpeedCase("64 tasks x 6 clients, 1 standby, one new", 64, 6, 2, 51),
    SpeedCase("64 tasks x 6 clients, 1 standby, one lagging", 64, 6, 2, 51, lagging=True),
    SpeedCase("1k tasks x 100 clients, 1 standby, one new", 1_000, 100, 10, 7),
    SpeedCase("10k tasks x 1k clients, 1 standby, one new", 10_000, 1_000, 10, 3),
    SpeedCase("1k x 100, partial state, mixed changelogs, one new", 1_000, 100, 10, 7, partial=True),
    SpeedCase("10k x 1k, partial state, mixed changelogs, one new", 10_000, 1_000, 10, 3, partial=True),
)
PARTIAL_SHARE = 0.1  # of the instances that do not own a task, the share holding partial state for it


def partial_state_group(
    tasks: int, clients: int, subtopologies: int, seed: int = 7
) -> tuple[GroupState, AssignmentConfigs]:
    """A long-lived group that has just gained one instance: changelogs from tens of thousands to millions of
    records (log-uniform), standbys a little behind (some beyond the acceptable recovery lag), and for every task
    about one instance in ten (PARTIAL_SHARE) of those not holding it with partial state from an earlier
    assignment, anywhere from empty to nearly caught up."""
    rng = random.Random(seed)
    per_sub = tasks // subtopologies
    task_ids = [TaskId(s, p) for s in range(subtopologies) for p in range(per_sub)]
    ends = {t: int(10 ** rng.uniform(4.3, 6.5)) for t in task_ids}  # 20k to ~3.2M records
    old = [f"instance-{i:04d}" for i in range(clients - 1)]
    active: dict[str, set[TaskId]] = {p: set() for p in old}
    standby: dict[str, set[TaskId]] = {p: set() for p in old}
    sums: dict[str, dict[TaskId, int]] = {p: {} for p in old}
    extra = max(1, round(PARTIAL_SHARE * (len(old) - 2)))
    for i, task in enumerate(task_ids):
        owner, copy = old[i % len(old)], old[(i + 1) % len(old)]
        active[owner].add(task)
        standby[copy].add(task)
        sums[owner][task] = LATEST_OFFSET
        sums[copy][task] = max(0, ends[task] - rng.randint(0, 40_000))  # a little behind, some beyond 10,000
        others = [p for p in old if p not in (owner, copy)]
        for pid in rng.sample(others, min(extra, len(others))):
            sums[pid][task] = rng.randint(0, ends[task])
    group_clients = [ClientState(p, 1, frozenset(active[p]), frozenset(standby[p]), sums[p]) for p in old]
    group_clients.append(ClientState("instance-new"))
    group = GroupState(group_clients, frozenset(task_ids), frozenset(), ends)
    return group, AssignmentConfigs(num_standby_replicas=1)


def _one_lagging(group: GroupState, rng: random.Random) -> GroupState:
    """The first instance restarted with state 20k-400k offsets behind; its actives failed over to their standbys."""
    ends = group.changelog_end_offset_sums
    gone, *others = group.clients
    clients = []
    for client in others:
        took = gone.previous_active & client.previous_standby
        sums = {**client.task_offset_sums, **dict.fromkeys(took, LATEST_OFFSET)}
        clients.append(
            replace(
                client,
                previous_active=client.previous_active | took,
                previous_standby=client.previous_standby - took,
                task_offset_sums=sums,
            )
        )
    # A changelog shorter than the lag drawn leaves the store empty (offset sum 0), never a negative sum.
    behind = {t: max(0, ends[t] - rng.randint(20_000, 400_000)) for t in gone.previous_active | gone.previous_standby}
    restarted = replace(gone, previous_active=frozenset(), previous_standby=frozenset(), task_offset_sums=behind)
    return replace(group, clients=(restarted, *clients))


def speed_group(case: SpeedCase) -> tuple[GroupState, AssignmentConfigs]:
    """A running group with one new instance, or (``lagging``) with one restarted instance that lags, or
    (``partial``) partial_state_group's long-lived group."""
    if case.partial:
        return partial_state_group(case.tasks, case.clients, case.subtopologies)
    shape = Case(case.name, case.tasks, case.clients + (1 if case.lagging else 0), 1, case.subtopologies)
    group, configs = build(shape)
    if case.lagging:
        running = replace(group, clients=group.clients[:-1])  # without the new instance
        group = _one_lagging(running, random.Random(7))
    return group, configs


def measure_speed(case: SpeedCase, freeze: bool = True) -> dict[str, Any]:
    """Median wall time of plan_group over ``case.runs`` runs (after one warm-up run), with the load average and
    the CPU time (less skewed by other work on the machine), and of one KIP-441 assignment
    (assign_high_availability) on the same group, timed alternately in the same loop so both see the same load.
    With ``freeze``, the heap is gc.freeze()d after the warm-up, as the pipeline's plan workers do
    (jobs.pipeline.plan.start_worker)."""
    group, configs = speed_group(case)
    plan = plan_group(group, configs)
    assign_high_availability(group, configs)
    if freeze:
        gc.collect()
        gc.freeze()
    times, cpu, kip441, kip441_cpu = [], [], [], []
    try:
        for _ in range(case.runs):
            start, start_cpu = time.perf_counter(), time.process_time()
            plan_group(group, configs)
            times.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)
            start, start_cpu = time.perf_counter(), time.process_time()
            assign_high_availability(group, configs)
            kip441.append(time.perf_counter() - start)
            kip441_cpu.append(time.process_time() - start_cpu)
    finally:
        gc.unfreeze()
    load = os.getloadavg()
    return {
        "bench": "plan_group",
        "case": case.name,
        "tasks": case.tasks,
        "clients": len(group.clients),
        "runs": case.runs,
        "median_s": round(statistics.median(times), 5),
        "min_s": round(min(times), 5),
        "max_s": round(max(times), 5),
        "cpu_median_s": round(statistics.median(cpu), 5),
        "kip441_median_s": round(statistics.median(kip441), 5),
        "vs_kip441": round(statistics.median(times) / statistics.median(kip441), 2),
        # By CPU time on both sides: steadier than wall time on a loaded machine (docs/performance.md).
        "kip441_cpu_median_s": round(statistics.median(kip441_cpu), 5),
        "vs_kip441_cpu": round(statistics.median(cpu) / max(statistics.median(kip441_cpu), 1e-9), 2),
        "gc_frozen": freeze,
        "core": CORE_BUILD.value,  # make core's mypyc build, or the sources
        "load_avg_1m": round(load[0], 2),
        "load_avg_5m": round(load[1], 2),
        "load_avg_15m": round(load[2], 2),
        "cpus": os.cpu_count(),
        **{m: int(getattr(plan.cost, m)) for m in METRICS},
        "restore_lower_bound": plan.restore_lower_bound,
    }


def speed_table(rows: list[dict[str, Any]]) -> Table:
    table = Table(
        title=f"plan_group wall time (median; load average recorded at the end of each row; core: {CORE_BUILD.value})"
    )
    columns = (
        "case",
        "runs",
        "median ms",
        "min ms",
        "max ms",
        "cpu ms",
        "KIP-441 ms",
        "x KIP-441",
        "x KIP-441 cpu",
        "load 1/5/15 min",
        "moves",
        "warmups",
        "rounds",
        "restore / LB",
    )
    for column in columns:
        table.add_column(column, justify="left" if column == "case" else "right")
    for r in rows:
        table.add_row(
            str(r["case"]),
            str(r["runs"]),
            f"{r['median_s'] * 1000:.1f}",
            f"{r['min_s'] * 1000:.1f}",
            f"{r['max_s'] * 1000:.1f}",
            f"{r['cpu_median_s'] * 1000:.1f}",
            f"{r['kip441_median_s'] * 1000:.1f}",
            f"{r['vs_kip441']:.1f}",
            f"{r['vs_kip441_cpu']:.2f}",
            f"{r['load_avg_1m']}/{r['load_avg_5m']}/{r['load_avg_15m']} ({r['cpus']} cpus)",
            str(r["moves"]),
            str(r["warmups"]),
            str(r["rounds"]),
            f"{r['restore_offsets'] / r['restore_lower_bound']:.2f}" if r["restore_lower_bound"] else "-",
        )
    return table


def run_speed(console: Console, sizes: int, freeze: bool = True, only: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    rows = []
    cases = [c for c in SPEED_CASES if any(word in c.name for word in only)] if only else SPEED_CASES[:sizes]
    for case in cases:
        console.print(f"timing plan_group: {case.name} ({case.runs} runs)")
        row = measure_speed(case, freeze)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--groups", type=int, default=100, help="seeded groups per family")
    parser.add_argument("--html", type=Path, default=Path("bench/results/planner_bench.html"))
    parser.add_argument("--speed", action="store_true", help="only time plan_group (no scenario families)")
    parser.add_argument(
        "--sizes", type=int, default=len(SPEED_CASES), help="time the first N speed cases (the last is 10k x 1k)"
    )
    parser.add_argument(
        "--case", action="append", default=[], help="time only the speed cases whose name contains this (repeatable)"
    )
    parser.add_argument(
        "--no-gc-freeze", action="store_true", help="time without gc.freeze() (the plan workers freeze their heap)"
    )
    args = parser.parse_args()
    console = Console(stderr=True)
    if args.speed:
        Console(width=170).print(
            speed_table(run_speed(console, args.sizes, not args.no_gc_freeze, tuple(args.case)))
        )  # no wrapping when stdout is a file
        return
    rows = []
    for family in FAMILIES:
        outcomes = [measure(family, seed) for seed in track(range(args.groups), description=family, console=console)]
        for o in outcomes:
            if not all(o.planner[m] <= o.baseline[m] for m in METRICS):
                console.print(f"[red]planner worse than baseline[/red]: {family} seed {o.seed}: {o}")
        row = _summary(outcomes)
        rows.append(row)
        print(json.dumps({"bench": "planner_family", **row}))
    speed = run_speed(console, args.sizes, not args.no_gc_freeze)
    table = Table(
        title=f"planner vs KIP-441 (b) and the broker-side assignment ({args.groups} groups per family): median / worst"
    )
    for column in (
        "family",
        "moves b/p",
        "LB",
        "at LB",
        "warmups b/p",
        "rounds b/p",
        "restore b/p (median)",
        "restore p/LB med/worst (<=1.2)",
        "never worse",
        "broker-side m/w/r/restore",
        "plan s med/max",
    ):
        table.add_column(column, justify="left" if column == "family" else "right")
    for r in rows:

        def pair(m: str, r: dict[str, Any] = r) -> str:
            return (
                f"{r[f'baseline_{m}_median']:g}/{r[f'planner_{m}_median']:g} "
                f"({r[f'baseline_{m}_worst']}/{r[f'planner_{m}_worst']})"
            )

        table.add_row(
            str(r["family"]),
            pair("moves"),
            f"{r['lower_bound_median']:g}",
            f"{r['at_lower_bound']}/{r['groups']}",
            pair("warmups"),
            pair("rounds"),
            f"{float(r['baseline_restore_offsets_median']):,.0f}/{float(r['planner_restore_offsets_median']):,.0f}",
            f"{r['restore_vs_bound_median']}/{r['restore_vs_bound_worst']} "
            f"({r['restore_within_1_2_of_bound']}/{r['restore_bound_groups']})",
            f"{r['never_worse']}/{r['groups']}",
            "/".join(f"{float(r[f'broker_{m}_median']):,.0f}" for m in METRICS),
            f"{r['plan_seconds_median']}/{r['plan_seconds_max']}",
        )
    Console().print(table)
    Console(width=170).print(speed_table(speed))
    write_html(rows, speed, args.html)
    Console().print(f"HTML report: {args.html}")


if __name__ == "__main__":
    main()
