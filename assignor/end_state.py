"""The planner's target: the balanced end state that restores and moves as little as possible, and that same
target adapted to a live group that no longer fits it."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from assignor.assignment import ClientAssignment, GroupAssignment
from assignor.configs import AssignmentConfigs
from assignor.invariants import balance_violations, validity_violations
from assignor.lags import LagIndex
from assignor.placement import Placement
from assignor.standby import place_standbys
from assignor.state import ClientState, GroupState
from assignor.target import (
    EXACT_STANDBY_MAX_EDGES,
    ActiveCosts,
    solve_active_target,
    solve_active_targets_within,
    solve_standby_target,
)
from assignor.task import TaskId


def previous_owners(group: GroupState) -> dict[TaskId, frozenset[str]]:
    owners: dict[TaskId, set[str]] = {}
    for client in group.clients:
        for task in client.previous_active:
            owners.setdefault(task, set()).add(client.process_id)
    return {t: frozenset(p) for t, p in owners.items()}


def without_clients(group: GroupState, leaving: frozenset[str]) -> GroupState:
    """The group as if ``leaving`` had gone: their tasks unowned, their state forgotten."""
    return GroupState(
        [c for c in group.clients if c.process_id not in leaving],
        group.stateful_tasks,
        group.stateless_tasks,
        group.changelog_end_offset_sums,
    )


def active_costs(group: GroupState, lags: LagIndex) -> ActiveCosts:
    """What placing each active task on each client costs: the target solvers' input."""
    return ActiveCosts(
        tasks=sorted(group.all_tasks),
        stateful=group.stateful_tasks,
        process_ids=lags.process_ids,
        capacity={c.process_id: c.capacity for c in group.clients},
        previous_owners=previous_owners(group),
        lags=lags,
    )


def plan_target(
    group: GroupState, configs: AssignmentConfigs, lags: LagIndex | None = None, costs: ActiveCosts | None = None
) -> GroupAssignment:
    """The balanced end state (no warmups) that restores and moves as little as possible (``costs``: the group's
    active_costs, if the caller has them)."""
    if costs is None:
        costs = active_costs(group, lags if lags is not None else LagIndex.of(group, configs))
    return _with_standbys(solve_active_target(costs), group, configs, costs)


def targets_within_moves(
    group: GroupState, configs: AssignmentConfigs, lags: LagIndex, max_moves: int, costs: ActiveCosts | None = None
) -> list[GroupAssignment]:
    """Balanced end states moving at most ``max_moves`` actives, least restore first (see
    solve_active_targets_within): none when no balanced target moves that few. ``costs``: the group's
    active_costs, if the caller has them (plan_group prices the group once for both targets)."""
    if costs is None:
        costs = active_costs(group, lags)
    return [_with_standbys(owners, group, configs, costs) for owners in solve_active_targets_within(costs, max_moves)]


ENUMERATED_PLACEMENTS_MAX = 4_096  # balanced placements plan_group schedules one by one at most
ENUMERATION_SPACE_MAX = 8_192  # placements the search may have to look at (product of each task's choices), at most
ENUMERATION_NODES_MAX = 20_000  # partial placements the enumeration visits before giving up


def balanced_placements(
    group: GroupState, lags: LagIndex, max_moves: int, max_restore: int, standbys: int = 0
) -> list[tuple[int, int, dict[TaskId, str]]] | None:
    """(least restore, moves, placement) of every active placement meeting B1 (actives) and B2 that moves at most
    ``max_moves`` actives and cannot restore less than ``max_restore`` offsets, least first, then fewest moves, then
    by owners. The least restore counts what the actives owe and, per task, what its ``standbys`` least-owing other
    clients owe: no target with these actives and that many standbys restores less. None when there are more
    than ENUMERATED_PLACEMENTS_MAX, the clients each task could go to within ``max_restore`` multiply to more than
    ENUMERATION_SPACE_MAX (checked first: most groups give up at once), or finding them visits more than
    ENUMERATION_NODES_MAX partial placements.

    A depth-first search over tasks in order, cut where the moves, the offsets owed so far plus the least the
    remaining tasks owe at the least, or a client's count of actives cannot stay within B1. The least restore is what
    lets plan_group stop early.
    """
    tasks = sorted(group.all_tasks)
    pids = sorted(c.process_id for c in group.clients)
    capacity = {c.process_id: c.capacity for c in group.clients}
    owners_before = previous_owners(group)
    all_capacity = sum(capacity.values())
    # B1: every ratio lies in [L, L + 1] for some L <= the mean ratio, so no client holds more than this.
    most = {p: (capacity[p] * (len(tasks) + all_capacity)) // all_capacity for p in pids}
    owed = []
    for task in tasks:
        here = {p: lags.owed(p, task) if task in group.stateful_tasks else 0 for p in pids}
        if task in group.stateful_tasks and standbys:
            ranked = sorted((o, p) for p, o in here.items())
            # The task's active on p, and its standbys on the least-owing clients other than p.
            here = {p: here[p] + sum(o for o, q in [r for r in ranked if r[1] != p][:standbys]) for p in pids}
        owed.append(here)
    moved = [{p: 1 if owners_before.get(t) and p not in owners_before[t] else 0 for p in pids} for t in tasks]
    least_after = [0] * (len(tasks) + 1)  # least the tasks from index i on owe
    for i in range(len(tasks) - 1, -1, -1):
        least_after[i] = least_after[i + 1] + min(owed[i].values(), default=0)
    slack = max_restore - least_after[0]
    if slack < 0:
        return []
    space = 1
    for i in range(len(tasks)):
        least = least_after[i] - least_after[i + 1]
        space *= sum(1 for p in pids if owed[i][p] - least <= slack)
        if space > ENUMERATION_SPACE_MAX:
            return None
    found: list[tuple[int, int, tuple[str, ...]]] = []
    counts = dict.fromkeys(pids, 0)
    chosen: list[str] = []
    visited = 0

    def visit(i: int, restore: int, moves: int) -> bool:
        nonlocal visited
        visited += 1
        if visited > ENUMERATION_NODES_MAX:
            return False
        if i == len(tasks):
            found.append((restore, moves, tuple(chosen)))
            return len(found) <= ENUMERATED_PLACEMENTS_MAX
        for pid in pids:
            here, move = restore + owed[i][pid], moves + moved[i][pid]
            if counts[pid] >= most[pid] or move > max_moves or here + least_after[i + 1] > max_restore:
                continue
            counts[pid] += 1
            chosen.append(pid)
            going = visit(i + 1, here, move)
            chosen.pop()
            counts[pid] -= 1
            if not going:
                return False
        return True

    if not visit(0, 0, 0):
        return None
    placements = []
    for least, moves, owners in sorted(found):
        placement = dict(zip(tasks, owners, strict=True))
        actives = {p: ClientAssignment(active=frozenset(t for t, o in placement.items() if o == p)) for p in pids}
        if not balance_violations(GroupAssignment(actives), group, replicas=False):
            placements.append((least, moves, placement))
    return placements


def with_standbys(
    owners: Mapping[TaskId, str], group: GroupState, configs: AssignmentConfigs, costs: ActiveCosts
) -> GroupAssignment:
    """The end state with these actives and the standbys the planner places beside them (least restore)."""
    return _with_standbys(owners, group, configs, costs)


def _with_standbys(
    owners: Mapping[TaskId, str], group: GroupState, configs: AssignmentConfigs, costs: ActiveCosts
) -> GroupAssignment:
    """The end state with these actives and the standbys that restore least beside them."""
    replicas = min(len(group.clients) - 1, configs.num_standby_replicas)
    held_before = {c.process_id: c.previous_standby | c.previous_active for c in group.clients}
    exact = solve_standby_target(costs, owners, replicas, held_before)
    large = len(group.stateful_tasks) * len(group.clients) > EXACT_STANDBY_MAX_EDGES
    if (
        exact is not None
        and large
        and not configs.rack_aware_assignment_tags
        and len(set(costs.capacity.values())) == 1
    ):
        # Equal capacities, no rack tags: every balanced placement is within the model's windows, so nothing scores
        # better than its optimum (and a large group's greedy placement costs more time than the model).
        candidates = [exact]
    elif exact is not None:
        candidates = [_new_standbys(group, configs, costs, owners, replicas), exact]
    else:  # too large for the exact model: two refined greedy placements, the better one wins
        candidates = [
            _new_standbys(group, configs, costs, owners, replicas, refine=True, keep_only_cheapest=keep_cheapest)
            for keep_cheapest in (False, True)
        ]
    # Scored only where there is a choice: one placement pass over the group each (milliseconds at 1,000 tasks).
    scores = [_standby_score(c, owners, group, costs, configs) for c in candidates] if len(candidates) > 1 else []
    standbys = candidates[scores.index(min(scores))] if scores else candidates[0]
    kept = _previous_standbys(group, owners, replicas)
    if kept is not None:
        scores = scores or [_standby_score(standbys, owners, group, costs, configs)]
        kept_score = _standby_score(kept, owners, group, costs, configs)
        # A settled group keeps its standbys: nothing to restore and as balanced as any alternative.
        settled = kept_score[1] == 0 and kept_score[0] <= min(score[0] for score in scores)
        if settled or kept_score <= min(scores):
            standbys = kept
    actives: dict[str, set[TaskId]] = {c.process_id: set() for c in group.clients}
    for task, pid in owners.items():
        actives[pid].add(task)
    return GroupAssignment(
        {
            c.process_id: ClientAssignment(active=frozenset(actives[c.process_id]), standby=standbys[c.process_id])
            for c in group.clients
        }
    )


def _new_standbys(
    group: GroupState,
    configs: AssignmentConfigs,
    costs: ActiveCosts,
    owners: Mapping[TaskId, str],
    replicas: int,
    *,
    refine: bool = False,
    keep_only_cheapest: bool = False,
) -> dict[str, frozenset[TaskId]]:
    """Standbys on the next-most-caught-up clients, spread over tags, balanced with the stateful actives.

    For groups too large for the exact model: with ``refine`` lagging standbys then trade places towards clients
    with more of their state (_swap_towards_caught_up); with ``keep_only_cheapest`` an old copy is kept only where
    it is among its task's cheapest places."""
    placement = Placement(group)
    for task, pid in sorted(owners.items()):
        if task in group.stateful_tasks:
            placement.assign_active(pid, task)
    held_before = {c.process_id: c.previous_standby | c.previous_active for c in group.clients}

    def preference(pid: str, task: TaskId) -> tuple[int, ...]:
        # Next-most-caught-up first; among equals keep the copies clients already have.
        return (costs.restore(task, pid), 0 if task in held_before[pid] else 1)

    keep: dict[TaskId, list[str]] = {}
    for client in group.clients:
        for task in client.previous_standby & group.stateful_tasks:
            keep.setdefault(task, []).append(client.process_id)
    for task, pids in keep.items():
        restore = {p: costs.restore(task, p) for p in pids}
        if keep_only_cheapest:
            # Kept ahead of a caught-up client, a lagging old copy makes the schedule hand its slot over later (K1)
            # at the cost of a warmup round: keep it only while it is among the task's cheapest standby places.
            cheapest = _cheapest_standby_restore(costs, task, owners[task], replicas, len(group.clients))
            pids[:] = [p for p in pids if restore[p] <= cheapest]
        pids.sort(key=lambda p: (restore[p], p))
    stateful = sorted(group.stateful_tasks)
    place_standbys(placement, stateful, replicas, configs.rack_aware_assignment_tags, preference, keep)
    if refine and not configs.rack_aware_assignment_tags:
        _swap_towards_caught_up(placement, costs)
    return {pid: frozenset(tasks) for pid, tasks in placement.standby.items()}


def _swap_towards_caught_up(placement: Placement, costs: ActiveCosts) -> None:
    """A standby that must restore trades places with a standby of a client that has more of its task's state and
    does not hold it, where the pair restores less: loads stay as they are (balance kept).

    Greedy placement then balancing can leave a lagging copy while a caught-up client of its task holds other
    standbys; each such copy also costs the schedule a warmup round later (K1 hands its slot over).
    """
    for pid in placement.process_ids:
        for task in sorted(placement.standby[pid]):
            here = costs.restore(task, pid)
            if here == 0:
                continue
            _, reported = costs.restore_prices(task)
            better = sorted((price, other) for other, price in reported.items() if price < here)
            for price, other in better:
                if placement.holds(other, task):
                    continue
                gain, back = here - price, None
                for candidate in sorted(placement.standby[other]):
                    if placement.holds(pid, candidate):
                        continue
                    change = costs.restore(candidate, pid) - costs.restore(candidate, other)
                    if change < gain and (back is None or change < back[0]):
                        back = (change, candidate)
                if back is not None:
                    placement.standby[pid].discard(task)
                    placement.standby[other].discard(back[1])
                    placement.standby[other].add(task)
                    placement.standby[pid].add(back[1])
                    break


def _cheapest_standby_restore(costs: ActiveCosts, task: TaskId, owner: str, replicas: int, clients: int) -> int:
    """The restore of the ``replicas``-th cheapest client for a standby of ``task`` (any client but its owner)."""
    default, reported = costs.restore_prices(task)
    prices = sorted(price for pid, price in reported.items() if pid != owner)
    unreported = clients - 1 - len(prices)  # the other clients have no state: the whole changelog
    prices = sorted(prices + [default] * min(unreported, replicas))
    return prices[min(replicas, len(prices)) - 1] if prices else default


def _previous_standbys(
    group: GroupState, owners: Mapping[TaskId, str], replicas: int
) -> dict[str, frozenset[TaskId]] | None:
    """The standbys the clients hold now, if they still form a complete set beside the new actives."""
    standbys = {c.process_id: c.previous_standby & group.stateful_tasks for c in group.clients}
    count: dict[TaskId, int] = {}
    for pid, tasks in standbys.items():
        for task in tasks:
            if owners.get(task) == pid:
                return None
            count[task] = count.get(task, 0) + 1
    if any(count.get(task, 0) != replicas for task in group.stateful_tasks):
        return None
    return standbys


def _standby_score(
    standbys: Mapping[str, frozenset[TaskId]],
    owners: Mapping[TaskId, str],
    group: GroupState,
    costs: ActiveCosts,
    configs: AssignmentConfigs,
) -> tuple[Fraction, int, int, int]:
    """(replica imbalance beyond B1, offsets to restore, repeated rack tag values, new copies): lower is better.

    The contract's order for targets is balance, then restore; rack spread is preferred after that.
    """
    capacity = costs.capacity
    load = {pid: len(tasks) for pid, tasks in standbys.items()}
    for task, pid in owners.items():
        if task in group.stateful_tasks:
            load[pid] += 1
    ratios = [Fraction(load[p], capacity[p]) for p in load]
    imbalance = max(Fraction(0), max(ratios) - min(ratios) - 1)
    holders: dict[TaskId, list[str]] = {t: [owners[t]] for t in group.stateful_tasks}
    for pid, tasks in standbys.items():
        for task in tasks:
            holders[task].append(pid)
    tags = {c.process_id: c.client_tags for c in group.clients}
    repeated = 0
    for pids in holders.values():
        for key in configs.rack_aware_assignment_tags:
            values = [tags[p][key] for p in pids if key in tags[p]]
            repeated += len(values) - len(set(values))
    restore = sum(costs.restore(t, pid) for pid, tasks in standbys.items() for t in tasks)
    before = {c.process_id: c.previous_standby for c in group.clients}
    new_copies = sum(len(tasks - before[pid]) for pid, tasks in standbys.items())
    return imbalance, restore, repeated, new_copies


def target_fits(target: GroupAssignment, group: GroupState, configs: AssignmentConfigs) -> bool:
    """Whether the target is a valid end state for exactly this live group: same clients and tasks, standbys
    as configured, no warmups (V1-V4)."""
    if any(ca.warmup for ca in target.clients.values()):
        return False
    return not validity_violations(target, group, configs)


def adapt_target(target: GroupAssignment, group: GroupState, configs: AssignmentConfigs) -> GroupAssignment:
    """The target for the live group: unchanged when it fits, else re-balanced with as few changes as possible.

    Departed instances, new instances, added or removed tasks: the planner places them, with the plan's own
    owners as the previous assignment and no lags, so the result depends only on (target, membership, tasks)
    and stays put while moves proceed.
    """
    if target_fits(target, group, configs):
        return target
    planned = {pid: ca for pid, ca in target.clients.items()}
    clients = []
    for client in group.clients:
        ca = planned.get(client.process_id)
        clients.append(
            ClientState(
                process_id=client.process_id,
                capacity=client.capacity,
                previous_active=(ca.active & group.all_tasks) if ca else frozenset(),
                previous_standby=(ca.standby & group.stateful_tasks) if ca else frozenset(),
                client_tags=client.client_tags,
            )
        )
    synthetic = GroupState(clients, group.stateful_tasks, group.stateless_tasks, {})
    return plan_target(synthetic, configs)
