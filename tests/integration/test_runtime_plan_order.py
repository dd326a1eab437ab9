"""The order rule by sequence and the fail-safe rule on a real broker: the runtime leader reads the plans topic from
its log start, remembers the highest sequence in its state directory, and never lets a replayed or unverifiable
newest record undo what it verified."""

from __future__ import annotations

import json
import time
from pathlib import Path

from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from assignor import ClientState, GroupState, plan_group
from assignor.protocol.plans import ApprovedPlan, Withdrawal
from assignor.runtime.group_assignor import LeaderInputs, MemberView
from assignor.runtime.kafka_io import ChangelogEndOffsets, PlanSource
from assignor.runtime.state_dir import StateDirectory
from jobs.local.broker import EmbeddedBroker
from tests.integration.test_runtime_group import CONFIGS, END, TASKS, TOPOLOGY, running, settled, topics
from tests.support.runtime_harness import Group, wait_for
from tests.support.signing import SIGNER, VERIFIER

PLANS = "_rebalance_plans"


def _plans_topic(broker: EmbeddedBroker) -> AdminClient:
    # compact,delete: what a retention-bounded plans topic looks like; it also lets the test move the log start.
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    created = admin.create_topics([NewTopic(PLANS, 1, 1, config={"cleanup.policy": "compact,delete"})])
    for future in created.values():
        future.result(10)
    return admin


def _produce(broker: EmbeddedBroker, *values: bytes) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for value in values:
        producer.produce(PLANS, key=b"orders", value=value)
    assert producer.flush(10) == 0


def _plan_record(sequence: int) -> bytes:
    planned = plan_group(
        GroupState([ClientState("p1"), ClientState("p2")], frozenset(TASKS), frozenset(), dict.fromkeys(TASKS, END)),
        CONFIGS,
    )
    now = int(time.time() * 1000)
    plan = ApprovedPlan(
        "plan-old", "orders", "snap", now, now + 600_000, "alice", now, CONFIGS, planned.target,
        tuple(planned.move_order),
    )  # fmt: skip
    return json.dumps(plan.to_record(SIGNER, sequence)).encode()


def _inputs(broker: EmbeddedBroker, ends: ChangelogEndOffsets, state: StateDirectory | None) -> LeaderInputs:
    return LeaderInputs(
        "orders",
        CONFIGS,
        VERIFIER,
        ends,
        PlanSource(broker.bootstrap, PLANS).records,
        lambda: int(time.time() * 1000),
        remembered_sequence=state.plan_sequence if state else lambda _group: None,
        remember_sequence=state.remember_plan_sequence if state else lambda _group, _sequence: None,
    )


def _reasons(group: Group) -> list[tuple[str | None, str | None]]:
    return [(m.view.info.plan_id, m.view.info.fallback_reason) if m.view.info else (None, None)
            for m in group.members.values()]  # fmt: skip


def _all(group: Group, plan_id: str | None, reason_prefix: str | None) -> bool:
    """Both members were told ``plan_id`` and a reason starting with ``reason_prefix`` (None: no reason)."""

    def matches(reason: str | None) -> bool:
        return reason is None if reason_prefix is None else (reason or "").startswith(reason_prefix)

    found = _reasons(group)
    return len(found) == 2 and all(p == plan_id and matches(r) for p, r in found)


def _run_group(broker: EmbeddedBroker, ends: ChangelogEndOffsets, state: StateDirectory | None) -> Group:
    group = Group(broker.bootstrap, "orders", TOPOLOGY, _inputs(broker, ends, state))
    for pid in ("p1", "p2"):
        group.add(running(MemberView(pid)))
    wait_for(lambda: settled(group.members, 2), 60, "two members to settle")
    return group


def test_a_restarted_leader_does_not_honor_a_plan_replayed_after_its_withdrawal(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    topics(broker)
    admin = _plans_topic(broker)
    state = StateDirectory(tmp_path / "leader-state")
    ends = ChangelogEndOffsets(broker.bootstrap)
    now = int(time.time() * 1000)
    plan = _plan_record(now)
    withdrawal = json.dumps(Withdrawal("plan-old", "orders", now + 1, now + 1).to_record(SIGNER)).encode()
    try:
        _produce(broker, plan)
        with _run_group(broker, ends, state) as group:
            wait_for(lambda: _all(group, "plan-old", None), 30, "the plan honored")
            _produce(broker, withdrawal)
            group.members["p1"].view.request_rejoin()
            wait_for(lambda: _all(group, None, "withdrawn: "), 60, "the withdrawal obeyed")
        assert state.plan_sequence("orders") == now + 1  # kept where a restart finds it
        # Someone with write access replays the old signed plan: it is the newest record on the topic now.
        _produce(broker, plan)
        with _run_group(broker, ends, None) as group:  # a new leader, no local state: the topic tells it
            wait_for(lambda: _all(group, None, "replayed: "), 60, "the replay refused")
        # The withdrawal leaves the log (retention, or compaction keeping only the newest record of the key): only
        # the replay is left, from an offset past 0. The floor kept on disk still refuses it.
        futures = admin.delete_records([TopicPartition(PLANS, 0, 2)])
        for future in futures.values():
            future.result(10)
        with _run_group(broker, ends, state) as group:
            wait_for(lambda: _all(group, None, "replayed: "), 60, "the replay refused after the withdrawal left")
    finally:
        ends.close()


def test_a_garbage_newest_record_keeps_the_honored_plan_and_says_why(broker: EmbeddedBroker, tmp_path: Path) -> None:
    topics(broker)
    _plans_topic(broker)
    ends = ChangelogEndOffsets(broker.bootstrap)
    try:
        _produce(broker, _plan_record(int(time.time() * 1000)))
        with _run_group(broker, ends, StateDirectory(tmp_path / "state")) as group:
            wait_for(lambda: _all(group, "plan-old", None), 30, "the plan honored")
            _produce(broker, b"\x00garbage")
            group.members["p1"].view.request_rejoin()
            wait_for(lambda: _all(group, "plan-old", "malformed: "), 60, "the plan kept, the garbage named")
    finally:
        ends.close()
