"""Runtime benchmark: a live scale-out 2 -> 3 of real instance processes on the embedded broker.

12 stateful tasks with 100,000 changelog records each, probing every 5 s. Once the two instances have
restored and process their input, a plan for three is published and the third instance starts. Measured:
time from publish to convergence, records restored, rebalances, and the longest time any task was not
processed. The same scale-out without a plan (Kafka's KIP-441 assignor alone) is run as the baseline.

    .venv/bin/python bench/runtime_bench.py [--records 100000] [--tasks 12] [--skip-baseline]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from assignor import AssignmentConfigs
from assignor.protocol.plan_keys import PlanSigner
from jobs.local.broker import EmbeddedBroker
from jobs.local.direct_plan import approved_plan, group_state, live_reports, publish_record
from jobs.local.fleet import Fleet, FleetConfig, InputLoad, InstanceProcess
from jobs.local.fleet_events import (
    all_tasks_processed_once,
    converged,
    last_event,
    longest_pause,
)
from jobs.polling import wait_until

SIGNER = PlanSigner.generate("runtime-bench")  # a fresh key per run: the bench signs, its fleet verifies
GROUP = "bench"


def fill_changelogs(bootstrap: str, topic: str, tasks: int, records: int, console: Console) -> None:
    """`records` changelog records in each of the first `tasks` partitions."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10_000})
    started = time.monotonic()
    for partition in range(tasks):
        for n in range(records):
            value = json.dumps({"count": n // 1000 + 1, "input_offset": -1})
            while True:
                try:
                    producer.produce(topic, key=f"key-{n % 1000}", value=value, partition=partition)
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.flush(120)
        console.log(f"changelog {topic}[{partition}]: {records:,} records")
    console.log(f"filled {tasks} changelog partitions in {time.monotonic() - started:.1f} s")


def restored_since(instances: list[InstanceProcess], since_ms: int) -> int:
    """Changelog records applied by tasks opened after since_ms (each close/shutdown says how many)."""
    total = 0
    for instance in instances:
        opened: dict[str, int] = {}
        for e in instance.events():
            if e["event"] == "open":
                opened[e["task"]] = e["t"]
            elif e["event"] == "close" and opened.get(e["task"], 0) >= since_ms:
                total += e["restored"]
    return total


def run(mode: str, tasks: int, records: int, console: Console) -> dict[str, Any]:
    configs = AssignmentConfigs(max_warmup_replicas=2, probing_rebalance_interval_ms=5_000)
    task_ids = {f"0_{p}" for p in range(tasks)}
    with tempfile.TemporaryDirectory() as root, EmbeddedBroker() as broker:
        config = FleetConfig(
            broker.bootstrap,
            Path(root),
            SIGNER.verify_keys().render(),
            configs=configs,
            partitions=tasks,
            report_interval_s=2,
        )
        with Fleet(config) as fleet:
            topology = fleet.create_group(GROUP)
            fill_changelogs(broker.bootstrap, topology.subtopologies[0].changelog_topics[0], tasks, records, console)
            with InputLoad(broker.bootstrap, topology.source_topics, 100):
                for name in ("i1", "i2"):
                    fleet.start(GROUP, name)
                console.log("two instances restore their state...")
                wait_until(lambda: all_tasks_processed_once(fleet, GROUP, task_ids), 600, "two instances processing")
                pids = {i.process_id for i in fleet.members(GROUP)}
                wait_until(
                    lambda: pids <= set(live_reports(broker.bootstrap, "_rebalance_reports", GROUP)), 60, "reports"
                )
                newcomer = fleet.process_id(GROUP, "i3")
                published = int(time.time() * 1000)
                plan_id = None
                if mode == "planner":
                    reports = live_reports(broker.bootstrap, "_rebalance_reports", GROUP)
                    group = group_state(broker.bootstrap, topology, tasks, reports, [newcomer])
                    plan, _ = approved_plan(GROUP, group, configs)
                    plan_id = plan.plan_id
                    publish_record(broker.bootstrap, "_rebalance_plans", GROUP, plan.to_record(SIGNER))
                fleet.start(GROUP, "i3")
                console.log(f"[{mode}] third instance started; waiting for convergence")

                def done() -> bool:
                    if plan_id is not None:
                        return converged(fleet, GROUP, plan.target, plan_id)
                    members = fleet.members(GROUP)
                    latest = [last_event(i, "assigned") for i in members]
                    leaders = [e for i in members for e in i.events() if e["event"] == "leader"]
                    newest = max(leaders, key=lambda e: e["t"]) if leaders else None
                    return (
                        newest is not None
                        and newest["t"] > published
                        and not newest["probing"]
                        and all(e is not None and not e["warmup"] and e["t"] > newest["t"] - 1 for e in latest)
                        and all(e is not None and e["active"] for e in latest)
                        and all_tasks_processed_once(fleet, GROUP, task_ids)
                    )

                wait_until(done, 900, f"{mode} convergence")
                finished = int(time.time() * 1000)
            members = fleet.members(GROUP)
            rebalances = len([e for i in members for e in i.events() if e["event"] == "leader" and e["t"] > published])
            pause = longest_pause(members, published, finished, task_ids)
            moves = sum(1 for i in members for e in i.events() if e["event"] == "activate" and e["t"] > published)
        restored = restored_since(members, published)
    return {
        "bench": "runtime",
        "mode": mode,
        "tasks": tasks,
        "records_per_task": records,
        "probing_interval_ms": configs.probing_rebalance_interval_ms,
        "publish_to_convergence_s": round((finished - published) / 1000, 1),
        "records_restored": restored,
        "rebalances": rebalances,
        "tasks_handed_over": moves,
        "longest_task_pause_s": round(pause, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=12)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--skip-baseline", action="store_true", help="only the plan-honoring run")
    args = parser.parse_args()
    console = Console(stderr=True)
    rows = [run("planner", args.tasks, args.records, console)]
    if not args.skip_baseline:
        rows.append(run("kip441", args.tasks, args.records, console))
    for row in rows:
        print(json.dumps(row))
    table = Table(title=f"live scale-out 2 -> 3: {args.tasks} tasks x {args.records:,} changelog records")
    for column in ("mode", "publish→converged s", "records restored", "rebalances", "hand-overs", "longest pause s"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(
            row["mode"],
            str(row["publish_to_convergence_s"]),
            f"{row['records_restored']:,}",
            str(row["rebalances"]),
            str(row["tasks_handed_over"]),
            str(row["longest_task_pause_s"]),
        )
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
