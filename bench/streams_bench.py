"""Kafka Streams benchmark: a live 3 -> 4 scale-out of the reference app (real JVMs, embedded broker).

24 counting tasks with ~100,000 changelog records each (2.4M input records, every one a new key). Run twice:
`plan` (the plugin honoring a plan made by the real pipeline stages, probing every 10 s) and `kafka` (Kafka's
own KIP-441 assignor, probing at Kafka's 60 s floor). Measured from the fourth instance's start: time to
convergence, records restored into active stores (restore listener) and into standby/warmup stores (standby
update listener, KIP-988), their sum, rebalances, task hand-overs, and the longest time any task was processed
nowhere.

Both group protocols (`--protocols classic,streams`): on `streams` (KIP-1071, Kafka 4.4) the broker assigns. `plan`
there is our broker-side assignor following a plan that names the fourth instance before it joins (built by the
bench with the planner core: the pipeline reads a streams group from the broker, which knows no member before it
joins), its later steps triggered as `observe` triggers them (`streams_steps.decide_step`, every 5 s); `kafka` is the
broker's own `sticky`. One JSON line per protocol and mode (`protocol`, `mode`, `restored_records`, `converged_s`,
`rebalances`, `actives_started_behind`: active restorations of more than the acceptable lag, `restore_lower_bound`:
the least any balanced assignment of the scale-out restores, scale_out_lower_bound), then a table.
Rebalances are the generations the clients joined on `classic`, the group epochs the broker went through on
`streams` (each an assignment it computed: the join, and each step triggered).

    .venv/bin/python bench/streams_bench.py [--partitions 24] [--records 2400000] [--modes plan,kafka]
        [--protocols classic,streams]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from assignor import AssignmentConfigs, ClientState, GroupState, TaskId, plan_group
from assignor.lags import LagIndex, restore_lower_bound
from assignor.protocol.plan_keys import PlanSigner
from assignor.protocol.plans import ApprovedPlan, read_record
from assignor.runtime.kafka_io import read_latest_by_key
from jobs.kafka_topics import ensure_topics
from jobs.lakehouse.engine import spark_session
from jobs.lakehouse.lake import Lake
from jobs.live.streams import group_decision
from jobs.local.broker import BrokerAssignor, EmbeddedBroker, broker_assignor_jar
from jobs.local.fleet_events import longest_pause, processing
from jobs.local.streams_fleet import (
    StreamsFleet,
    StreamsFleetConfig,
    assignment,
    at_target,
    events_settled,
    generation,
    handovers,
    rebalances,
    restored_records,
    restores,
    settled,
    standby_restored_records,
)
from jobs.pipeline.approve import run_approve
from jobs.pipeline.broker_streams import BrokerStreamsGroup, parse_reader_output
from jobs.pipeline.extract import run_extract
from jobs.pipeline.lags import run_lags
from jobs.pipeline.observe_streams import group_reports
from jobs.pipeline.plan import run_plan
from jobs.pipeline.publish import _produce as produce_plans
from jobs.pipeline.publish import plans_topic_spec, run_publish
from jobs.pipeline.streams_assignor import (
    ASSIGNOR_NAME,
    DECISIONS_TOPIC,
    assignor_admin,
    select_assignor,
    trigger_assignment,
)
from jobs.pipeline.streams_reader import read_streams_groups_lines
from jobs.pipeline.streams_steps import GroupNow, StepRule, decide_step
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


def streams_group(fleet: StreamsFleet) -> BrokerStreamsGroup | None:
    """The fleet's group as the broker describes it now (one streams-groups reader run)."""
    c = fleet.config
    read = parse_reader_output(read_streams_groups_lines(c.bootstrap, {}, 30.0), int(time.time() * 1000))
    return next((g for g in read.groups if g.group_id == c.application_id), None)


def start_three_and_count(fleet: StreamsFleet, records: int, tag: str, console: Console) -> None:
    """Start instances i1..i3 and wait, showing progress, until their changelog holds every input record."""
    for name in ("i1", "i2", "i3"):
        fleet.start(name)
    wait_until(
        watching(
            lambda: fleet.changelog_records() >= records,
            lambda: f"{tag} changelog records: {fleet.changelog_records():,} of {records:,}",
            console,
        ),
        1800,
        "the input to be counted",
        poll_s=2,
    )


def streams_settled(fleet: StreamsFleet) -> bool:
    """``settled`` for a streams-protocol group: the coordinator's view comes from the broker's streams-group
    description (the Admin client's consumer-group calls do not see these groups)."""
    if not events_settled(fleet):
        return False  # the events are enough to say no; the broker is asked (a JVM run) only when they say yes
    group = streams_group(fleet)
    if group is None or group.state != "Stable":
        return False
    reports = group_reports([group])
    described = {r.process_id: ({str(t) for t in r.record.active_tasks}, set(map(str, r.record.standby_tasks)))
                 for r in reports}  # fmt: skip
    return described == {i.process_id: (processing(i), set()) for i in fleet.live()}


def balanced(fleet: StreamsFleet, settled: Callable[[StreamsFleet], bool] = settled) -> bool:
    """Kafka's end state: settled, and every instance holds within one of the same number of counting tasks."""
    counts = [sum(1 for t in (assignment(i) or (set(), set()))[0] if t.startswith("1_")) for i in fleet.live()]
    return min(counts) > 0 and max(counts) - min(counts) <= 1 and settled(fleet)


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


def started_behind(fleet: StreamsFleet, since_ms: int, acceptable_lag: int) -> int:
    """Active restorations since ``since_ms`` of more than the acceptable lag (or never finished): actives that
    started behind and caught up before processing."""
    return sum(1 for r in restores(fleet.members(), since_ms) if r.restored is None or r.restored > acceptable_lag)


def streams_plan(fleet: StreamsFleet, configs: AssignmentConfigs, newcomer: str) -> ApprovedPlan:
    """A signed plan for the streams group as the broker describes it, plus ``newcomer`` (no state yet)."""
    c = fleet.config
    read = parse_reader_output(read_streams_groups_lines(c.bootstrap, {}, 30.0), int(time.time() * 1000))
    group = next(g for g in read.groups if g.group_id == c.application_id)
    stateful = frozenset(TaskId.parse(t) for t in c.stateful_tasks)
    clients = [
        ClientState(
            r.process_id,
            previous_active=frozenset(r.record.active_tasks),
            task_offset_sums={t: -2 for t in r.record.active_tasks if t in stateful},  # actives are caught up
        )
        for r in group_reports([group])
    ]
    clients.append(ClientState(fleet.process_id(newcomer)))
    per_task = max(1, fleet.changelog_records() // max(1, len(stateful)))  # a newcomer lags a whole changelog
    state = GroupState(
        clients, stateful, frozenset(TaskId.parse(t) for t in c.tasks) - stateful, dict.fromkeys(stateful, per_task)
    )
    planned = plan_group(state, configs)
    now = int(time.time() * 1000)
    return ApprovedPlan(
        f"bench-{now}", c.application_id, "streams-bench", now, now + 7_200_000, "streams-bench", now, configs,
        planned.target, tuple(planned.move_order),
    )  # fmt: skip


def follow_steps(fleet: StreamsFleet, plan: ApprovedPlan, settings: Settings, last_trigger_ms: int) -> int:
    """One pass of observe's step rule for the group: trigger its next assignment if due; the last trigger time."""
    c = fleet.config
    group = streams_group(fleet)
    if group is None:
        return last_trigger_ms
    reports = group_reports([group])
    latest = read_latest_by_key(c.bootstrap, DECISIONS_TOPIC)
    now = int(time.time() * 1000)
    state = GroupNow(
        plan_id=plan.plan_id,
        target=plan.target,
        acceptable_recovery_lag=plan.configs.acceptable_recovery_lag,
        decision=group_decision(latest, c.application_id, {r.process_id for r in reports}),
        standbys={r.process_id: frozenset(r.record.standby_tasks) for r in reports},
        offset_sums={r.process_id: dict(r.record.task_offset_sums) for r in reports},
        end_offset_sums=group.end_offset_sums,
        last_trigger_ms=last_trigger_ms,
        now_ms=now,
    )
    if decide_step(state, StepRule(settings.step_min_interval_ms, settings.step_max_wait_ms)).trigger:
        trigger_assignment(assignor_admin(settings, c.bootstrap), c.application_id, settings.kafka_timeout_s)
        return now
    return last_trigger_ms


def run_streams(mode: str, partitions: int, records: int, console: Console) -> dict[str, Any]:
    """The scale-out on the streams protocol: our broker-side assignor following a plan, or the broker's sticky."""
    configs = AssignmentConfigs(max_warmup_replicas=2)
    assignor = BrokerAssignor(broker_assignor_jar(), SIGNER.verify_keys().render()) if mode == "plan" else None
    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker(heap_mb=1024, assignor=assignor) as broker:
        root = Path(tmp)
        config = StreamsFleetConfig(
            broker.bootstrap, root / "fleet", f"bench-streams-{mode}", partitions, plugin=False,
            group_protocol="streams", heap_mb=512,
        )  # fmt: skip
        settings = Settings(
            lake_root=root / "lake", kafka_bootstrap=config.bootstrap, plans_topic=config.plans_topic,
            step_min_interval_ms=5_000,
        )  # fmt: skip
        with StreamsFleet(config) as fleet:
            tag = f"\\[streams {mode}]"
            fleet.produce(records, keys=records)
            start_three_and_count(fleet, records, tag, console)
            three = watching(lambda: streams_settled(fleet), lambda: holdings(fleet), console)
            wait_until(three, 300, "three to settle", poll_s=2)
            plan = None
            last_trigger = 0
            if mode == "plan":
                plan = streams_plan(fleet, configs, "i4")
                client = {"bootstrap.servers": config.bootstrap}
                ensure_topics(client, [plans_topic_spec(settings)], settings.kafka_timeout_s)  # as publish does
                produce_plans(Producer(client), config.plans_topic, [plan.to_record(SIGNER)], settings.kafka_timeout_s)
                pids = {config.application_id: [fleet.process_id(n) for n in ("i1", "i2", "i3", "i4")]}
                outcome = select_assignor(settings, config.bootstrap, pids, ASSIGNOR_NAME)
                console.log(f"{tag} plan {plan.plan_id} published, our assignor selected: {outcome}")
                last_trigger = int(time.time() * 1000)
            # Rebalances on this protocol: the group epochs the broker went through (each one an assignment it
            # computed: the newcomer's join, and each step we trigger), not the clients' log lines.
            epoch = streams_group(fleet)
            before = epoch.group_epoch if epoch is not None else 0
            started = int(time.time() * 1000)
            fleet.start("i4")
            console.log(f"{tag} fourth instance started; waiting for convergence")
            triggered = [last_trigger]

            newcomer = fleet.instances["i4"]

            def done() -> bool:
                if plan is None:  # sticky's end state: the newcomer runs tasks and nothing moves any more
                    return bool(processing(newcomer)) and streams_settled(fleet)
                if at_target(fleet, plan.target):
                    return True
                triggered[0] = follow_steps(fleet, plan, settings, triggered[0])  # as observe --follow would
                return False

            wait_until(watching(done, lambda: f"{tag} {holdings(fleet)}", console), 1800, "convergence", poll_s=2)
            after = streams_group(fleet)
            epochs = (after.group_epoch if after is not None else before) - before
            result = measured(
                fleet, "streams", mode, partitions, started, before, configs, config, rebalance_count=epochs
            )
            console.log(f"{tag} converged: {json.dumps(result)}")
            return result


def scale_out_lower_bound(stateful: Collection[str], records: int, running: int, configs: AssignmentConfigs) -> int:
    """The least any balanced assignment restores when an instance without state joins ``running`` instances caught
    up on the tasks they run (GroupPlan.restore_lower_bound of that group), ``records`` spread evenly over the
    changelogs as streams_plan assumes; in offsets, the measure restored records are compared with."""
    tasks = sorted(TaskId.parse(t) for t in stateful)
    pids = [f"i{n}" for n in range(1, running + 2)]
    held: dict[str, set[TaskId]] = {p: set() for p in pids[:-1]}
    for i, task in enumerate(tasks):
        held[pids[i % running]].add(task)
    clients = [
        ClientState(p, previous_active=frozenset(ts), task_offset_sums=dict.fromkeys(ts, -2)) for p, ts in held.items()
    ]
    per_task = max(1, records // max(1, len(tasks)))
    group = GroupState([*clients, ClientState(pids[-1])], frozenset(tasks), frozenset(), dict.fromkeys(tasks, per_task))
    return restore_lower_bound(group, LagIndex.of(group, configs), configs.num_standby_replicas)


def measured(
    fleet: StreamsFleet, protocol: str, mode: str, partitions: int, started: int, before: int,
    configs: AssignmentConfigs, config: StreamsFleetConfig, probing_s: int | None = None,
    rebalance_count: int | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The row of one run, from the instances' events since the fourth instance started."""
    members = fleet.members()
    # When the final assignment took effect: the newest assignment or task start among the instances.
    converged = max(e["t"] for i in members for e in i.events() if e["event"] in ("assigned", "processing"))
    active = sum(restored_records(members, started).values())
    standby = sum(standby_restored_records(members, started).values())
    return {
        "bench": "streams",
        "protocol": protocol,
        "mode": mode,
        "stateful_tasks": partitions,
        "changelog_records": fleet.changelog_records(),
        "probing_interval_s": probing_s,
        "converged_s": round((converged - started) / 1000, 1),
        "restored_active_records": active,
        "restored_standby_records": standby,
        "restored_records": active + standby,
        "restore_lower_bound": scale_out_lower_bound(
            fleet.config.stateful_tasks, fleet.changelog_records(), len(members) - 1, configs
        ),
        "rebalances": rebalances(members, before) if rebalance_count is None else rebalance_count,
        "actives_started_behind": started_behind(fleet, started, configs.acceptable_recovery_lag),
        "handovers": handovers(members, started),
        "max_pause_s": round(longest_pause(members, started, converged, config.tasks), 1),
    }


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
            start_three_and_count(fleet, records, f"\\[{mode}]", console)
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
            result = measured(fleet, "classic", mode, partitions, started, before, configs, config, probing // 1000)
            console.log(f"\\[{mode}] converged: {json.dumps(result)}")
            return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=24, help="counting (stateful) tasks")
    parser.add_argument("--records", type=int, default=2_400_000, help="input records, all distinct keys")
    parser.add_argument("--modes", default="plan,kafka")
    parser.add_argument("--protocols", default="classic,streams")
    args = parser.parse_args()
    console = Console(stderr=True)
    runs = {"classic": run, "streams": run_streams}
    rows = [
        runs[protocol](mode, args.partitions, args.records, console)
        for protocol in args.protocols.split(",")
        for mode in args.modes.split(",")
    ]
    for row in rows:
        print(json.dumps(row), flush=True)
    table = Table(
        title=f"Kafka Streams scale-out 3 -> 4: {args.partitions} stateful tasks, {args.records:,} changelog records",
        caption="classic plan: plugin + pipeline plan, probing 10 s; classic kafka: Kafka's assignor, probing at its "
        "60 s floor; streams plan: our broker assignor + a plan, steps every 5 s; streams kafka: the broker's sticky. "
        "restored = into active stores + into standby/warmup stores; behind = actives that restored more than the "
        "acceptable lag; vs bound = restored over the least any balanced assignment restores "
        "(GroupPlan.restore_lower_bound)",
    )
    columns = (
        "protocol", "mode", "probing s", "converged s", "restored active", "restored standby", "restored", "vs bound",
    )  # fmt: skip
    for column in (*columns, "rebalances", "behind", "hand-overs", "max pause s"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(
            row["protocol"],
            row["mode"],
            str(row["probing_interval_s"] or "-"),
            str(row["converged_s"]),
            f"{row['restored_active_records']:,}",
            f"{row['restored_standby_records']:,}",
            f"{row['restored_records']:,}",
            f"{row['restored_records'] / row['restore_lower_bound']:.2f}×" if row["restore_lower_bound"] else "-",
            str(row["rebalances"]),
            str(row["actives_started_behind"]),
            str(row["handovers"]),
            str(row["max_pause_s"]),
        )
    Console(width=130).print(table)


if __name__ == "__main__":
    main()
