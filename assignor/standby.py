"""Standby placement: least-loaded clients, spread over distinct rack tag values when tags are configured."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from assignor.candidates import Candidates, least_loaded
from assignor.placement import Placement
from assignor.task import TaskId


class TagSpread:
    """Per task and tag key, how many of its replicas (active and standbys) sit on each tag value (KIP-708)."""

    def __init__(self, placement: Placement, tag_keys: Sequence[str]) -> None:
        self.placement = placement
        self.tag_keys = tuple(tag_keys)
        self.counts: dict[TaskId, list[Counter[str]]] = {}
        for pid in placement.process_ids:
            for task in sorted(placement.active[pid] | placement.standby[pid]):
                self.add(pid, task)

    def add(self, pid: str, task: TaskId) -> None:
        counters = self.counts.setdefault(task, [Counter() for _ in self.tag_keys])
        for counter, key in zip(counters, self.tag_keys, strict=True):
            value = self.placement.tags[pid].get(key)
            if value is not None:
                counter[value] += 1

    def remove(self, pid: str, task: TaskId) -> None:
        for counter, key in zip(self.counts[task], self.tag_keys, strict=True):
            value = self.placement.tags[pid].get(key)
            if value is not None:
                counter[value] -= 1

    def conflicts(self, pid: str, task: TaskId, ignoring: str | None = None) -> int:
        """Tag keys on which the client repeats a value another replica of the task uses (except ``ignoring``'s)."""
        counters = self.counts.get(task)
        if counters is None:
            return 0
        found = 0
        for counter, key in zip(counters, self.tag_keys, strict=True):
            value = self.placement.tags[pid].get(key)
            if value is None:
                continue
            used = counter[value]
            if pid == ignoring or (ignoring is not None and self.placement.tags[ignoring].get(key) == value):
                used -= 1
            found += used > 0
        return found


Preference = Callable[[str, TaskId], tuple[int, ...]]


def place_standbys(
    placement: Placement,
    tasks: Sequence[TaskId],
    replicas: int,
    tag_keys: Sequence[str],
    preference: Preference | None = None,
    keep: Mapping[TaskId, Sequence[str]] | None = None,
) -> None:
    """Give every task ``replicas`` standbys on clients that do not hold it, then even out the loads.

    ``keep`` lists, per task, clients whose existing copy should stay a standby where balance and tag spread
    allow (best first). Other candidates rank by tag spread, then ``preference(pid, task)``, then load.
    """
    replicas = min(replicas, len(placement.process_ids) - 1)
    if replicas <= 0:
        return
    spread = TagSpread(placement, tag_keys) if tag_keys else None
    if keep:
        _keep_standbys(placement, tasks, replicas, keep, spread)
    have = Counter(t for p in placement.process_ids for t in placement.standby[p])
    missing = {task: replicas - have[task] for task in tasks}
    if spread is not None or preference is not None:
        for task in tasks:
            for _ in range(missing[task]):
                pid = _best_standby_client(placement, task, spread, preference)
                if pid is None:  # pragma: no cover - replicas < clients, and only the active's client holds it
                    break
                placement.standby[pid].add(task)
                if spread is not None:
                    spread.add(pid, task)
    else:
        _place_least_loaded(placement, tasks, missing)
    _balance_standbys(placement, spread, preference)


def _best_standby_client(
    placement: Placement, task: TaskId, spread: TagSpread | None, preference: Preference | None
) -> str | None:
    """A client without the task: fewest repeated rack tag values, then ``preference``, then least loaded (ties
    by process id, as least_loaded breaks them; written out because every standby of a plan is placed here)."""
    best: tuple[Any, ...] | None = None
    best_rank: tuple[Any, ...] = ()
    for pid in placement.process_ids:
        if placement.holds(pid, task):
            continue
        conflicts = spread.conflicts(pid, task) if spread is not None else 0
        rank = (conflicts, preference(pid, task) if preference is not None else ())
        if best is not None and rank > best_rank:
            continue  # worse before the load is compared: the load cannot make up for it
        key = (*rank, placement.assigned_load(pid), pid)
        if best is None or key < best:
            best, best_rank = key, rank
    return None if best is None else best[-1]


def _keep_standbys(
    placement: Placement,
    tasks: Sequence[TaskId],
    replicas: int,
    keep: Mapping[TaskId, Sequence[str]],
    spread: TagSpread | None,
) -> None:
    """Keep existing copies as standbys while each client stays within its capacity share of all replicas."""
    total_capacity = sum(placement.capacity.values())
    copies = len(tasks) * (1 + replicas)
    share = {p: -(-copies * c // total_capacity) for p, c in placement.capacity.items()}  # ceiling
    for task in tasks:
        kept = 0
        for pid in keep.get(task, ()):
            if kept == replicas:
                break
            if placement.holds(pid, task) or len(placement.active[pid]) + len(placement.standby[pid]) >= share[pid]:
                continue
            if spread is not None:
                others = [p for p in placement.process_ids if not placement.holds(p, task)]
                if spread.conflicts(pid, task) > min(spread.conflicts(p, task) for p in others):
                    continue  # a copy elsewhere would spread the task over more racks
            placement.standby[pid].add(task)
            if spread is not None:
                spread.add(pid, task)
            kept += 1


def _place_least_loaded(placement: Placement, tasks: Sequence[TaskId], missing: Mapping[TaskId, int]) -> None:
    clients = Candidates(placement.assigned_load, placement.process_ids, lambda p, t: not placement.holds(p, t))
    for task in tasks:
        for _ in range(missing[task]):
            pid = clients.poll(task)
            if pid is None:  # pragma: no cover - replicas < clients, and only the active's client holds it
                break
            placement.standby[pid].add(task)
            clients.offer(pid)


def _balance_standbys(placement: Placement, spread: TagSpread | None, preference: Preference | None = None) -> None:
    """Shift standbys from the most to the least loaded clients while two differ by more than one per capacity.

    A shift may be a chain (A gives a standby to B, B gives another to C) when no direct move fits. Each
    shift lowers sum(load^2 / capacity), so the loop ends. With rack tags, moves that keep the spread are
    preferred, but balance comes first.
    """
    while True:
        by_load = sorted(placement.process_ids, key=lambda p: (placement.assigned_load(p), p))
        if not _shift_one_standby(placement, by_load, spread, preference):
            return


def _movable(
    placement: Placement,
    src: str,
    dst: str,
    spread: TagSpread | None,
    preference: Preference | None,
    *,
    keep_spread: bool = True,
) -> TaskId | None:
    """A standby of ``src`` that ``dst`` could take over (the one ``dst`` prefers most), or None.

    With ``keep_spread`` a move may not put the task on more repeated rack tag values than before.
    """
    best: tuple[tuple[int, ...], TaskId] | None = None
    for task in sorted(placement.standby[src]):
        if placement.holds(dst, task):
            continue
        if (
            keep_spread
            and spread is not None
            and spread.conflicts(dst, task, ignoring=src) > spread.conflicts(src, task, src)
        ):
            continue
        if preference is None:
            return task
        key = (preference(dst, task), task)
        if best is None or key < best:
            best = key
    return None if best is None else best[1]


def _shift_one_standby(
    placement: Placement, by_load: list[str], spread: TagSpread | None, preference: Preference | None
) -> bool:
    load = {p: placement.assigned_load(p) for p in by_load}  # nothing moves until a shift is found
    for src in reversed(by_load):
        targets = [d for d in by_load if load[src] - load[d] > 1]
        if not targets:
            continue
        path = _shift_path(placement, src, targets, spread, preference)
        if path:
            for giver, taker, task in path:
                placement.standby[giver].discard(task)
                placement.standby[taker].add(task)
                if spread is not None:
                    spread.remove(giver, task)
                    spread.add(taker, task)
            return True
    return False


def _shift_path(
    placement: Placement, src: str, targets: list[str], spread: TagSpread | None, preference: Preference | None
) -> list[tuple[str, str, TaskId]]:
    """The shortest chain of standby moves from ``src`` to the least loaded reachable target.

    A direct move that keeps the rack spread comes first; balance (B1) still wins over the spread, so
    failing that any chain will do.
    """
    if spread is not None:
        for taker in targets:  # least loaded first
            task = _movable(placement, src, taker, spread, preference)
            if task is not None:
                return [(src, taker, task)]
    wanted = set(targets)
    came_from: dict[str, str] = {}
    frontier = [src]
    while frontier:
        reached: list[str] = []
        for giver in frontier:
            for taker in placement.process_ids:
                if taker == src or taker in came_from:
                    continue
                if _takes_any(placement, giver, taker):
                    came_from[taker] = giver
                    reached.append(taker)
        hit = [t for t in reached if t in wanted]
        if hit:
            node = least_loaded(placement.assigned_load, hit) or hit[0]
            path: list[tuple[str, str, TaskId]] = []
            while node != src:
                giver = came_from[node]
                # Which standby moves is chosen only along the path found (nothing moves during the search).
                task = _movable(placement, giver, node, spread, preference, keep_spread=False)
                if task is None:  # pragma: no cover - _takes_any found one
                    return []
                path.append((giver, node, task))
                node = giver
            return path[::-1]
        frontier = reached
    return []


def _takes_any(placement: Placement, giver: str, taker: str) -> bool:
    """Whether ``taker`` could take over one of ``giver``'s standbys (it holds the task in no role)."""
    active, standby, warmup = placement.active[taker], placement.standby[taker], placement.warmup[taker]
    return any(t not in active and t not in standby and t not in warmup for t in placement.standby[giver])
