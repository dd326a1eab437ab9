"""Deferred resolution in the Kafka Streams plugin on a real rolling bounce: reference-app JVMs on the real broker
with rebalance.planner.scheduled.rebalance.max.delay.ms and rebalance.planner.hold.without.caught.up.copy.

An instance stopped and restarted within the delay gets its counting tasks back with nothing restored into its
active stores (Kafka Streams' restore listener), and nobody else's tasks move; one that stays away loses them at
the rebalance the leader scheduled for the deadline, not before. Instances with the default (0) are the other
Streams system tests.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from assignor.configs import AssignmentConfigs
from assignor.protocol.deferral import DeferralSettings
from jobs.local.broker import EmbeddedBroker
from jobs.local.fleet_events import double_processing, processing
from jobs.local.streams_fleet import (
    StreamsFleet,
    StreamsFleetConfig,
    StreamsInstance,
    assignment,
    processed_once,
    restores,
    settled,
    stopped_tasks,
)
from jobs.polling import wait_until

APP = "bounce"
PARTITIONS = 4  # 4 stateless re-keying tasks (0_*) and 4 counting tasks (1_*)
RECORDS = 20_000  # ~5,000 changelog records per counting task: far more than the acceptable lag
CONFIGS = AssignmentConfigs(acceptable_recovery_lag=100, max_warmup_replicas=2, probing_rebalance_interval_ms=10_000)
# Long enough for a stopped member to leave (10 s session timeout) and a JVM to restart and join on a busy machine.
DELAY_MS = 60_000
# Deadlines for a loaded CI machine (2 cores at load 15): the leader defers a session timeout and a rebalance after
# the stop; a group that got its member back settles in ~10-20 s at that load.
DEFER_S = 90
SETTLE_S = 180
# The plugin's line when it defers (Deferring.apply): "deferring: [<pid>, ...] away, ...".
_DEFERRING = re.compile(r"deferring: \[([^\]]*)\] away, (\d+) task\(s\) held")
_ASSIGNED = ("KIP-441 fallback assignment", "honoring plan", "deferring: ")


def log_text(instance: StreamsInstance) -> str:
    return instance.log_file.read_text(encoding="utf-8", errors="replace") if instance.log_file.exists() else ""


Deferrals = dict[str, list[tuple[str, int]]]


def deferrals(fleet: StreamsFleet) -> Deferrals:
    """Per instance, every deferral it logged as leader: (the away process ids as logged, tasks held)."""
    return {i.name: [(m[1], int(m[2])) for m in _DEFERRING.finditer(log_text(i))] for i in fleet.members()}


def deferrals_since(fleet: StreamsFleet, before: Deferrals) -> list[tuple[str, int]]:
    """The deferrals logged since ``before`` was read."""
    return [d for name, logged in deferrals(fleet).items() for d in logged[len(before.get(name, [])) :]]


def first_processing(instances: list[StreamsInstance], tasks: set[str], since_ms: int) -> int | None:
    """When any of ``tasks`` first began processing on one of ``instances`` since ``since_ms``."""
    starts = [
        e["t"]
        for i in instances
        for e in i.events()
        if e["event"] == "processing" and e["task"] in tasks and e["t"] >= since_ms
    ]
    return min(starts, default=None)


def test_a_bounced_streams_instance_gets_its_tasks_back_without_restoring_and_a_lost_one_only_at_the_deadline(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    config = StreamsFleetConfig(
        broker.bootstrap, tmp_path, APP, PARTITIONS, configs=CONFIGS, reports_topic="bounce-reports",
        plans_topic="bounce-plans", deferral=DeferralSettings(DELAY_MS, hold_without_caught_up_copy=True),
    )  # fmt: skip
    with StreamsFleet(config) as fleet:
        # Settled means all three are members of one stable generation: the first two can count the whole input
        # before the third joins, and bouncing one then would meet the newcomer's join in the same rebalance.
        # Settled on an empty input first: had a counting task moved once it had state, its old owner would keep a
        # caught-up copy, and the leader would rightly fail the task over to it instead of holding it (seen once).
        fleet.start_settled(["i1", "i2", "i3"], RECORDS, input_first=False)  # every record a new key
        # The leader remembers who left, so the bounced instance must not be it: the current leader assigned the
        # settled group and logged it; an instance that never logged an assignment is not the leader.
        away = next(i for i in fleet.live() if not any(line in log_text(i) for line in _ASSIGNED))
        others = [i for i in fleet.live() if i is not away]
        before = {i.name: (assignment(i) or (set(), set()))[0] for i in others}
        its_counting = {t for t in (assignment(away) or (set(), set()))[0] if t.startswith("1_")}
        assert its_counting, "the bounced instance must run counting tasks (with state)"

        # A rolling bounce: it stops, the group notices (session timeout), and it starts again within the delay.
        known = deferrals(fleet)
        stopped_at = int(time.time() * 1000)
        fleet.stop(away.name)
        wait_until(lambda: deferrals_since(fleet, known) != [], DEFER_S, "the leader to defer", poll_s=1)
        (away_ids, held), *_ = deferrals_since(fleet, known)
        assert away_ids == away.process_id and held == len(its_counting)
        assert not its_counting & {t for i in others for t in processing(i)}  # held for it, run by nobody
        back = fleet.start(away.name)
        wait_until(lambda: settled(fleet), SETTLE_S, "the group to settle with it back", poll_s=1)
        assert back.alive
        assert its_counting <= (assignment(back) or (set(), set()))[0]  # its state is there: it got them back
        returned = [r for r in restores([back], stopped_at) if r.task in its_counting]
        assert returned == [] or all(r.records == 0 for r in returned), returned  # nothing restored into actives
        assert restores(others, stopped_at) == []
        for i in others:  # nobody else's tasks were stopped (reshuffled): only the stateless ones it lent them
            assert not stopped_tasks(i, stopped_at) & before[i.name], (i.name, stopped_tasks(i, stopped_at))

        # Now it stays away: its counting tasks move only at the rebalance scheduled for the deadline.
        its_counting = {t for t in (assignment(back) or (set(), set()))[0] if t.startswith("1_")}
        known = deferrals(fleet)
        gone_at = int(time.time() * 1000)
        fleet.stop(away.name)
        wait_until(lambda: deferrals_since(fleet, known) != [], DEFER_S, "the leader to defer again", poll_s=1)
        assert deferrals_since(fleet, known)[0] == (away.process_id, len(its_counting))
        wait_until(lambda: processed_once(fleet), DELAY_MS / 1000 + SETTLE_S, "its tasks to be reassigned", poll_s=1)
        taken_over = first_processing(others, its_counting, gone_at)
        assert taken_over is not None and taken_over >= gone_at + DELAY_MS, (taken_over, gone_at)
        # Until the deadline nothing of theirs moved (the deadline's rebalance is KIP-441's own, balancing the two);
        # the group noticed the departure a session timeout after gone_at, so its deadline is later still.
        for i in others:
            kept = {e["task"] for e in i.events() if e["event"] == "stop" and gone_at <= e["t"] < gone_at + DELAY_MS}
            assert not kept & before[i.name], (i.name, kept)
    assert double_processing(fleet.members()) == []
