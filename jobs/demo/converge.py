"""The demo's last live phase: the scale-out started, every live group with a plan followed until it runs its plan
(the classic groups through the plugin, the streams-protocol group through our broker-side assignor), and observe
run until the plans are marked REALIZED."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from deltalake import DeltaTable

from assignor.protocol.plans import ApprovedPlan, read_record
from assignor.runtime.kafka_io import read_latest_by_key
from jobs.demo.live import LIVE_GROUPS, NEWCOMER, SCALED_OUT, STREAMS_GROUP, LiveGroups
from jobs.demo.planning import OBSERVE
from jobs.demo.progress import Progress
from jobs.local.airflow import LocalAirflow
from jobs.local.direct_plan import live_reports
from jobs.pipeline.status import PlanStatus
from jobs.polling import wait_until
from jobs.settings import Settings


def published(bootstrap: str, settings: Settings) -> dict[str, ApprovedPlan]:
    records = read_latest_by_key(bootstrap, settings.plans_topic)
    keys = settings.plan_verifier().keys
    read = {k.decode(): read_record(v, keys) for k, v in records.items() if v is not None}
    return {group: plan for group, plan in read.items() if isinstance(plan, ApprovedPlan)}


def reported(bootstrap: str, settings: Settings, plans: dict[str, ApprovedPlan]) -> bool:
    """Whether every classic live group's latest reports show exactly its plan's target, warmups done (a streams
    group has no plugin reports: observe reads it from the broker)."""
    for group, plan in plans.items():
        if group == STREAMS_GROUP:
            continue
        reports = live_reports(bootstrap, settings.reports_topic, group)
        if set(reports) != set(plan.target.clients):
            return False
        for pid, wanted in plan.target.clients.items():
            r = reports[pid]
            if r["warmup_tasks"] or (set(r["active_tasks"]), set(r["standby_tasks"])) != (
                {str(t) for t in wanted.active},
                {str(t) for t in wanted.standby},
            ):
                return False
    return True


def plans_of(lake: Path, snapshot_id: str) -> dict[str, dict[str, Any]]:
    """The lake's plans of the snapshot, per group."""
    frame = DeltaTable(str(lake / "plans")).to_pandas()
    frame = frame[frame["snapshot_id"] == snapshot_id]
    return {str(r["group_id"]): dict(r) for _, r in frame.iterrows()}


def wait_for_convergence(
    live: LiveGroups, settings: Settings, snapshot_id: str, timeout_s: float, say: Progress
) -> dict[str, float]:
    """Start the newcomer and wait until every live group with a plan runs it; seconds per group."""
    bootstrap = str(settings.kafka_bootstrap)
    on_topic = published(bootstrap, settings)
    live_plans = {g: p for g, p in on_topic.items() if g in LIVE_GROUPS and p.snapshot_id == snapshot_id}
    say(f"{len(on_topic)} signed plan(s) on {settings.plans_topic}; live groups with a plan: "
        f"{', '.join(sorted(live_plans)) or 'none'}")  # fmt: skip
    live.start_instance(SCALED_OUT, NEWCOMER)
    scaled_at = time.monotonic()
    say(f"scale-out: started {SCALED_OUT}/{NEWCOMER} with an empty state directory")
    times: dict[str, float] = {}

    def all_converged() -> bool:
        for g, plan in live_plans.items():
            if g not in times and live.converged(g, plan):
                times[g] = time.monotonic() - scaled_at
                if g == STREAMS_GROUP:  # assigned by the broker: the first step came with publish, not the newcomer
                    say(f"  {g} runs plan {plan.plan_id} (assigned by our broker-side assignor since publish)")
                else:
                    say(f"  {g} converged to plan {plan.plan_id} after {times[g]:.1f}s")
        return set(times) == set(live_plans)

    wait_until(all_converged, timeout_s, "the live groups to converge to their plans", poll_s=1.0)
    try:  # observe judges by the reports, which follow the assignment by up to a report interval
        wait_until(lambda: reported(bootstrap, settings, live_plans), 60, "the reports to show the plans", 1.0)
    except TimeoutError as err:
        say(f"[yellow]{err}: observe may not mark every plan REALIZED yet[/yellow]")
    return times


def observe(airflow: LocalAirflow, settings: Settings, snapshot_id: str, timeout_s: float, say: Progress) -> None:
    """Runs of the observe DAG (the live assignment recorded, converged plans marked REALIZED) until the streams
    group's plan is REALIZED (observe also triggers its later steps, if any), bounded by ``timeout_s``."""
    runs = [0]

    def streams_realized() -> bool:
        run = airflow.trigger(OBSERVE, {})
        airflow.wait_for_run(OBSERVE, run, timeout_s)
        runs[0] += 1
        plan = plans_of(settings.lake_root, snapshot_id).get(STREAMS_GROUP)
        return plan is None or plan["status"] != PlanStatus.PUBLISHED

    try:
        wait_until(streams_realized, timeout_s, f"observe to mark {STREAMS_GROUP}'s plan REALIZED", poll_s=1.0)
    except TimeoutError as err:
        say(f"[yellow]{err}[/yellow]")
    status = plans_of(settings.lake_root, snapshot_id).get(STREAMS_GROUP, {}).get("status", "no plan")
    say(f"{OBSERVE} recorded the live assignment ({runs[0]} run(s)); {STREAMS_GROUP}'s plan: {status}")
