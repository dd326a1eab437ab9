"""Live groups of real instance processes under faults: unusable plans, mixed versions, a killed leader,
malformed user data. Real broker, real processes; behaviour read from event logs and the reports topic."""

from __future__ import annotations

import time
from pathlib import Path

from assignor import AssignmentConfigs
from jobs.local.broker import EmbeddedBroker
from jobs.local.direct_plan import approved_plan, group_state, live_reports, publish_record
from jobs.local.fleet import Fleet, InputLoad
from jobs.local.fleet_events import activation_lags, all_tasks_processed_once, converged, last_event, processing
from tests.support.fleet_harness import (
    CONFIGS,
    PARTITIONS,
    TASKS,
    fleet_config,
    plan_for_newcomer,
    start_settled,
    wait_for_state,
)
from tests.support.runtime_harness import wait_for
from tests.support.signing import FORGER, SIGNER

REPORTS, PLANS = "_rebalance_reports", "_rebalance_plans"


def reasons(bootstrap: str, group_id: str) -> dict[str, str | None]:
    return {pid: r["fallback_reason"] for pid, r in live_reports(bootstrap, REPORTS, group_id).items()}


def every_report_says(bootstrap: str, group_id: str, pids: set[str], words: str) -> bool:
    found = reasons(bootstrap, group_id)
    return pids <= set(found) and all(words in (found[p] or "") for p in pids)


def test_unusable_plans_are_not_applied_and_the_reports_say_why(broker: EmbeddedBroker, tmp_path: Path) -> None:
    bootstrap = broker.bootstrap
    with Fleet(fleet_config(bootstrap, tmp_path)) as fleet:
        topology = fleet.create_group("billing")
        with InputLoad(bootstrap, topology.source_topics, 60):
            start_settled(fleet, "billing", ["i1", "i2"])
            wait_for_state(fleet, bootstrap, "billing", min_changelog=20)
            pids = {i.process_id for i in fleet.members("billing")}
            reports = live_reports(bootstrap, REPORTS, "billing")

            # 1. A plan for an instance that is gone.
            gone = group_state(bootstrap, topology, PARTITIONS, reports, ["ghost-instance"])
            plan, _ = approved_plan("billing", gone, CONFIGS)
            publish_record(bootstrap, PLANS, "billing", plan.to_record(SIGNER))
            fleet.start("billing", "i3")
            pids.add(fleet.process_id("billing", "i3"))
            wait_for(lambda: every_report_says(bootstrap, "billing", pids, "departed_instances: "), 60, "departed")

            # 2. A plan signed with another key (it would fit the live group).
            fits = group_state(bootstrap, topology, PARTITIONS, live_reports(bootstrap, REPORTS, "billing"))
            plan, _ = approved_plan("billing", fits, CONFIGS)
            publish_record(bootstrap, PLANS, "billing", plan.to_record(FORGER))
            fleet.stop("billing", "i3")
            pids.discard(fleet.process_id("billing", "i3"))
            wait_for(lambda: every_report_says(bootstrap, "billing", pids, "bad_signature: "), 60, "bad signature")

            # 3. A correctly signed plan that expired.
            fits = group_state(bootstrap, topology, PARTITIONS, live_reports(bootstrap, REPORTS, "billing"))
            plan, _ = approved_plan("billing", fits, CONFIGS, valid_for_ms=-1)
            publish_record(bootstrap, PLANS, "billing", plan.to_record(SIGNER))
            fleet.start("billing", "i3")
            pids.add(fleet.process_id("billing", "i3"))
            wait_for(lambda: every_report_says(bootstrap, "billing", pids, "expired"), 60, "expired")

            # Meanwhile the group works on under the KIP-441 assignor.
            wait_for(lambda: all_tasks_processed_once(fleet, "billing", TASKS), 60, "every task processed once")
            for instance in fleet.members("billing"):
                if instance.alive:
                    assigned = last_event(instance, "assigned")
                    assert assigned is not None and assigned["plan_id"] is None


def test_mixed_protocol_versions_form_a_group_and_switch_up_after_the_upgrade(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    bootstrap = broker.bootstrap
    with Fleet(fleet_config(bootstrap, tmp_path)) as fleet:
        topology = fleet.create_group("ledger")
        with InputLoad(bootstrap, topology.source_topics, 60):
            start_settled(fleet, "ledger", ["old"], protocol_version=1)  # an old build: speaks version 1 only
            fleet.start("ledger", "new")  # joins a version-1 leader with version 2 user data
            wait_for(lambda: all_tasks_processed_once(fleet, "ledger", TASKS), 90, "a working mixed group")
            old, new = fleet.members("ledger")[1], fleet.members("ledger")[0]
            assert (old.name, new.name) == ("old", "new")
            wait_for(lambda: bool(processing(new)) and bool(processing(old)), 60, "both processing")
            new_assignments = [e for e in new.events() if e["event"] == "assigned"]
            assert new_assignments[0]["error_code"] == 1  # version probing: the leader did not understand it
            assert new_assignments[-1]["version"] == 1 and new_assignments[-1]["error_code"] == 0
            assert last_event(old, "assigned")["version"] == 1  # type: ignore[index]

            # Rolling upgrade: the old build restarts as the new one, with its state.
            fleet.stop("ledger", "old")
            fleet.start("ledger", "old")

            def all_on_version_2() -> bool:
                latest = [last_event(i, "assigned") for i in fleet.members("ledger")]
                upgraded = [e for e in latest if e is not None and e["t"] > restarted_at]
                return len(upgraded) == 2 and all(e["version"] == 2 for e in upgraded)

            restarted_at = int(time.time() * 1000)
            wait_for(all_on_version_2, 90, "the group to switch to version 2")
            wait_for(lambda: all_tasks_processed_once(fleet, "ledger", TASKS), 60, "every task processed once")


def test_a_new_leader_continues_the_plan_after_the_leader_is_killed_mid_move(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    bootstrap = broker.bootstrap
    configs = AssignmentConfigs(acceptable_recovery_lag=100, max_warmup_replicas=1, probing_rebalance_interval_ms=3_000)
    with Fleet(fleet_config(bootstrap, tmp_path, configs)) as fleet:
        topology = fleet.create_group("orders")
        with InputLoad(bootstrap, topology.source_topics, 150):
            start_settled(fleet, "orders", ["i1", "i2"])
            wait_for_state(fleet, bootstrap, "orders", min_changelog=300)
            plan, planned, newcomer = plan_for_newcomer(fleet, bootstrap, "orders", configs, REPORTS)
            assert len(planned.target.clients[newcomer].active) == 2  # two moves, one warmup at a time
            published_at = int(time.time() * 1000)
            publish_record(bootstrap, PLANS, "orders", plan.to_record(SIGNER))
            i3 = fleet.start("orders", "i3")

            def moving() -> bool:
                assigned = last_event(i3, "assigned")
                return assigned is not None and assigned["plan_id"] == plan.plan_id and bool(assigned["warmup"])

            wait_for(moving, 60, "the first warmup of the plan")
            leaders = [(e["t"], i) for i in fleet.members("orders") for e in i.events() if e["event"] == "leader"]
            _, leader = max(leaders, key=lambda pair: pair[0])
            held_before = {t: s for t, s in (last_event(leader, "joining") or {}).get("offset_sums", {}).items()}
            orphaned = processing(leader)  # no other instance is caught up on these once it is gone
            fleet.kill("orders", leader.name)
            killed_at = int(time.time() * 1000)
            restarted = fleet.start("orders", leader.name)  # the pod comes back with its volume
            wait_for(lambda: converged(fleet, "orders", plan.target, plan.plan_id), 180, "the plan after the kill")

            later = [e for i in fleet.members("orders") for e in i.events() if e["event"] == "leader"]
            assert any(e["t"] > killed_at and e["plan_id"] == plan.plan_id for e in later)
            handed_over = activation_lags(fleet.members("orders"), published_at)
            safe = [lag for lag in handed_over if lag[1] not in orphaned or lag[0] == leader.name]
            assert [lag for lag in safe if lag[2] > configs.acceptable_recovery_lag] == []
            # The restarted instance came back with its checkpoints and reported them when it rejoined.
            rejoined = next(e for e in restarted.events() if e["event"] == "joining" and e["t"] > killed_at)
            assert held_before and set(held_before) <= set(rejoined["offset_sums"])
            assert all(rejoined["offset_sums"][t] >= 0 for t in held_before)


def test_malformed_user_data_gets_an_error_code_and_the_rest_keep_their_tasks(
    broker: EmbeddedBroker, tmp_path: Path
) -> None:
    bootstrap = broker.bootstrap
    with Fleet(fleet_config(bootstrap, tmp_path)) as fleet:
        topology = fleet.create_group("audit")
        with InputLoad(bootstrap, topology.source_topics, 60):
            start_settled(fleet, "audit", ["i1", "i2"])
            before = {i.name: processing(i) for i in fleet.members("audit")}
            broken = fleet.start("audit", "broken", corrupt_user_data=True)
            started_at = int(time.time() * 1000)

            def rejected() -> bool:
                assigned = last_event(broken, "assigned")
                return assigned is not None and assigned["error_code"] == 2

            wait_for(rejected, 60, "the leader's error code for the malformed member")
            leader_events = [e for i in fleet.members("audit") for e in i.events() if e["event"] == "leader"]
            assert any(e["t"] > started_at for e in leader_events)  # a rebalance with it happened
            assert all(i.alive for i in fleet.members("audit"))  # the leader did not crash
            assert processing(broken) == set()
            for instance in fleet.members("audit"):
                if instance.name != "broken":
                    assert processing(instance) == before[instance.name]
                    stops = [e for e in instance.events() if e["event"] == "stop" and e["t"] > started_at]
                    assert stops == []
