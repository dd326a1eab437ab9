"""The group leader's decision at each rebalance: honor the approved plan, or say why not and use KIP-441."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from assignor.assignment import ClientAssignment, GroupAssignment
from assignor.configs import AssignmentConfigs
from assignor.high_availability import assign_high_availability
from assignor.planner import honor_plan
from assignor.runtime.plans import PlanRejected, parse_plan, unfit_reason
from assignor.state import ClientState, GroupState
from assignor.task import TaskId


@dataclass(frozen=True)
class LeaderDecision:
    """The assignment for this rebalance and where it came from."""

    assignment: GroupAssignment
    plan_id: str | None  # the plan being honored
    fallback_reason: str | None  # why a plan was not honored (None when honored or when there is none)
    retry_in_ms: int | None = None  # rebalance again this soon, not after the probing interval


def decide(
    group_id: str,
    group: GroupState,
    configs: AssignmentConfigs,
    plan_record: bytes | None,
    signing_key: bytes,
    now_ms: int,
) -> LeaderDecision:
    """Honor the latest plan record of the group when it verifies and fits; else the KIP-441 assignor."""
    if plan_record is None:
        return LeaderDecision(assign_high_availability(group, configs), None, None)
    try:
        plan = parse_plan(plan_record, signing_key)
    except PlanRejected as rejected:
        return LeaderDecision(assign_high_availability(group, configs), None, str(rejected))
    reason = unfit_reason(plan, group_id, group, now_ms)
    if reason is not None:
        return LeaderDecision(assign_high_availability(group, configs), None, reason)
    live = honor_plan(plan.target, group, plan.configs, order=plan.move_order)
    return LeaderDecision(live, plan.plan_id, None)


# Kafka Streams retries a leader that could not fetch changelog end offsets with a follow-up rebalance after its
# retry backoff; a second leaves a broker that is just back time to load its partitions without waiting minutes.
LEADER_RETRY_MS = 1_000


def keep_previous(clients: Sequence[ClientState], reason: str) -> LeaderDecision:
    """What a leader that cannot read its inputs hands out: each member keeps the tasks it had (each active task
    to one member only), and the group rebalances again soon, as Kafka Streams does in that case."""
    taken: set[TaskId] = set()
    kept = {}
    for client in sorted(clients, key=lambda c: c.process_id):
        active = client.previous_active - taken
        taken |= active
        kept[client.process_id] = ClientAssignment(active=active, standby=client.previous_standby - active)
    return LeaderDecision(GroupAssignment(kept, probing_rebalance_needed=True), None, reason, LEADER_RETRY_MS)
