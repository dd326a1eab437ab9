"""Live groups of real instance processes while the Kafka broker itself fails: stopped and restarted on its
data directory mid-plan, and down while an instance dies. Each test runs its own Apache Kafka broker (a child
JVM with its data under tmp_path), because it stops the broker: the session's shared broker must stay up."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from assignor import AssignmentConfigs
from assignor.runtime.kafka_io import Record, read_records
from jobs.local.broker import EmbeddedBroker
from jobs.local.direct_plan import live_reports, publish_record
from jobs.local.fleet import Fleet, FleetConfig, InputLoad
from jobs.local.fleet_events import converged, last_event, processing, settled
from tests.support.fleet_harness import PARTITIONS, TASKS, plan_for_newcomer, start_settled, wait_for_state
from tests.support.runtime_harness import wait_for
from tests.support.signing import SIGNER, VERIFY_KEYS

REPORTS, PLANS = "_rebalance_reports", "_rebalance_plans"
# Short sessions so a dead member is noticed in seconds; probing every 3 s finishes a move soon after its
# warmup caught up; one warmup at a time, so a plan that moves two tasks is still being honored mid-way.
CONFIGS = AssignmentConfigs(acceptable_recovery_lag=100, max_warmup_replicas=1, probing_rebalance_interval_ms=3_000)
SESSION_TIMEOUT_MS = 3_000


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[EmbeddedBroker]:
    """A broker of this test alone, its data in tmp_path so that it can be stopped and started again."""
    with EmbeddedBroker(data_dir=tmp_path / "kafka") as broker:
        yield broker


def fleet_config(bootstrap: str, root: Path) -> FleetConfig:
    return FleetConfig(
        bootstrap,
        root,
        VERIFY_KEYS.render(),
        configs=CONFIGS,
        partitions=PARTITIONS,
        report_interval_s=2.0,
        session_timeout_ms=SESSION_TIMEOUT_MS,
    )


def uncompacted_topics(bootstrap: str) -> None:
    """The reports and plans topics, compacted but with Kafka's default week-long segments, so that nothing is
    compacted away during the test and every record written before a failure can be looked for after it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [NewTopic(t, 1, 1, config={"cleanup.policy": "compact"}) for t in (REPORTS, PLANS)]
    for future in admin.create_topics(topics).values():
        future.result(15)


def restart(broker: EmbeddedBroker) -> int:
    """Stop the broker (a controlled shutdown, data kept), start it again on the same data and port; the epoch
    ms it serves again."""
    broker.stop()
    assert not broker.running
    broker.start()
    return int(time.time() * 1000)


def missing(before: list[Record], after: list[Record]) -> list[Record]:
    """Records read before the failure that are not, unchanged and at the same offset, in the topic after it."""
    now = set(after)
    return [record for record in before if record not in now]


def test_a_broker_restart_mid_plan_loses_no_plan_or_report_and_the_group_reaches_the_plan(
    own_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    """Its own broker, not the session's: it stops that broker and starts it again on its data directory."""
    bootstrap = own_broker.bootstrap
    uncompacted_topics(bootstrap)
    with Fleet(fleet_config(bootstrap, tmp_path / "fleet")) as fleet:
        topology = fleet.create_group("orders")
        with InputLoad(bootstrap, topology.source_topics, 150):
            start_settled(fleet, "orders", ["i1", "i2"])
            wait_for_state(fleet, bootstrap, "orders", min_changelog=300)
            plan, planned, newcomer = plan_for_newcomer(fleet, bootstrap, "orders", CONFIGS, REPORTS)
            assert len(planned.target.clients[newcomer].active) == 2  # two moves, one warmup at a time
            record = plan.to_record(SIGNER)
            publish_record(bootstrap, PLANS, "orders", record)
            i3 = fleet.start("orders", "i3")

            def honoring() -> bool:
                assigned = last_event(i3, "assigned")
                return assigned is not None and assigned["plan_id"] == plan.plan_id and bool(assigned["warmup"])

            wait_for(honoring, 60, "the first warmup of the plan")
            plans_before, reports_before = read_records(bootstrap, PLANS), read_records(bootstrap, REPORTS)
            back_at = restart(own_broker)

            wait_for(lambda: converged(fleet, "orders", plan.target, plan.plan_id), 150, "the plan after the restart")
            assert all(i.alive for i in fleet.members("orders")), "an instance died with the broker"

            # Nothing acknowledged before the restart is gone, and the plan is still the group's latest.
            plans_after = read_records(bootstrap, PLANS)
            assert missing(plans_before, plans_after) == []
            assert [json.loads(v or b"null") for _, _, k, v in plans_after if k == b"orders"][-1] == record
            assert missing(reports_before, read_records(bootstrap, REPORTS)) == []

            # Every instance rejoined the same group (no process restarted) and a leader honored the plan since.
            for instance in fleet.members("orders"):
                starts = [e for e in instance.events() if e["event"] == "start"]
                assert len(starts) == 1, f"{instance.name} restarted"
                assert any(e["event"] == "assigned" and e["t"] > back_at for e in instance.events())
            leaders = [e for i in fleet.members("orders") for e in i.events() if e["event"] == "leader"]
            assert any(e["t"] > back_at and e["plan_id"] == plan.plan_id for e in leaders)

            # Reports resumed for every instance, name the plan, and were never overtaken by an older one.
            def reported_since_restart() -> bool:
                latest = live_reports(bootstrap, REPORTS, "orders")
                pids = {i.process_id for i in fleet.members("orders")}
                return pids <= set(latest) and all(
                    latest[p]["reported_at"] > back_at and latest[p]["plan_id"] == plan.plan_id for p in pids
                )

            wait_for(reported_since_restart, 30, "reports after the restart")
            times: dict[bytes | None, list[int]] = {}
            for _, _, key, value in read_records(bootstrap, REPORTS):
                times.setdefault(key, []).append(json.loads(value or b"null")["reported_at"])
            assert all(t == sorted(t) for t in times.values())
        # Not asserted here: no double processing. While the broker is down a member whose session expires keeps
        # processing until it hears it was removed, so hand-overs across an outage can overlap (seen in one run of
        # three on this machine); fencing that is the protocol-fidelity work, not the broker's.


def test_a_member_killed_while_the_broker_is_down_is_replaced_by_the_others_after_it_returns(
    own_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    """Its own broker, not the session's: it stops that broker, and an instance dies while it is down."""
    bootstrap = own_broker.bootstrap
    with Fleet(fleet_config(bootstrap, tmp_path / "fleet")) as fleet:
        topology = fleet.create_group("orders")
        with InputLoad(bootstrap, topology.source_topics, 60):
            start_settled(fleet, "orders", ["i1", "i2", "i3"])
            i3 = next(i for i in fleet.members("orders") if i.name == "i3")
            orphaned = processing(i3)
            assert orphaned, "every instance holds tasks before the failure"

            own_broker.stop()
            fleet.kill("orders", "i3")  # dies without leaving: only its session timing out tells the group
            own_broker.start()
            back_at = int(time.time() * 1000)

            survivors = [i for i in fleet.members("orders") if i.name != "i3"]
            wait_for(lambda: settled(fleet, "orders", TASKS), 90, "the group to settle without i3")
            assert all(i.alive for i in survivors), "an instance died with the broker"
            assert orphaned <= {t for i in survivors for t in processing(i)}
            for instance in survivors:
                latest = last_event(instance, "assigned")
                assert latest is not None and latest["t"] > back_at
            leaders = [e for i in survivors for e in i.events() if e["event"] == "leader" and e["t"] > back_at]
            assert leaders and leaders[-1]["members"] == 2
        # Not asserted here: no double processing. While the broker is down a member whose session expires keeps
        # processing until it hears it was removed, so hand-overs across an outage can overlap (seen in one run of
        # three on this machine); fencing that is the protocol-fidelity work, not the broker's.
