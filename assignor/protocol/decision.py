"""The group leader's decision at each rebalance: honor the approved plan, or say why not and use KIP-441."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from assignor.assignment import ClientAssignment, GroupAssignment
from assignor.configs import AssignmentConfigs
from assignor.high_availability import assign_high_availability
from assignor.honor import honor_target
from assignor.protocol.plan_ledger import PlanChoice
from assignor.protocol.plans import PlanRejected, Reason, fit_rejection, target_for
from assignor.state import ClientState, GroupState
from assignor.task import TaskId


@dataclass(frozen=True)
class LeaderDecision:
    """The assignment for this rebalance and where it came from."""

    assignment: GroupAssignment
    plan_id: str | None  # the plan being honored
    # Why a plan was not honored ("<code>: <detail>"; None when none is published). With a plan_id: why the newest
    # record is not the plan honored (it did not verify, so the verified plan stays).
    fallback_reason: str | None
    retry_in_ms: int | None = None  # rebalance again this soon, not after the probing interval
    sequence: int | None = None  # the highest verified sequence the leader knew: older records are replays
    probing_interval_ms: int | None = None  # the honored plan's probing interval
    plan_configs: AssignmentConfigs | None = None  # the honored plan's settings: they apply while it is honored


def decide(group: GroupState, configs: AssignmentConfigs, plans: PlanChoice | None) -> LeaderDecision:
    """Honor the group's verified plan when it fits the live group; else the KIP-441 assignor, with the reason.

    ``plans``: what the leader's PlanLedger chose (None: the group has no plan record). Without a plan every task
    is assigned, members that left included: a leader never keeps a departed member's tasks."""
    if plans is None:
        return LeaderDecision(assign_high_availability(group, configs), None, None)
    sequence = plans.sequence
    if plans.plan is None:
        reason = str(plans.reason) if plans.reason is not None else None
        return LeaderDecision(assign_high_availability(group, configs), None, reason, None, sequence)
    plan = plans.plan
    try:
        rejection = fit_rejection(plan, group)
        if rejection is not None:
            raise rejection
        live = honor_target(target_for(plan.target, group), group, plan.configs, plan.move_order)
    except PlanRejected as rejected:
        # A kept plan that does not fit: the refused newest record (what was last published) is the news.
        why = plans.reason if plans.reason is not None else rejected
        return LeaderDecision(assign_high_availability(group, configs), None, str(why), None, sequence)
    except Exception as err:
        internal = PlanRejected(Reason.INTERNAL_ERROR, f"{type(err).__name__}: {err}")
        return LeaderDecision(assign_high_availability(group, configs), None, str(internal), None, sequence)
    interval = plan.configs.probing_rebalance_interval_ms
    kept = str(plans.reason) if plans.reason is not None else None  # the newest record did not verify
    return LeaderDecision(live, plan.plan_id, kept, None, sequence, interval, plan.configs)


def unreadable(cause: str) -> PlanRejected:
    """The reason of a leader that could not read the plans topic: ``plans_unreadable: <cause>``."""
    return PlanRejected(Reason.PLANS_UNREADABLE, cause)


# Kafka Streams retries a leader that could not fetch changelog end offsets with a follow-up rebalance after its
# retry backoff; a second leaves a broker that is just back time to load its partitions without waiting minutes.
LEADER_RETRY_MS = 1_000


def keep_previous(clients: Sequence[ClientState], tasks: frozenset[TaskId], reason: str) -> LeaderDecision:
    """What a leader that cannot read changelog end offsets hands out: each member keeps the tasks it had (each
    active task to one member only), a task no member holds (its member left) goes to the least-loaded member, and
    the group rebalances again soon, as Kafka Streams does in that case."""
    taken: set[TaskId] = set()
    active_of: dict[str, set[TaskId]] = {}
    ordered = sorted(clients, key=lambda c: c.process_id)
    for client in ordered:
        active_of[client.process_id] = set(client.previous_active - taken)
        taken |= active_of[client.process_id]
    capacity = {c.process_id: c.capacity for c in ordered}
    for task in sorted(tasks - taken):
        if not active_of:
            break
        least = min(active_of, key=lambda pid: (len(active_of[pid]) / capacity[pid], pid))
        active_of[least].add(task)
    kept = {
        c.process_id: ClientAssignment(
            active=frozenset(active_of[c.process_id]), standby=c.previous_standby - active_of[c.process_id]
        )
        for c in ordered
    }
    return LeaderDecision(GroupAssignment(kept, probing_rebalance_needed=True), None, reason, LEADER_RETRY_MS)
