"""The group leader's decision at each rebalance: honor the approved plan, or say why not and use KIP-441."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from assignor.assignment import ClientAssignment, GroupAssignment
from assignor.configs import AssignmentConfigs
from assignor.high_availability import assign_high_availability
from assignor.honor import honor_target
from assignor.protocol.plans import PlanRejected, Reason, Verifier, fit_rejection, target_for
from assignor.state import ClientState, GroupState
from assignor.task import TaskId


@dataclass(frozen=True)
class LeaderDecision:
    """The assignment for this rebalance and where it came from."""

    assignment: GroupAssignment
    plan_id: str | None  # the plan being honored
    fallback_reason: str | None  # why a plan was not honored ("<code>: <detail>"; None when honored or none)
    retry_in_ms: int | None = None  # rebalance again this soon, not after the probing interval
    acted_on_created_at: int | None = None  # created_at of the plan honored or the withdrawal obeyed
    probing_interval_ms: int | None = None  # the honored plan's probing interval
    plan_configs: AssignmentConfigs | None = None  # the honored plan's settings: they apply while it is honored


def decide(
    group_id: str,
    group: GroupState,
    configs: AssignmentConfigs,
    plan_record: bytes | None,
    verifier: Verifier,
    now_ms: int,
    newest_acted_on: int | None = None,
) -> LeaderDecision:
    """Honor the group's newest plan record when it verifies and fits; else the KIP-441 assignor, with the reason.

    ``newest_acted_on``: created_at of the newest plan or withdrawal this leader acted on (older ones are replays)."""
    if plan_record is None:
        return LeaderDecision(assign_high_availability(group, configs), None, None)
    try:
        plan = verifier.verify(plan_record, group_id, now_ms, newest_acted_on)
        rejection = fit_rejection(plan, group)
        if rejection is not None:
            raise rejection
        live = honor_target(target_for(plan.target, group), group, plan.configs, plan.move_order)
    except PlanRejected as rejected:
        return LeaderDecision(
            assign_high_availability(group, configs), None, str(rejected), None, rejected.withdrawn_at
        )
    except Exception as err:
        reason = PlanRejected(Reason.INTERNAL_ERROR, f"{type(err).__name__}: {err}")
        return LeaderDecision(assign_high_availability(group, configs), None, str(reason))
    interval = plan.configs.probing_rebalance_interval_ms
    return LeaderDecision(live, plan.plan_id, None, None, plan.created_at, interval, plan.configs)


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
