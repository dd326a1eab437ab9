"""Honoring an approved target at each rebalance (honor_plan), and the one safe step towards a target that
the planner's schedule repeats (honor_target): move only what is caught up."""

from __future__ import annotations

from collections.abc import Sequence

from assignor.assignment import ClientAssignment, GroupAssignment
from assignor.candidates import least_loaded
from assignor.configs import AssignmentConfigs
from assignor.end_state import adapt_target
from assignor.lags import LagIndex
from assignor.movement import WarmupBudget
from assignor.placement import Placement
from assignor.state import GroupState
from assignor.task import TaskId


def honor_plan(
    target: GroupAssignment,
    group: GroupState,
    configs: AssignmentConfigs,
    *,
    order: Sequence[TaskId] | None = None,
) -> GroupAssignment:
    """The assignment for this rebalance: planned moves whose target owner is caught up happen now; the others
    stay active on a caught-up client while the target owner warms up (at most max_warmup_replicas, in
    ``order``, by default cheapest restore first). No caught-up copy is dropped before its replacement has
    caught up (K1): budget left over warms up those replacements. Parts the target does not know are re-planned."""
    return honor_target(adapt_target(target, group, configs), group, configs, order)


def move_order(
    target: GroupAssignment, group: GroupState, configs: AssignmentConfigs, lags: LagIndex | None = None
) -> list[TaskId]:
    """Stateful tasks whose target owner must still restore, cheapest restore first (``lags``: the group's)."""
    lags = lags if lags is not None else LagIndex.of(group, configs)
    pending = [
        (lags.lag(pid, task) if lags.lag(pid, task) >= 0 else lags.ends.get(task, 0), task)
        for pid, ca in target.clients.items()
        for task in ca.active & group.stateful_tasks
        if not lags.caught_up(pid, task)
    ]
    return [task for _, task in sorted(pending)]


def _keeper(
    placement: Placement, lags: LagIndex, task: TaskId, owner: str, standbys: frozenset[str], before: _HeldBefore
) -> str:
    """Where a task stays active while its target owner restores: H1-safe, least disruptive."""
    caught_up = lags.caught_up_clients(task)
    if caught_up:
        current = [p for p in caught_up if before.ran(p, task)]
        if current:
            return current[0]
        in_target_standbys = [p for p in caught_up if p in standbys]
        return least_loaded(placement.assigned_load, in_target_standbys or caught_up) or caught_up[0]
    best = lags.best_rank(task)
    tied = [p for p in placement.process_ids if lags.rank(p, task) == best]
    current = [p for p in tied if before.ran(p, task)]
    return current[0] if current else tied[0]


class _HeldBefore:
    """Whether a client held a task (active or standby) before this rebalance; asked only where K1 hands a slot
    over or a keeper is chosen, so no client's sets are joined up front (every step of a schedule used to join them
    all, and to map every task to its previous owners)."""

    __slots__ = ("clients",)

    def __init__(self, group: GroupState) -> None:
        self.clients = {c.process_id: c for c in group.clients}

    def ran(self, pid: str, task: TaskId) -> bool:
        """Whether the client ran the task as an active."""
        return task in self.clients[pid].previous_active

    def held(self, pid: str, task: TaskId) -> bool:
        client = self.clients[pid]
        return task in client.previous_active or task in client.previous_standby


def _descending(rank: tuple[int, int]) -> tuple[int, int]:
    return (-rank[0], -rank[1])


def _keep_caught_up_copies(
    placement: Placement,
    lags: LagIndex,
    task: TaskId,
    owner: str,
    copies: int,
    held_before: _HeldBefore,
    budget: WarmupBudget,
) -> None:
    """K1: while fewer than min(c, copies) replicas sit on the task's c caught-up clients, a standby that must
    still restore hands its slot back to a caught-up copy and warms up instead (budget permitting).

    KIP-441 drops a caught-up standby only once its replacement has caught up; losing the active's client
    before then would mean a full restore.
    """
    # Beyond the acceptable lag only reporters can be caught up (LagIndex.caught_up_clients, inlined: every step of
    # a schedule asks this about every task not yet known to be kept).
    caught_up: Sequence[str]
    if lags.ends.get(task, 0) > lags.acceptable_recovery_lag:
        caught_up = lags.caught_up_reporters.get(task, ())
    else:
        caught_up = lags.caught_up_clients(task)
    if not caught_up:
        return
    active, standby, warmup = placement.active, placement.standby, placement.warmup
    needed = min(len(caught_up), copies)
    held = 0
    for p in caught_up:  # most tasks already have enough caught-up copies: stop counting once they do
        if task in active[p] or task in standby[p] or task in warmup[p]:
            held += 1
            if held >= needed:
                return
    without = [p for p in caught_up if task not in active[p] and task not in standby[p] and task not in warmup[p]]
    missing = needed - held
    # Target standbys give way before the target owner (its move is what the plan is waiting for), the
    # least caught up first.
    cold = [p for p in placement.process_ids if task in standby[p] and not lags.caught_up(p, task)]
    if not cold:
        return
    if len(cold) > 1:
        cold.sort(key=lambda p: (p == owner, _descending(lags.rank(p, task)), p))
    # Clients that kept a copy before first: their replica needs no restore at all. Priorities as they are
    # before any hand-over, as a Candidates polled without offers would give them.
    spare = [((not held_before.held(p, task), placement.assigned_load(p)), p) for p in without]
    keepers = [min(spare)] if missing == 1 or len(cold) == 1 else sorted(spare)
    for giver, (_, keeper) in zip(cold[:missing], keepers, strict=False):
        placement.standby[giver].discard(task)
        placement.standby[keeper].add(task)
        if budget.take():
            placement.warmup[giver].add(task)


def honor_target(
    target: GroupAssignment,
    group: GroupState,
    configs: AssignmentConfigs,
    order: Sequence[TaskId] | None = None,
    lags: LagIndex | None = None,
) -> GroupAssignment:
    """The assignment for this rebalance when ``target`` fits the live group (see honor_plan); ``lags``: the
    group's, if the caller has them."""
    return honor_step(target, group, configs, order, lags)[0]


def honor_step(
    target: GroupAssignment,
    group: GroupState,
    configs: AssignmentConfigs,
    order: Sequence[TaskId] | None = None,
    lags: LagIndex | None = None,
) -> tuple[GroupAssignment, int]:
    """honor_target's assignment, and how many target owners wait for warmup budget with no free slot to restore
    in. Under full catch-up each of those still needs a warmup at a later step: nothing else changes for its
    task until it gets one (a lower bound the planner uses to stop following a schedule early)."""
    lags = lags if lags is not None else LagIndex.of(group, configs)
    first = order if order is not None else move_order(target, group, configs, lags)
    return Honoring(target, group, first).step(group, configs, lags)


class Honoring:
    """A target as every honor_step towards it reads it (owners, standby holders, the order tasks go in), built
    once for all the steps of a schedule. ``group``: any state of the schedule (only its tasks are read)."""

    __slots__ = ("_settled", "first", "owners", "pending", "rest", "standby_holders", "stateless", "target")

    def __init__(self, target: GroupAssignment, group: GroupState, order: Sequence[TaskId]) -> None:
        self.target = target
        self.owners = target.active_owners()
        holders: dict[TaskId, list[str]] = {}
        for pid, ca in target.clients.items():
            for task in ca.standby:
                holders.setdefault(task, []).append(pid)
        self.standby_holders = {task: frozenset(pids) for task, pids in holders.items()}
        ordered = [t for t in dict.fromkeys(order) if t in group.stateful_tasks]
        seen = set(ordered)
        self.first = ordered
        self.rest = [t for t in sorted(group.stateful_tasks) if t not in seen]
        self.pending = ordered + self.rest
        self.stateless = sorted(group.stateless_tasks)
        self._settled: _Settled | None = None

    def step(self, group: GroupState, configs: AssignmentConfigs, lags: LagIndex) -> tuple[GroupAssignment, int]:
        """honor_step's result for ``group`` (``lags``: its lags)."""
        return self._step(group, configs, lags, self.pending, None)

    def next_step(self, group: GroupState, configs: AssignmentConfigs, lags: LagIndex) -> tuple[GroupAssignment, int]:
        """step()'s result for the next state of one schedule under full catch-up (the group's state, then each
        step's roles_after with LagIndex.after_catch_up), where a caught-up copy stays caught up.

        So when every task outside the warm-up ``order`` has a caught-up target owner at the first step, those tasks
        are placed the same way at every step (their owner active, their target standbys beside it): they are
        added per client in one go, and only the ``order``'s tasks are decided one by one, as step() would in that
        order (they come first, so the loads they see are the same); the others are re-checked only for K1."""
        settled = self._settled
        if settled is None:
            settled = self._settled = _Settled.of(self, lags)
        if not settled.valid:
            return self.step(group, configs, lags)
        return self._step(group, configs, lags, self.first, settled)

    def uses_settled_tasks(self) -> bool:
        """Whether next_step has placed the tasks outside the order in one go (so far)."""
        return self._settled is not None and self._settled.valid

    def _step(
        self,
        group: GroupState,
        configs: AssignmentConfigs,
        lags: LagIndex,
        decided: Sequence[TaskId],
        settled: _Settled | None,
    ) -> tuple[GroupAssignment, int]:
        """step() over the tasks ``decided`` one by one, then (``settled``) the others added whole."""
        placement = Placement(group)
        budget = WarmupBudget(configs.max_warmup_replicas)
        owners, standby_holders = self.owners, self.standby_holders
        lenders: list[tuple[str, TaskId]] = []
        copies = 1 + configs.num_standby_replicas
        caught_up = lags.caught_up
        no_standbys: frozenset[str] = frozenset()
        kept: set[TaskId] = set()  # tasks already on `copies` caught-up clients: K1 holds for them as placed
        waiting = 0
        held_before = _HeldBefore(group)
        for task in decided:
            owner = owners[task]
            standbys = standby_holders.get(task, no_standbys)
            if caught_up(owner, task):
                placement.assign_active(owner, task)
                placement.standby_of(task, standbys)
                if 1 + sum(caught_up(p, task) for p in standbys) >= copies:
                    kept.add(task)
                continue
            if lags.rank(owner, task) == lags.best_rank(task):
                placement.assign_active(owner, task)
                placement.standby_of(task, standbys)
                continue
            keeper = _keeper(placement, lags, task, owner, standbys, held_before)
            placement.assign_active(keeper, task)
            if keeper in standbys:
                # The keeper holds a target standby: the target owner restores in that standby slot, for free.
                placement.standby_of(task, (standbys - {keeper}) | {owner})
                continue
            restoring = [p for p in standbys if not caught_up(p, task)]
            if restoring:
                # A target standby that must restore anyway lends its slot to the target owner for this step:
                # the owner restores without warmup budget; the lender warms up too if budget is left at the end.
                lender = max(restoring, key=lambda p: (lags.rank(p, task), p))
                placement.standby_of(task, (standbys - {lender}) | {owner})
                lenders.append((lender, task))
                continue
            placement.standby_of(task, standbys)
            if budget.take():
                placement.warmup[owner].add(task)
            else:
                waiting += 1
        unkept = [task for task in decided if task not in kept]
        if settled is not None:
            # After every task decided one by one, as step() places these: their loads count only from here on.
            settled.add_to(placement)
            unkept.extend(settled.unkept(lags, copies))
        for task in unkept:
            _keep_caught_up_copies(placement, lags, task, owners[task], copies, held_before, budget)
        # Last in line for the budget (target owners and K1 come first), lenders restore beside the owner: without
        # this, a lender would wait a whole probing interval after the move before it starts.
        for lender, task in lenders:
            if not placement.holds(lender, task) and budget.take():
                placement.warmup[lender].add(task)
        for task in self.stateless:
            placement.assign_active(owners[task], task)
        # A client placed as the target places it gets the target's own ClientAssignment: from the second step on
        # that is most clients, so fewer are built (interpreted code: assignment.py is not compiled) and the
        # comparison with the target below meets the same objects.
        target = self.target.clients
        clients: dict[str, ClientAssignment] = {}
        for pid in placement.process_ids:
            active, standby, warmup = placement.active[pid], placement.standby[pid], placement.warmup[pid]
            planned = target.get(pid)
            if (
                planned is not None
                and active == planned.active
                and standby == planned.standby
                and warmup == planned.warmup
            ):
                clients[pid] = planned
            else:
                clients[pid] = ClientAssignment(frozenset(active), frozenset(standby), frozenset(warmup))
        return GroupAssignment(clients, probing_rebalance_needed=clients != dict(target)), waiting


class _Settled:
    """For Honoring.next_step: the tasks outside the warm-up order, per client as placed (their target owner
    active, their target standbys), when all their owners are caught up at a schedule's first step; and those
    not yet on enough caught-up copies for K1 to hold (caught-up copies stay caught up, so that list only shrinks)."""

    __slots__ = ("active", "standby", "valid", "waiting")

    def __init__(self, valid: bool) -> None:
        self.valid = valid
        self.active: dict[str, frozenset[TaskId]] = {}
        self.standby: dict[str, frozenset[TaskId]] = {}
        self.waiting: list[tuple[TaskId, frozenset[str]]] = []  # (task, its target standbys)

    @classmethod
    def of(cls, honoring: Honoring, lags: LagIndex) -> _Settled:
        owners = honoring.owners
        if not all(lags.caught_up(owners[task], task) for task in honoring.rest):
            return cls(False)  # not a schedule's start (a live rebalance with an older order): step() decides
        settled = cls(True)
        active: dict[str, set[TaskId]] = {}
        standby: dict[str, set[TaskId]] = {}
        for task in honoring.rest:
            active.setdefault(owners[task], set()).add(task)
            for pid in honoring.standby_holders.get(task, ()):
                standby.setdefault(pid, set()).add(task)
        settled.active = {pid: frozenset(tasks) for pid, tasks in active.items()}
        settled.standby = {pid: frozenset(tasks) for pid, tasks in standby.items()}
        no_standbys: frozenset[str] = frozenset()
        settled.waiting = [(task, honoring.standby_holders.get(task, no_standbys)) for task in honoring.rest]
        return settled

    def add_to(self, placement: Placement) -> None:
        for pid, tasks in self.active.items():
            placement.active[pid] |= tasks
        for pid, tasks in self.standby.items():
            placement.standby[pid] |= tasks

    def unkept(self, lags: LagIndex, copies: int) -> list[TaskId]:
        """The tasks whose owner and caught-up target standbys are still fewer than ``copies``, in order."""
        caught_up = lags.caught_up
        self.waiting = [
            (t, standbys) for t, standbys in self.waiting if 1 + sum(caught_up(p, t) for p in standbys) < copies
        ]
        return [task for task, _ in self.waiting]
