"""A plan published to a settled Kafka Streams group is honored with no member joining or leaving: the plugin's
plan-check follow-up rebalance (rebalance.planner.plan.check.interval.ms, short here) reads it.

The reference app's JVMs run with the plugin on the real broker; the plan is signed here (not by the pipeline,
which test_streams_plugin.py covers) so that it can swap two counting tasks of a group that is already balanced.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator

import pytest

from assignor.assignment import ClientAssignment, GroupAssignment
from assignor.configs import AssignmentConfigs
from assignor.protocol.plans import ApprovedPlan
from assignor.task import TaskId
from jobs.local.broker import EmbeddedBroker
from jobs.local.direct_plan import publish_record
from jobs.local.fleet_events import double_processing
from jobs.local.streams_fleet import (
    StreamsFleet,
    StreamsFleetConfig,
    assignment,
    at_target,
    generation,
    restores,
    settled,
    stopped_tasks,
)
from jobs.polling import wait_until
from tests.support.kafka_isolation import isolated
from tests.support.signing import SIGNER, VERIFY_KEYS

APP = "settled"
PARTITIONS = 4  # 4 stateless re-keying tasks (0_*) and 4 counting tasks (1_*)
RECORDS = 20_000  # ~5,000 changelog records per counting task: far more than the acceptable lag
CONFIGS = AssignmentConfigs(acceptable_recovery_lag=100, max_warmup_replicas=2, probing_rebalance_interval_ms=10_000)
PLAN_CHECK_MS = 5_000
REPORTS, PLANS = "settled-reports", "settled-plans"

log = logging.getLogger(__name__)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, kafka: EmbeddedBroker) -> Iterator[StreamsFleet]:
    """Three instances with state, settled: every task processed once, no warmup anywhere."""
    root = tmp_path_factory.mktemp("plan-check")
    with isolated(kafka) as broker:
        config = StreamsFleetConfig(
            broker.bootstrap, root, APP, PARTITIONS, VERIFY_KEYS.render(), configs=CONFIGS,
            reports_topic=REPORTS, plans_topic=PLANS, plan_check_interval_ms=PLAN_CHECK_MS,
        )  # fmt: skip
        with StreamsFleet(config) as fleet:
            fleet.start_settled(["i1", "i2", "i3"], RECORDS)
            yield fleet


def swapped(fleet: StreamsFleet) -> tuple[GroupAssignment, set[str]]:
    """The live assignment with one counting task of each of two instances traded; the target and the two tasks."""
    held = {i.process_id: (assignment(i) or (set(), set()))[0] for i in fleet.live()}
    owners = sorted((pid, sorted(t for t in tasks if t.startswith("1_"))) for pid, tasks in held.items())
    (a, a_tasks), (b, b_tasks) = [(pid, tasks) for pid, tasks in owners if tasks][:2]
    moved_a, moved_b = a_tasks[0], b_tasks[0]
    held[a] = (held[a] - {moved_a}) | {moved_b}
    held[b] = (held[b] - {moved_b}) | {moved_a}
    clients = {pid: ClientAssignment(active=frozenset(TaskId.parse(t) for t in tasks)) for pid, tasks in held.items()}
    return GroupAssignment(clients), {moved_a, moved_b}


def plan_check_stops(fleet: StreamsFleet) -> dict[str, set[str]]:
    """The tasks each instance stopped during the next plan-check rebalance of the settled group."""
    wait_until(lambda: settled(fleet), 120, "the group to be settled", poll_s=1)
    members = fleet.members()
    since, before = int(time.time() * 1000), generation(members)
    wait_until(lambda: generation(fleet.members()) > before, 30, "a plan-check rebalance of the settled group")
    wait_until(lambda: settled(fleet), 120, "the group to settle after the plan check", poll_s=1)
    return {i.name: stopped_tasks(i, since) for i in members}


def planner_log(fleet: StreamsFleet) -> str:
    """What each instance's plugin and consumer said lately: why a rebalance moved something."""
    keep = ("rebalance planner", "KIP-441", "honoring", "fallback", "lost", "Lost", "revok")
    lines = [f"{i.name}: {line}" for i in fleet.members() for line in i.log_tail(400).splitlines()]
    return "\n".join(line for line in lines if any(k in line for k in keep))[-6_000:]


def test_a_plan_published_to_a_settled_group_is_honored_by_a_plan_check(fleet: StreamsFleet) -> None:
    # A rebalance that changes nothing revokes nothing (KIP-429). On a starved machine one member can miss its
    # session (or the leader its lag read) and Kafka moves tasks once; settled again, a plan check must be quiet.
    stops = plan_check_stops(fleet)
    if any(stops.values()):
        log.warning("a plan check moved tasks %s; once more:\n%s", stops, planner_log(fleet))
        stops = plan_check_stops(fleet)
    assert not any(stops.values()), f"a plan check of a settled group stopped {stops}:\n{planner_log(fleet)}"

    target, moved = swapped(fleet)
    now = int(time.time() * 1000)
    plan = ApprovedPlan(
        plan_id=f"plan-{uuid.uuid4().hex[:12]}", group_id=APP, snapshot_id=f"plan-check-{now}", created_at=now,
        valid_until=now + 600_000, approved_by="tester", approved_at=now, configs=CONFIGS, target=target,
        move_order=tuple(sorted(TaskId.parse(t) for t in moved)),
    )  # fmt: skip
    publish_record(fleet.config.bootstrap, PLANS, APP, plan.to_record(SIGNER))

    wait_until(lambda: at_target(fleet, target), 120, "the settled group to reach the plan's target", poll_s=1)
    assert [i.name for i in fleet.live()] == ["i1", "i2", "i3"], "no member joined or left"
    for instance in fleet.members():
        kept = {str(t) for t in target.clients[instance.process_id].active} - moved
        assert not kept & stopped_tasks(instance, now), f"{instance.name} stopped tasks the plan does not move"
    too_far = [r for r in restores(fleet.members(), now) if r.records > CONFIGS.acceptable_recovery_lag]
    assert not too_far, "moved tasks warm up first, then restore at most the acceptable lag"
    assert double_processing(fleet.members()) == []
    wait_until(
        lambda: all(r.get("plan_id") == plan.plan_id for r in fleet.reports().values()),
        30,
        "every report to name the plan",
    )


def test_reports_give_offset_sums_for_state_an_instance_no_longer_holds(fleet: StreamsFleet) -> None:
    """A task that moved away (by the swap, or from the first instance to join, which ran everything for a
    moment) leaves state behind: the reports give it an offset sum (from Kafka's lag and the changelog end
    offsets the plugin lists), though the instance no longer holds the task."""

    def left_behind() -> dict[str, int]:
        found = {}
        for report in fleet.reports().values():
            held = {*report["active_tasks"], *report["standby_tasks"], *report["warmup_tasks"]}
            for task, offset_sum in report["task_offset_sums"].items():
                if task not in held and offset_sum > 0 and "task_offset_sums_error" not in report:
                    found[task] = offset_sum
        return found

    wait_until(lambda: len(left_behind()) >= 2, 60, "reports of state left behind", poll_s=1)
    assert all(offset_sum <= fleet.changelog_records() for offset_sum in left_behind().values())
