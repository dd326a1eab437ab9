"""Kafka Streams benchmark: a live 3 -> 4 scale-out of the reference app (real JVMs, embedded broker).

24 counting tasks with ~100,000 changelog records each (2.4M input records, every one a new key). Run twice:
`plan` (the plugin honoring a plan made by the real pipeline stages, probing every 10 s) and `kafka` (Kafka's
own KIP-441 assignor, probing at Kafka's 60 s floor). Measured from the fourth instance's start: time to
convergence, records restored into active stores (restore listener) and into standby/warmup stores (standby
update listener, KIP-988), their sum, rebalances, task hand-overs, and the longest time any task was processed
nowhere.

    .venv/bin/python bench/streams_bench.py [--partitions 24] [--records 2400000] [--modes plan,kafka]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from assignor import AssignmentConfigs
from assignor.protocol.plan_keys import PlanSigner
from assignor.protocol.plans import ApprovedPlan, read_record
from assignor.runtime.kafka_io import read_latest_by_key
from jobs.lakehouse.engine import spark_session
from jobs.lakehouse.lake import Lake
from jobs.local.broker import EmbeddedBroker
from jobs.local.fleet_events import longest_pause, processing
from jobs.local.streams_fleet import (
    StreamsFleet,
    StreamsFleetConfig,
    assignment,
    at_target,
    generation,
    handovers,
    rebalances,
    restored_records,
    settled,
    standby_restored_records,
)
from jobs.pipeline.approve import run_approve
from jobs.pipeline.extract import run_extract
from jobs.pipeline.lags import run_lags
from jobs.pipeline.plan import run_plan
from jobs.pipeline.publish import run_publish
from jobs.pipeline.validate import run_validate
from jobs.polling import wait_until
from jobs.settings import Kip441Settings, Settings

SIGNER = PlanSigner.generate("streams-bench")  # a fresh key per run: the bench signs, its JVMs verify
PLAN_PROBING_MS, KAFKA_PROBING_MS = 10_000, 60_000  # Kafka Streams refuses a probing interval below 60 s


def watching(condition: Callable[[], bool], describe: Callable[[], str], console: Console) -> Callable[[], bool]:
    """``condition``, logging ``describe()`` every 10 s while it does not hold: progress during long waits."""
    last = [time.monotonic()]

    def check() -> bool:
        if condition():
            return True
        if time.monotonic() - last[0] >= 10:
            last[0] = time.monotonic()
            console.log(describe())
        return False

    return check


def holdings(fleet: StreamsFleet) -> str:
    """Per live instance: active stateful tasks, warmups (standbys) and tasks processing now."""
    parts = []
    for i in fleet.live():
        active, standby = assignment(i) or (set(), set())
        stateful = sum(1 for t in active if t.startswith("1_"))
        parts.append(
            f"{i.name}: {stateful} stateful/{len(active)} active, {len(standby)} warmup, {len(processing(i))} run"
        )
    return "; ".join(parts)


def balanced(fleet: StreamsFleet) -> bool:
    """Kafka's end state: settled, and every instance holds within one of the same number of counting tasks."""
    counts = [sum(1 for t in (assignment(i) or (set(), set()))[0] if t.startswith("1_")) for i in fleet.live()]
    return settled(fleet) and min(counts) > 0 and max(counts) - min(counts) <= 1


def publish_plan(root: Path, config: StreamsFleetConfig, configs: AssignmentConfigs, console: Console) -> ApprovedPlan:
    """extract -> lags -> plan -> validate -> approve -> publish on the embedded engine, as the DAG runs them."""
    key = root / "signing-key.pem"
    key.write_bytes(SIGNER.pem())
    settings = Settings(
        lake_root=root / "lake", kafka_bootstrap=config.bootstrap, plan_signing_key_file=key,
        plan_key_id=SIGNER.key_id, kip441=Kip441Settings.of(configs), planner_processes=1,
        reports_topic=config.reports_topic, plans_topic=config.plans_topic,
    )  # fmt: skip
    started = time.monotonic()
    with spark_session(None) as spark:
        lake = Lake(spark, settings.lake_root)
        snapshot = run_extract(lake, settings, config.bootstrap).snapshot_id
        for stage in (run_lags, run_plan, run_validate):
            stage(lake, settings, snapshot)
        run_approve(lake, settings, by="streams-bench", snapshot_id=snapshot)
        run_publish(lake, settings, config.bootstrap, snapshot_id=snapshot)
    record = read_latest_by_key(config.bootstrap, config.plans_topic)[config.application_id.encode()]
    if record is None:
        raise RuntimeError("the pipeline published no plan for the group")
    plan = read_record(record, SIGNER.verify_keys())
    if not isinstance(plan, ApprovedPlan):
        raise RuntimeError(f"the plans topic holds {plan!r}, not a plan")
    console.log(f"pipeline published {plan.plan_id} in {time.monotonic() - started:.0f} s")
    return plan


def run(mode: str, partitions: int, records: int, console: Console) -> dict[str, Any]:
    probing = PLAN_PROBING_MS if mode == "plan" else KAFKA_PROBING_MS
    configs = AssignmentConfigs(max_warmup_replicas=2, probing_rebalance_interval_ms=probing)
    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker(heap_mb=1024) as broker:
        root = Path(tmp)
        config = StreamsFleetConfig(
            broker.bootstrap, root / "fleet", f"bench-{mode}", partitions, SIGNER.verify_keys().render(),
            plugin=mode == "plan", configs=configs, heap_mb=512,
        )  # fmt: skip
        with StreamsFleet(config) as fleet:
            console.log(f"\\[{mode}] producing {records:,} input records")
            produced = fleet.produce(records, keys=records)
            console.log(f"\\[{mode}] produced in {produced['ms'] / 1000:.1f} s; three instances count them")
            for name in ("i1", "i2", "i3"):
                fleet.start(name)
            wait_until(
                watching(
                    lambda: fleet.changelog_records() >= records,
                    lambda: f"\\[{mode}] changelog records: {fleet.changelog_records():,} of {records:,}",
                    console,
                ),
                1800,
                "the input to be counted",
                poll_s=2,
            )
            wait_until(watching(lambda: settled(fleet), lambda: holdings(fleet), console), 300, "three to settle")
            plan = None
            if mode == "plan":
                live = {i.process_id for i in fleet.live()}
                wait_until(lambda: live <= set(fleet.reports()), 60, "a report for every instance")
                fleet.announce("i4", next(iter(fleet.reports().values())))
                plan = publish_plan(root, config, configs, console)
            before = generation(fleet.members())
            started = int(time.time() * 1000)
            fleet.start("i4")
            console.log(
                f"\\[{mode}] fourth instance started; waiting for convergence (probing every {probing // 1000} s)"
            )
            target = plan.target if plan is not None else None
            done = (lambda: at_target(fleet, target)) if target is not None else (lambda: balanced(fleet))
            wait_until(watching(done, lambda: f"\\[{mode}] {holdings(fleet)}", console), 1800, f"{mode} convergence")
            members = fleet.members()
            # When the final assignment took effect: the newest assignment or task start among the instances.
            converged = max(e["t"] for i in members for e in i.events() if e["event"] in ("assigned", "processing"))
            active = sum(restored_records(members, started).values())
            standby = sum(standby_restored_records(members, started).values())
            result = {
                "bench": "streams",
                "mode": mode,
                "stateful_tasks": partitions,
                "changelog_records": fleet.changelog_records(),
                "probing_interval_s": probing // 1000,
                "converged_s": round((converged - started) / 1000, 1),
                "restored_active_records": active,
                "restored_standby_records": standby,
                "restored_records": active + standby,
                "rebalances": rebalances(members, before),
                "handovers": handovers(members, started),
                "max_pause_s": round(longest_pause(members, started, converged, config.tasks), 1),
            }
            console.log(f"\\[{mode}] converged: {json.dumps(result)}")
            return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=24, help="counting (stateful) tasks")
    parser.add_argument("--records", type=int, default=2_400_000, help="input records, all distinct keys")
    parser.add_argument("--modes", default="plan,kafka")
    args = parser.parse_args()
    console = Console(stderr=True)
    rows = [run(mode, args.partitions, args.records, console) for mode in args.modes.split(",")]
    for row in rows:
        print(json.dumps(row), flush=True)
    table = Table(
        title=f"Kafka Streams scale-out 3 -> 4: {args.partitions} stateful tasks, {args.records:,} changelog records",
        caption="plan: plugin + pipeline plan, probing 10 s; kafka: Kafka's assignor, probing at its 60 s floor. "
        "restored = into active stores + into standby/warmup stores",
    )
    columns = ("mode", "probing s", "converged s", "restored active", "restored standby", "restored", "rebalances")
    for column in (*columns, "hand-overs", "max pause s"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(
            row["mode"],
            str(row["probing_interval_s"]),
            str(row["converged_s"]),
            f"{row['restored_active_records']:,}",
            f"{row['restored_standby_records']:,}",
            f"{row['restored_records']:,}",
            str(row["rebalances"]),
            str(row["handovers"]),
            str(row["max_pause_s"]),
        )
    Console(width=130).print(table)


if __name__ == "__main__":
    main()
