"""The group leader's decision at each rebalance: honor the approved plan, or say why not and use KIP-441."""

from __future__ import annotations

from dataclasses import dataclass

from assignor.assignment import GroupAssignment
from assignor.configs import AssignmentConfigs
from assignor.high_availability import assign_high_availability
from assignor.planner import honor_plan
from assignor.runtime.plans import PlanRejected, parse_plan, unfit_reason
from assignor.state import GroupState


@dataclass(frozen=True)
class LeaderDecision:
    """The assignment for this rebalance and where it came from."""

    assignment: GroupAssignment
    plan_id: str | None  # the plan being honored
    fallback_reason: str | None  # why a plan was not honored (None when honored or when there is none)


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
