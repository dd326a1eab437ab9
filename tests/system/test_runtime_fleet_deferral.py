"""Deferred resolution on a real rolling bounce (instance processes, real broker): an instance that leaves for a
moment keeps its place; nobody else's tasks move, its tasks wait for it (hold_without_caught_up_copy), and it
takes them back with nothing to restore. One that stays away loses them at the deadline, not before."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

from assignor.protocol.deferral import DeferralSettings
from jobs.local.broker import EmbeddedBroker
from jobs.local.fleet import Fleet, InputLoad, InstanceProcess
from jobs.local.fleet_events import Event, activation_lags, all_tasks_processed_once, double_processing, processing
from jobs.local.fleet_events import settled as fleet_settled
from tests.support.fleet_harness import CONFIGS, TASKS, fleet_config, start_settled, wait_for_state
from tests.support.runtime_harness import wait_for

DELAY_MS = 25_000
NAMES = ["i1", "i2", "i3"]


def leader_events(fleet: Fleet, since_ms: int) -> list[Event]:
    found = [e for i in fleet.members("orders") for e in i.events() if e["event"] == "leader" and e["t"] >= since_ms]
    return sorted(found, key=lambda e: e["t"])


def stops_since(instance: InstanceProcess, since_ms: int) -> list[str]:
    return [e["task"] for e in instance.events() if e["event"] == "stop" and e["t"] >= since_ms]


def test_a_bounced_instance_gets_its_tasks_back_without_restoring_and_a_lost_one_only_at_the_deadline(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    deferral = DeferralSettings(DELAY_MS, hold_without_caught_up_copy=True)
    config = dataclasses.replace(fleet_config(broker.bootstrap, tmp_path), deferral=deferral)
    with Fleet(config) as fleet:
        topology = fleet.create_group("orders")
        with InputLoad(broker.bootstrap, topology.source_topics, 60):
            start_settled(fleet, "orders", NAMES)
            # Past acceptable_recovery_lag, so an instance without a task's state is not caught up on it.
            wait_for_state(fleet, broker.bootstrap, "orders", min_changelog=3 * CONFIGS.acceptable_recovery_lag)
            leader = max(fleet.members("orders"), key=lambda i: max((e["t"] for e in _leaders(i)), default=0))
            away = next(i for i in fleet.members("orders") if i is not leader)  # the leader remembers who left
            others = [i for i in fleet.members("orders") if i is not away]
            its_tasks = processing(away)
            assert its_tasks

            stopped_at = int(time.time() * 1000)
            fleet.stop("orders", away.name)  # a rolling bounce: it leaves the group and comes back
            wait_for(lambda: any(e["away"] for e in leader_events(fleet, stopped_at)), 60, "the leader to defer")
            deferred = next(e for e in leader_events(fleet, stopped_at) if e["away"])
            assert deferred["away"] == [away.process_id] and set(deferred["held"]) == its_tasks
            assert all(stops_since(i, stopped_at) == [] for i in others)  # nobody else's tasks moved
            assert not its_tasks & {t for i in others for t in processing(i)}  # held for it

            back = fleet.start("orders", away.name)
            wait_for(lambda: fleet_settled(fleet, "orders", TASKS), 90, "the group to settle with it back")
            assert processing(back) == its_tasks
            returned = [(task, lag) for name, task, lag in activation_lags([back], stopped_at) if name == away.name]
            assert sorted(returned) == sorted((t, 0) for t in its_tasks)  # nothing to restore
            assert all(stops_since(i, stopped_at) == [] for i in others)

            gone_at = int(time.time() * 1000)
            fleet.stop("orders", away.name)  # now it stays away
            wait_for(lambda: all_tasks_processed_once(fleet, "orders", TASKS), 90, "its tasks to be reassigned")
            after = leader_events(fleet, gone_at)
            first_away = next(e for e in after if e["away"])
            resolved = next(e for e in after if e["t"] > first_away["t"] and not e["away"])
            assert resolved["t"] >= gone_at + DELAY_MS  # its place was kept until the deadline
        assert double_processing(fleet.members("orders")) == []


def _leaders(instance: InstanceProcess) -> list[Event]:
    return [e for e in instance.events() if e["event"] == "leader"]
