"""Fleets of real instance processes for the system tests: settings, settling, and a plan for a newcomer."""

from __future__ import annotations

from pathlib import Path

from assignor import AssignmentConfigs, GroupPlan
from assignor.protocol.plans import ApprovedPlan
from assignor.runtime.kafka_io import ChangelogEndOffsets
from jobs.local.direct_plan import approved_plan, group_state, live_reports
from jobs.local.fleet import Fleet, FleetConfig, group_topology
from jobs.local.fleet_events import settled
from tests.support.runtime_harness import wait_for
from tests.support.signing import VERIFY_KEYS

PARTITIONS = 6
TASKS = {f"0_{p}" for p in range(PARTITIONS)}
# A rebalance round ends as soon as every member has rejoined (about a second for a fleet of processes on a
# loaded machine): probing every 3 s finishes a move soon after its warmup caught up without constant churn.
CONFIGS = AssignmentConfigs(acceptable_recovery_lag=100, max_warmup_replicas=2, probing_rebalance_interval_ms=3_000)


def fleet_config(bootstrap: str, root: Path, configs: AssignmentConfigs = CONFIGS) -> FleetConfig:
    return FleetConfig(
        bootstrap, root, VERIFY_KEYS.render(), configs=configs, partitions=PARTITIONS, report_interval_s=2.0
    )


def changelog_ends(bootstrap: str, group_id: str) -> list[int]:
    ends = ChangelogEndOffsets(bootstrap)
    try:
        topology = group_topology(group_id)
        parts = [(topology.subtopologies[0].changelog_topics[0], p) for p in range(PARTITIONS)]
        return list(ends(parts).values())
    finally:
        ends.close()


def start_settled(fleet: Fleet, group_id: str, names: list[str], **kwargs: object) -> None:
    for name in names:
        fleet.start(group_id, name, **kwargs)  # type: ignore[arg-type]
    wait_for(lambda: settled(fleet, group_id, TASKS), 90, f"{names} to settle, processing every task")


def wait_for_state(fleet: Fleet, bootstrap: str, group_id: str, min_changelog: int) -> None:
    """Until every changelog has min_changelog records and every live instance reported itself."""
    wait_for(lambda: min(changelog_ends(bootstrap, group_id)) >= min_changelog, 90, "changelogs to fill")
    live = {i.process_id for i in fleet.members(group_id) if i.alive}
    wait_for(lambda: live <= set(live_reports(bootstrap, "_rebalance_reports", group_id)), 30, "reports")


def plan_for_newcomer(
    fleet: Fleet, bootstrap: str, group_id: str, configs: AssignmentConfigs, reports_topic: str, name: str = "i3"
) -> tuple[ApprovedPlan, GroupPlan, str]:
    """The signed-to-be plan for the live group plus one new instance `name`; (plan, planned, newcomer's id)."""
    topology = group_topology(group_id)
    newcomer = fleet.process_id(group_id, name)
    reports = live_reports(bootstrap, reports_topic, group_id)
    plan, planned = approved_plan(group_id, group_state(bootstrap, topology, PARTITIONS, reports, [newcomer]), configs)
    return plan, planned, newcomer
