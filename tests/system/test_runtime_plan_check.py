"""A plan published to a settled group of Python runtime instances (no member joining or leaving) is read at the
leader's next plan check and honored; a check that finds nothing new causes no rebalance. Real instance processes
on the real broker."""

from __future__ import annotations

import time
import uuid
from dataclasses import replace

import pytest

from assignor.assignment import ClientAssignment, GroupAssignment
from assignor.protocol.plans import ApprovedPlan
from assignor.task import TaskId
from jobs.local.broker import EmbeddedBroker
from jobs.local.direct_plan import publish_record
from jobs.local.fleet import Fleet, InputLoad, InstanceProcess
from jobs.local.fleet_events import converged, double_processing, last_event
from tests.support.fleet_harness import CONFIGS, fleet_config, start_settled, wait_for_state
from tests.support.kafka_isolation import isolated
from tests.support.runtime_harness import wait_for
from tests.support.signing import SIGNER

GROUP = "orders"
CHECK_S = 2.0


def _checks(instance: InstanceProcess) -> list[dict[str, object]]:
    return [e for e in instance.events() if e["event"] == "plan_check"]


def _rebalances(instances: list[InstanceProcess]) -> int:
    return sum(1 for i in instances for e in i.events() if e["event"] == "assigned")


def _swapped(instances: list[InstanceProcess]) -> tuple[GroupAssignment, set[str]]:
    """The live assignment with one active task of each of two instances traded; the target and the two tasks."""
    held = {}
    for instance in instances:
        assigned = last_event(instance, "assigned")
        assert assigned is not None
        held[instance.process_id] = sorted(str(t) for t in assigned["active"])
    (a, a_tasks), (b, b_tasks) = [(pid, tasks) for pid, tasks in sorted(held.items()) if tasks][:2]
    held[a], held[b] = [*a_tasks[1:], b_tasks[0]], [*b_tasks[1:], a_tasks[0]]
    clients = {pid: ClientAssignment(active=frozenset(TaskId.parse(t) for t in tasks)) for pid, tasks in held.items()}
    return GroupAssignment(clients), {a_tasks[0], b_tasks[0]}


def test_a_plan_published_to_a_settled_group_is_honored_at_the_next_plan_check(
    kafka: EmbeddedBroker, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.mktemp("plan-check")
    with isolated(kafka) as broker:
        config = replace(fleet_config(broker.bootstrap, root), plan_check_interval_s=CHECK_S)
        with Fleet(config) as fleet:
            topology = fleet.create_group(GROUP)
            with InputLoad(broker.bootstrap, topology.source_topics, 50):
                start_settled(fleet, GROUP, ["i1", "i2", "i3"])
                wait_for_state(fleet, broker.bootstrap, GROUP, min_changelog=150)
                members = fleet.members(GROUP)

                # Settled: checks that find nothing new (no plan yet) rebalance nothing. Only a member that has
                # led the group checks.
                wait_for(lambda: any(_checks(i) for i in members), 30, "the leader's first plan check")
                leader = next(i for i in members if _checks(i))
                quiet_since, rebalances = len(_checks(leader)), _rebalances(members)
                wait_for(lambda: len(_checks(leader)) >= quiet_since + 2, 30, "two more plan checks")
                assert all(not c["changed"] for c in _checks(leader)[quiet_since:])
                assert _rebalances(members) == rebalances, "a plan check that found nothing rebalanced the group"

                target, moved = _swapped(members)
                now = int(time.time() * 1000)
                plan = ApprovedPlan(
                    plan_id=f"plan-{uuid.uuid4().hex[:12]}", group_id=GROUP, snapshot_id=f"check-{now}",
                    created_at=now, valid_until=now + 600_000, approved_by="tester", approved_at=now,
                    configs=CONFIGS, target=target, move_order=tuple(sorted(TaskId.parse(t) for t in moved)),
                )  # fmt: skip
                publish_record(broker.bootstrap, fleet.config.plans_topic, GROUP, plan.to_record(SIGNER))
                wait_for(lambda: converged(fleet, GROUP, target, plan.plan_id), 120, "the group to reach the plan")

                assert [i.name for i in fleet.members(GROUP) if i.alive] == ["i1", "i2", "i3"], "nobody came or went"
                assert any(c["changed"] for i in members for c in _checks(i)), "a plan check found the plan"
                for instance in members:
                    kept = {str(t) for t in target.clients[instance.process_id].active} - moved
                    stops = [e for e in instance.events() if e["event"] == "stop" and e["t"] >= now]
                    assert not kept & {str(e["task"]) for e in stops}, f"{instance.name} stopped tasks not moving"
                assert double_processing(members) == []
