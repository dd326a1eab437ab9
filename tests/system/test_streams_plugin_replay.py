"""A replayed plan on a real Kafka Streams application with the plugin: a withdrawn plan is not honored again after
the leader's JVM is killed and restarted, even once the withdrawal has left the plans topic (retention, compaction):
the plugin's replay floor lives beside the Streams state (the reference app sets ``rebalance.planner.state.dir``).
Without that file the same replay is honored, which is what the floor prevents (issue 30: the attack as tried on an
outside application)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_END, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # public, not in __all__
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from assignor.configs import AssignmentConfigs
from assignor.protocol.plans import Withdrawal
from assignor.runtime.group_assignor import Subtopology, Topology
from jobs.local.broker import EmbeddedBroker
from jobs.local.direct_plan import approved_plan, group_state, publish_record
from jobs.local.streams_fleet import StreamsFleet, StreamsFleetConfig
from jobs.polling import wait_until
from tests.support.kafka_isolation import isolated
from tests.support.signing import SIGNER, VERIFY_KEYS

APP = "replayed"
PARTITIONS = 4
CONFIGS = AssignmentConfigs(acceptable_recovery_lag=100, max_warmup_replicas=2, probing_rebalance_interval_ms=10_000)
REPORTS, PLANS = "replay-reports", "replay-plans"


def report_of(fleet: StreamsFleet, name: str, since_ms: int) -> Mapping[str, Any] | None:
    """The instance's newest state report, if written after ``since_ms``."""
    report = fleet.reports().get(fleet.process_id(name))
    return report if report is not None and report["reported_at"] > since_ms else None


def honors(fleet: StreamsFleet, since_ms: int, plan_id: str) -> bool:
    report = report_of(fleet, "i1", since_ms)
    return report is not None and report["plan_id"] == plan_id


def refuses(fleet: StreamsFleet, since_ms: int, reason: str) -> bool:
    report = report_of(fleet, "i1", since_ms)
    return report is not None and report["plan_id"] is None and (report["fallback_reason"] or "").startswith(reason)


def empty_the_plans_topic(bootstrap: str) -> None:
    """What retention (or compaction, once a newer record shares the key) does to old records: the log start moves
    past everything written so far. Kafka deletes records by offset only where the policy includes delete."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    policy = ConfigEntry("cleanup.policy", "compact,delete", incremental_operation=AlterConfigOpType.SET)
    topic = ConfigResource(ResourceType.TOPIC, PLANS, incremental_configs=[policy])
    for future in admin.incremental_alter_configs([topic]).values():
        future.result(30)
    for future in admin.delete_records([TopicPartition(PLANS, 0, OFFSET_END)], request_timeout=30).values():
        future.result(30)


def floor_files(fleet: StreamsFleet) -> list[Path]:
    return sorted((fleet.state_dir("i1") / "rebalance-planner").glob("rebalance-planner-plan-sequence-*"))


def test_a_withdrawn_plan_replayed_after_the_withdrawal_left_the_topic_is_refused_by_the_restarted_leader(
    kafka: EmbeddedBroker, tmp_path: Path
) -> None:
    with isolated(kafka) as broker:
        config = StreamsFleetConfig(
            broker.bootstrap, tmp_path / "fleet", APP, PARTITIONS, VERIFY_KEYS.render(), configs=CONFIGS,
            reports_topic=REPORTS, plans_topic=PLANS, plan_check_interval_ms=3_000,
        )  # fmt: skip
        with StreamsFleet(config) as fleet:
            # One instance: it leads every rebalance, before and after its restart.
            fleet.start_settled(["i1"], 2_000)
            wait_until(lambda: report_of(fleet, "i1", 0) is not None, 60, "the leader's first report")
            topology = Topology(
                (Subtopology(0, (config.input_topic,), ()), Subtopology(1, (config.repartition_topic,),
                                                                       (config.changelog_topic,)))
            )  # fmt: skip
            state = group_state(broker.bootstrap, topology, PARTITIONS, fleet.reports())
            plan, _ = approved_plan(APP, state, CONFIGS)
            now = int(time.time() * 1000)
            honored = json.dumps(plan.to_record(SIGNER, now)).encode("utf-8")
            publish_record(broker.bootstrap, PLANS, APP, honored)
            wait_until(lambda: honors(fleet, now, plan.plan_id), 90, "the plan to be honored (the settled group)")

            since = int(time.time() * 1000)
            withdrawal = Withdrawal(plan.plan_id, APP, since, now + 1).to_record(SIGNER)
            publish_record(broker.bootstrap, PLANS, APP, withdrawal)
            wait_until(lambda: refuses(fleet, since, "withdrawn"), 90, "the withdrawal to be obeyed")
            assert len(floor_files(fleet)) == 1, "the leader keeps the floor beside its Streams state"
            assert floor_files(fleet)[0].read_text().strip() == str(now + 1)

            # The leader crashes; the withdrawal leaves the topic; the old signed plan is sent again.
            fleet.kill("i1")
            empty_the_plans_topic(broker.bootstrap)
            publish_record(broker.bootstrap, PLANS, APP, honored)
            restarted = int(time.time() * 1000)
            fleet.start("i1")
            wait_until(lambda: refuses(fleet, restarted, "replayed"), 120, "the replay refused after the restart")

            # The control: without the floor on disk the topic alone cannot tell the replay from a live plan.
            fleet.kill("i1")
            for path in floor_files(fleet):
                path.unlink()
            restarted = int(time.time() * 1000)
            fleet.start("i1")
            wait_until(lambda: honors(fleet, restarted, plan.plan_id), 120, "the replay honored without the floor")
