"""Live groups of real instance processes (assignor.runtime) on the real embedded broker.

Every instance is a child process running `rebalance-planner instance`: SQLite stores per task, changelogs
written by actives and restored by warmups and standbys, reports on the reports topic, plans read from the
plans topic. What happened is read back from the instances' event logs and the reports topic.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from assignor.assignment import GroupAssignment
from jobs.local.broker import EmbeddedBroker
from jobs.local.direct_plan import live_reports, publish_record
from jobs.local.fleet import Fleet, InputLoad
from jobs.local.fleet_events import (
    activation_lags,
    converged,
    double_processing,
    last_event,
    processing,
)
from tests.support.fleet_harness import (
    CONFIGS,
    changelog_ends,
    fleet_config,
    plan_for_newcomer,
    start_settled,
    wait_for_state,
)
from tests.support.kafka_isolation import isolated
from tests.support.runtime_harness import wait_for
from tests.support.signing import SIGNER


@dataclass
class ScaleOut:
    fleet: Fleet
    target: GroupAssignment
    plan_id: str
    published_at: int
    newcomer: str
    converged_in_s: float


@pytest.fixture(scope="module")
def scale_out(tmp_path_factory: pytest.TempPathFactory, kafka: EmbeddedBroker) -> Iterator[ScaleOut]:
    """Two instances under load, a signed plan for three, then the third instance starts."""
    with isolated(kafka) as broker, Fleet(fleet_config(broker.bootstrap, tmp_path_factory.mktemp("fleet"))) as fleet:
        topology = fleet.create_group("orders")
        with InputLoad(broker.bootstrap, topology.source_topics, 150):
            start_settled(fleet, "orders", ["i1", "i2"])
            wait_for_state(fleet, broker.bootstrap, "orders", min_changelog=400)
            plan, planned, newcomer = plan_for_newcomer(
                fleet, broker.bootstrap, "orders", CONFIGS, "_rebalance_reports"
            )
            assert planned.target.clients[newcomer].active, "the plan must move tasks to the new instance"
            published_at = int(time.time() * 1000)
            publish_record(broker.bootstrap, "_rebalance_plans", "orders", plan.to_record(SIGNER))
            fleet.start("orders", "i3")
            started = time.monotonic()
            wait_for(lambda: converged(fleet, "orders", plan.target, plan.plan_id), 150, "the group to reach the plan")
            yield ScaleOut(fleet, plan.target, plan.plan_id, published_at, newcomer, time.monotonic() - started)


def test_scale_out_converges_to_the_approved_plan(scale_out: ScaleOut) -> None:
    fleet = scale_out.fleet
    assert converged(fleet, "orders", scale_out.target, scale_out.plan_id)
    assert all(i.alive for i in fleet.members("orders"))
    reports = live_reports(fleet.config.bootstrap, "_rebalance_reports", "orders")
    assert {r["plan_id"] for r in reports.values()} == {scale_out.plan_id}


def test_the_new_instance_warms_up_before_it_takes_over_a_task(scale_out: ScaleOut) -> None:
    newcomer = next(i for i in scale_out.fleet.members("orders") if i.name == "i3")
    assignments = [e for e in newcomer.events() if e["event"] == "assigned"]
    first_active = next(n for n, e in enumerate(assignments) if e["active"])
    warmed = {t for e in assignments[:first_active] for t in e["warmup"] + e["standby"]}
    assert set(assignments[first_active]["active"]) <= warmed
    restored = {e["task"]: e["restored"] for e in newcomer.events() if e["event"] == "processing"}
    assert restored and all(count > 0 for count in restored.values())  # its warmups really restored


def test_no_active_task_starts_with_more_than_the_acceptable_lag_to_restore(scale_out: ScaleOut) -> None:
    lags = activation_lags(scale_out.fleet.members("orders"), since_ms=scale_out.published_at)
    assert lags, "tasks were handed over"
    too_far = [lag for lag in lags if lag[2] > CONFIGS.acceptable_recovery_lag]
    assert too_far == []


def test_tasks_that_do_not_move_keep_processing_through_the_rebalances(scale_out: ScaleOut) -> None:
    fleet = scale_out.fleet
    for instance in fleet.members("orders"):
        if instance.name == "i3":
            continue
        staying = {str(t) for t in scale_out.target.clients[instance.process_id].active}
        stops = [e for e in instance.events() if e["event"] == "stop" and e["task"] in staying]
        assert stops == [], f"{instance.name} stopped tasks that were not moving"
        # Records were processed while a rebalance was in flight: between sending JoinGroup and the assignment.
        assignments = [e for e in instance.events() if e["event"] == "assigned" and e["t"] >= scale_out.published_at]
        progressed = [e["processed_while_joining"] for e in assignments if staying & set(e["processed_while_joining"])]
        assert progressed, f"{instance.name} processed nothing while its group rebalanced"
    assert double_processing(fleet.members("orders")) == []


def test_offset_sums_come_from_checkpoints_and_reports_name_the_plan(scale_out: ScaleOut) -> None:
    fleet = scale_out.fleet

    def actives_report_latest() -> bool:  # running actives report -2; the periodic report shows it
        reports = live_reports(fleet.config.bootstrap, "_rebalance_reports", "orders")
        return all(
            r["task_offset_sums"].get(str(t)) == -2
            for pid, r in reports.items()
            for t in scale_out.target.clients[pid].active
        )

    wait_for(actives_report_latest, 20, "reports of the running actives")
    reports = live_reports(fleet.config.bootstrap, "_rebalance_reports", "orders")
    ends = changelog_ends(fleet.config.bootstrap, "orders")
    for pid, report in reports.items():
        wanted = scale_out.target.clients[pid]
        assert set(report["active_tasks"]) == {str(t) for t in wanted.active}
        for task, offset_sum in report["task_offset_sums"].items():
            if offset_sum >= 0:  # a task it gave away or keeps warm: its checkpoint, at most the end
                assert offset_sum <= ends[int(task.split("_")[1])]
    newcomer = next(i for i in fleet.members("orders") if i.name == "i3")
    assert (newcomer.state_dir / "tasks").is_dir() and (newcomer.state_dir / "process.id").read_text().strip() == (
        scale_out.newcomer
    )
    for task in scale_out.target.clients[scale_out.newcomer].active:
        assert (newcomer.state_dir / "tasks" / str(task) / "store.sqlite").exists()
    assert processing(newcomer) == {str(t) for t in scale_out.target.clients[scale_out.newcomer].active}
    assert last_event(newcomer, "assigned") is not None
