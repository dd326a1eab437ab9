"""The planner: an exactly balanced, minimal-restore, minimal-move target and a safe multi-step schedule."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import NamedTuple

from assignor.assignment import ClientAssignment, GroupAssignment
from assignor.catch_up import roles_after
from assignor.configs import AssignmentConfigs
from assignor.cost import PlanCost
from assignor.end_state import (
    active_costs,
    balanced_placements,
    plan_target,
    previous_owners,
    targets_within_moves,
    with_standbys,
    without_clients,
)
from assignor.estimate import DEFAULT_RESTORE_RATE, estimated_seconds
from assignor.high_availability import settled_assignment
from assignor.honor import Honoring, move_order
from assignor.invariants import (
    balance_violations,
    repeated_tag_values,
    target_balance_violations,
    validity_violations,
)
from assignor.joint_target import joint_target
from assignor.lags import LagIndex, restore_lower_bound
from assignor.state import GroupState
from assignor.target import EXACT_MODEL_MAX_TASKS, ActiveCosts
from assignor.task import TaskId


@dataclass(frozen=True)
class GroupPlan:
    """A balanced target, the steps that reach it safely, what it costs, and the load skew it leaves.

    ``restore_rate`` is the rate (offsets/second/instance) ``cost.estimated_seconds`` was estimated at; skew after
    is over the processes that stay (all but the ``drained_processes``); ``cost.restore_offsets`` is never below
    ``restore_lower_bound``."""

    target: GroupAssignment
    steps: Sequence[GroupAssignment]
    cost: PlanCost
    max_load_skew_before: float
    max_load_skew_after: float
    restore_rate: float
    drained_processes: int = 0
    move_order: Sequence[TaskId] = ()
    restore_lower_bound: int = 0  # offsets any balanced end state must restore (lags.py, or joint_target.py)

    def __post_init__(self) -> None:
        object.__setattr__(self, "steps", tuple(self.steps))
        object.__setattr__(self, "move_order", tuple(self.move_order))


def _skew(loads: Mapping[str, int], capacity: Mapping[str, int]) -> float:
    ratios = [Fraction(loads.get(p, 0), c) for p, c in capacity.items()]
    return float(max(ratios) - min(ratios)) if ratios else 0.0


def _restore_offsets(target: GroupAssignment, group: GroupState, lags: LagIndex) -> int:
    return sum(
        lags.owed_total(pid, (ca.active | ca.standby) & group.stateful_tasks) for pid, ca in target.clients.items()
    )


def _cost(target: GroupAssignment, group: GroupState, lags: LagIndex) -> tuple[int, int]:
    owners_before = previous_owners(group)
    moves = sum(1 for t, p in target.active_owners().items() if owners_before.get(t) and p not in owners_before[t])
    return _restore_offsets(target, group, lags), moves


def _baseline_target(group: GroupState, configs: AssignmentConfigs) -> GroupAssignment | None:
    """Where the KIP-441 assignor settles (see settled_assignment), if it is a balanced end state.

    The planner's two-stage model (actives, then standbys) can miss a joint optimum; comparing against
    the baseline's own end state guarantees it never plans worse than KIP-441 would do.
    """
    end_state = settled_assignment(group, configs)
    if validity_violations(end_state, group, configs) or balance_violations(end_state, group, replicas=False):
        return None
    return end_state


def plan_group(
    group: GroupState,
    configs: AssignmentConfigs,
    *,
    restore_rate: float | None = None,
    draining: frozenset[str] = frozenset(),
) -> GroupPlan:
    """Plan a group: balanced target, then steps from the live assignment that are each safe (V1-V4, H1, K1).

    The target is plan_target's (least restore, then fewest moves). For groups up to EXACT_MODEL_MAX_TASKS tasks
    with a balanced KIP-441 end state, the plan is never worse than following that end state in moves, warmups,
    rounds and restore: among that end state and every balanced placement moving no more actives than it, each
    completed with the planner's standbys (with_standbys), the least-restore target whose schedule is within all
    four (_cheapest_within), when balanced_placements can list them; else plan_target's if within, else the first
    within of a few targets moving no more (_within_moves), else KIP-441's end state. With ``draining`` process
    ids, see drain_target: those processes end with nothing, reached by the same safe steps.
    """
    if restore_rate is None:  # nothing better known: estimate at the default rate (recorded in the plan)
        restore_rate = DEFAULT_RESTORE_RATE
    if restore_rate <= 0:
        raise ValueError(f"restore_rate must be > 0 offsets/second/instance, got {restore_rate}")
    lags = LagIndex.of(group, configs)
    if draining:
        route = _Route.to(drain_target(group, configs, frozenset(draining)), group, configs, lags)
        # KIP-441 cannot drain (it balances over every live member), so there is no baseline to compare with.
        return route.plan(restore_rate, draining=frozenset(draining))
    costs = active_costs(group, lags)
    plan = _Route.to(plan_target(group, configs, lags, costs), group, configs, lags).plan(restore_rate)
    if len(group.all_tasks) > EXACT_MODEL_MAX_TASKS:
        return _staying_put(plan, group, configs, lags, restore_rate)
    return _staying_put(_searched(plan, group, configs, lags, costs, restore_rate), group, configs, lags, restore_rate)


def _searched(
    plan: GroupPlan,
    group: GroupState,
    configs: AssignmentConfigs,
    lags: LagIndex,
    costs: ActiveCosts,
    restore_rate: float,
) -> GroupPlan:
    """The best of ``plan`` and the targets plan_group compares it with on groups small enough to search."""
    baseline = _baseline_target(group, configs)
    if baseline is None:
        return _with_joint_target(plan, None, group, configs, lags, restore_rate)
    kip441 = _BaselineWalk(_Route.to(baseline, group, configs, lags))
    within = baseline == plan.target or kip441.beaten_by(plan)
    standbys = min(len(group.clients) - 1, configs.num_standby_replicas)
    bound = plan.cost.restore_offsets if within else kip441.restore
    placements = balanced_placements(group, lags, kip441.moves, bound, standbys)
    if placements is not None:
        plan = _cheapest_within(restore_rate, costs, kip441, placements, plan if within else kip441.plan(restore_rate))
    elif not within:
        plan = _within_moves(restore_rate, costs, kip441) or kip441.plan(restore_rate)
    return _with_joint_target(plan, kip441, group, configs, lags, restore_rate)


def _live_assignment(group: GroupState) -> GroupAssignment:
    """What the group runs now, as an end state (its warmups counted as standbys)."""
    return GroupAssignment(
        {c.process_id: ClientAssignment(active=c.previous_active, standby=c.previous_standby) for c in group.clients}
    )


def _staying_put(
    plan: GroupPlan, group: GroupState, configs: AssignmentConfigs, lags: LagIndex, restore_rate: float
) -> GroupPlan:
    """``plan``, or no change where the live assignment is a valid, balanced end state ranked no worse (_rank) that
    warms and rebalances no more.

    Without it a converged group could be planned again: the joint model's end state, once reached, is one the flow
    model would not choose, and ties in restore (every copy caught up) were broken towards the flow's own shape."""
    live = _live_assignment(group)
    if live == plan.target:
        return plan
    if (
        balance_violations(live, group, first_only=True)  # first: a scale-out's live assignment fails it at once
        or validity_violations(live, group, configs)
        or _rank(live, group, configs, lags) > _plan_rank(plan, group, configs)
    ):
        return plan
    stay = _Route.to(live, group, configs, lags).plan(restore_rate)
    if stay.cost.warmups > plan.cost.warmups or stay.cost.rounds > plan.cost.rounds:
        return plan  # a live active not yet caught up is warmed where it is: the plan may hand it over sooner
    return replace(stay, restore_lower_bound=min(plan.restore_lower_bound, stay.cost.restore_offsets))


# A plan within this factor of the cheap restore bound is not searched further (joint_target).
JOINT_MODEL_GAP = Fraction(6, 5)


def _with_joint_target(
    plan: GroupPlan,
    kip441: _BaselineWalk | None,
    group: GroupState,
    configs: AssignmentConfigs,
    lags: LagIndex,
    restore_rate: float,
) -> GroupPlan:
    """``plan``, or the joint model's end state (joint_target) where it ranks better (_rank) and its schedule is
    never worse than KIP-441's; the plan's restore bound raised to the model's proven least restore.

    Solved only where the plan restores more than JOINT_MODEL_GAP times the cheap bound, which keeps most groups of a
    fleet at the flow models' speed (the joint model costs tens of milliseconds a group). With KIP-441's end state
    to beat, a model optimum that moves more than it is solved again within its moves."""
    if plan.cost.restore_offsets * JOINT_MODEL_GAP.denominator <= plan.restore_lower_bound * JOINT_MODEL_GAP.numerator:
        return plan
    joint = joint_target(group, configs, lags)
    if joint is None:
        return plan
    target = joint.target
    if target is not None and kip441 is not None and _cost(target, group, lags)[1] > kip441.moves:
        within = joint_target(group, configs, lags, max_moves=kip441.moves)
        target = None if within is None else within.target
    cheaper = (
        target is not None
        and not validity_violations(target, group, configs)
        and not balance_violations(target, group)  # the model leaves subtopologies mixing both kinds free of B2
        and _rank(target, group, configs, lags) < _plan_rank(plan, group, configs)
    )
    best = plan
    if cheaper and target is not None:
        candidate = _Route.to(target, group, configs, lags).plan(restore_rate)
        if kip441 is None or kip441.beaten_by(candidate):
            best = candidate
    if joint.least_restore > best.restore_lower_bound and _in_joint_model(best.target, group, configs):
        return replace(best, restore_lower_bound=joint.least_restore)
    return best


def _repeated_tag_values(target: GroupAssignment, group: GroupState, configs: AssignmentConfigs) -> int:
    tags = configs.rack_aware_assignment_tags
    return repeated_tag_values(target, group, tags) if tags else 0


def _rank(
    target: GroupAssignment, group: GroupState, configs: AssignmentConfigs, lags: LagIndex
) -> tuple[int, int, int]:
    """The planner's one order of end states, lowest first: offsets to restore, then moves, then repeated rack tag
    values. Restore is what users wait for; moves before spread keeps a converged group's actives where they are."""
    restore, moves = _cost(target, group, lags)
    return restore, moves, _repeated_tag_values(target, group, configs)


def _plan_rank(plan: GroupPlan, group: GroupState, configs: AssignmentConfigs) -> tuple[int, int, int]:
    """_rank of ``plan``'s target, from the cost it already has."""
    return plan.cost.restore_offsets, plan.cost.moves, _repeated_tag_values(plan.target, group, configs)


def _in_joint_model(target: GroupAssignment, group: GroupState, configs: AssignmentConfigs) -> bool:
    """Whether ``target`` is one of the end states joint_target ranges over, so its least restore bounds it."""
    standbys = min(len(group.clients) - 1, configs.num_standby_replicas)
    held = [t for ca in target.clients.values() for t in ca.standby]
    counts = {t: held.count(t) for t in group.stateful_tasks}
    return all(n == standbys for n in counts.values()) and not balance_violations(target, group)


def plan_towards(
    target: GroupAssignment, group: GroupState, configs: AssignmentConfigs, *, restore_rate: float | None = None
) -> GroupPlan:
    """The plan that follows the safe steps from the live assignment to ``target`` (a valid end state for the
    group), and what that costs: how plan_group prices every target it considers."""
    lags = LagIndex.of(group, configs)
    return _Route.to(target, group, configs, lags).plan(DEFAULT_RESTORE_RATE if restore_rate is None else restore_rate)


def _cheapest_within(
    restore_rate: float,
    costs: ActiveCosts,
    kip441: _BaselineWalk,
    placements: Sequence[tuple[int, int, Mapping[TaskId, str]]],
    incumbent: GroupPlan,
) -> GroupPlan:
    """The best-ranked plan (_rank) among ``incumbent`` and the targets of ``placements`` (balanced_placements: least
    restore first) whose schedules are never worse than KIP-441's (_BaselineWalk.beaten_by).

    A placement's least restore is a lower bound of its target's, and its moves are the target's: the search stops at
    the first placement that cannot restore less than the best plan found, and completes (with_standbys) and
    schedules only those that could beat it (no repeated tag values is the least a placement could reach).
    """
    group, configs, lags = kip441.route.group, kip441.route.configs, kip441.route.lags
    best = incumbent
    best_rank = _plan_rank(best, group, configs)
    for least, moves_at_least, owners in placements:
        if least > best_rank[0]:
            break
        if (least, moves_at_least, 0) >= best_rank:
            continue
        target = with_standbys(owners, group, configs, costs)
        if target in (best.target, kip441.route.target) or validity_violations(target, group, configs):
            continue
        if target_balance_violations(target, group, configs):
            continue  # the placement's actives meet B1, but not its stateful replicas
        rank = _rank(target, group, configs, lags)
        if rank >= best_rank:
            continue
        candidate = _Route.to(target, group, configs, lags).plan(restore_rate)
        if kip441.beaten_by(candidate):
            best, best_rank = candidate, rank
    return best


def _within_moves(restore_rate: float, costs: ActiveCosts, kip441: _BaselineWalk) -> GroupPlan | None:
    """The least-restore plan never worse than following KIP-441's end state in any metric, among targets that
    move no more than that end state does, if one is found; else None.

    The restore-first target can move more tasks than KIP-441's end state (shuffling caught-up actives costs no
    restore) and so lose to it on moves alone, while its restore and rounds are far lower. Balanced targets
    within the end state's move count (targets_within_moves) are scheduled in turn, and the first that is never
    worse in moves, warmups, rounds and restore is kept.
    """
    group, configs, lags = kip441.route.group, kip441.route.configs, kip441.route.lags
    for target in targets_within_moves(group, configs, lags, kip441.moves, costs):
        if target == kip441.route.target or validity_violations(target, group, configs):
            continue
        if target_balance_violations(target, group, configs):
            continue
        candidate = _Route.to(target, group, configs, lags).plan(restore_rate)
        if kip441.beaten_by(candidate):
            return candidate
    return None


class _BaselineWalk:
    """The safe steps to KIP-441's end state, followed only as far as comparisons with it need.

    Its moves and restore are known from the end state. Its warmups and rounds so far only grow, and each target
    owner left waiting for warmup budget (honor_step) needs one more warmup at a later step, at most
    max_warmup_replicas per step, and one more step after the last: once a plan is within all four bounds the
    rest need not be scheduled. At the last step the bounds are the schedule's exact metrics.
    """

    def __init__(self, route: _Route):
        self.route = route
        self.restore, self.moves = _cost(route.target, route.group, route.lags)
        self._walk = route.walk()
        self.walked: list[_Step] = []
        self._bounds: list[tuple[int, int]] = []  # (warmups, rounds) lower bounds after each walked step

    def _steps(self) -> Iterator[tuple[int, int]]:
        """(warmups, rounds) lower bounds step by step, walking further only when asked."""
        yield from self._bounds
        warmups = sum(len(ca.warmup) for step in self.walked for ca in step.assignment.clients.values())
        for step in self._walk:
            self.walked.append(step)
            warmups += sum(len(ca.warmup) for ca in step.assignment.clients.values())
            rounds = len(self.walked) + (1 if step.assignment.probing_rebalance_needed else 0)
            if step.waiting:
                rounds = len(self.walked) + math.ceil(step.waiting / self.route.configs.max_warmup_replicas) + 1
            self._bounds.append((warmups + step.waiting, rounds))
            yield self._bounds[-1]

    def beaten_by(self, plan: GroupPlan) -> bool:
        """Whether ``plan`` is never worse than following KIP-441's end state in moves, warmups, rounds and
        restore (walking that schedule only until this is certain)."""
        cost = plan.cost
        if cost.moves > self.moves or cost.restore_offsets > self.restore:
            return False
        return any(cost.warmups <= warmups and cost.rounds <= rounds for warmups, rounds in self._steps())

    def plan(self, restore_rate: float) -> GroupPlan:
        """The whole schedule to KIP-441's end state, as a plan."""
        for _ in self._steps():
            pass
        return self.route.plan(restore_rate, self.walked)


def drain_target(group: GroupState, configs: AssignmentConfigs, draining: frozenset[str]) -> GroupAssignment:
    """The balanced target of the group without ``draining``, those processes added back holding nothing.

    ValueError, naming why, when the drain is impossible: an unknown process, every process drained, or more
    standbys configured than the remaining processes can hold (the live group, drained ones included, still
    expects that many).
    """
    pids = [c.process_id for c in group.clients]
    unknown = sorted(draining - set(pids))
    if unknown:
        raise ValueError(f"cannot drain {unknown}: not processes of the group (its processes: {sorted(pids)})")
    remaining = [p for p in pids if p not in draining]
    if not remaining:
        raise ValueError(f"cannot drain {sorted(draining)}: that is every process of the group, none would be left")
    standbys = min(len(pids) - 1, configs.num_standby_replicas)
    if group.stateful_tasks and standbys > len(remaining) - 1:
        raise ValueError(
            f"cannot drain {sorted(draining)}: each stateful task needs {standbys} standbys beside its active, "
            f"but only {len(remaining)} processes would remain"
        )
    rest = plan_target(without_clients(group, draining), configs)
    return GroupAssignment({pid: rest.clients[pid] if pid in rest.clients else ClientAssignment() for pid in pids})


class _Step(NamedTuple):
    """One step of a schedule, the roles and lags it was computed from, and the target owners it left waiting
    for warmup budget. ``state`` holds the roles only (roles_after): its offset sums are the group's, ``lags``
    are the step's."""

    assignment: GroupAssignment
    state: GroupState
    lags: LagIndex
    waiting: int


@dataclass(frozen=True)
class _Route:
    """What every step towards one target reads: the target, the group with its settings and lags, and the order
    its owners warm up in (move_order). One per target a plan considers."""

    target: GroupAssignment
    group: GroupState
    configs: AssignmentConfigs
    lags: LagIndex  # the group's
    order: Sequence[TaskId]

    @classmethod
    def to(cls, target: GroupAssignment, group: GroupState, configs: AssignmentConfigs, lags: LagIndex) -> _Route:
        """The route to ``target``, its owners warming up cheapest restore first."""
        return cls(target, group, configs, lags, move_order(target, group, configs, lags))

    def walk(self) -> Iterator[_Step]:
        """The safe steps from the live assignment to the target, each with the roles and lags it was computed
        from (lazily)."""
        group, configs = self.group, self.configs
        copies = 1 + min(len(group.clients) - 1, configs.num_standby_replicas)
        limit = math.ceil(len(group.stateful_tasks) * copies / configs.max_warmup_replicas) + 3
        state, state_lags = group, self.lags
        honoring = Honoring(self.target, group, self.order)
        for count in itertools.count(1):
            step, waiting = honoring.next_step(state, configs, state_lags)
            yield _Step(step, state, state_lags, waiting)
            if not step.probing_rebalance_needed:
                return
            if count > limit:  # pragma: no cover - every step warms up or completes at least one move
                raise RuntimeError(f"schedule did not reach the target within {limit} steps")
            state = roles_after(state, step)  # the lags are derived on the next line, so only the roles are needed
            state_lags = state_lags.after_catch_up(step, state.stateful_tasks)

    def plan(
        self, restore_rate: float, walked: Iterable[_Step] | None = None, *, draining: frozenset[str] = frozenset()
    ) -> GroupPlan:
        """The plan following ``walked`` (by default the whole walk()) to the target, and its cost; skew after is
        over the processes that stay."""
        target, group, configs, lags = self.target, self.group, self.configs, self.lags
        done = list(self.walk() if walked is None else walked)
        steps = [step.assignment for step in done]
        states = [(step.state, step.lags) for step in done]
        capacity = {c.process_id: c.capacity for c in group.clients}
        staying = {pid: cap for pid, cap in capacity.items() if pid not in draining}
        before_loads = {c.process_id: len(c.previous_active & group.all_tasks) for c in group.clients}
        after_loads = {pid: len(ca.active) for pid, ca in target.clients.items()}
        restore, moves = _cost(target, group, lags)
        cost = PlanCost(
            moves=moves,
            warmups=sum(len(ca.warmup) for step in steps for ca in step.clients.values()),
            rounds=len(steps),
            restore_offsets=restore,
            # Each step's state is the one before it after full catch-up (walk): who holds what it held owes nothing.
            estimated_seconds=estimated_seconds(steps, states, configs, restore_rate, full_catch_up=True),
        )
        return GroupPlan(
            target=target,
            steps=steps,
            cost=cost,
            max_load_skew_before=_skew(before_loads, capacity),
            max_load_skew_after=_skew(after_loads, staying),
            restore_rate=restore_rate,
            drained_processes=len(draining),
            move_order=self.order,
            restore_lower_bound=restore_lower_bound(group, lags, configs.num_standby_replicas, balanced=not draining),
        )
