"""Standby placement: least-loaded clients, spread over distinct rack tag values when tags are configured."""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from assignor.placement import Placement
from assignor.task import TaskId


def used_tag_values(placement: Placement, task: TaskId, tag_keys: Sequence[str], but: str) -> list[set[str]]:
    """Per tag key, the values held by the task's active and standbys on clients other than ``but``."""
    used: list[set[str]] = [set() for _ in tag_keys]
    for other in placement.process_ids:
        if other != but and (task in placement.active[other] or task in placement.standby[other]):
            for values, key in zip(used, tag_keys, strict=True):
                value = placement.tags[other].get(key)
                if value is not None:
                    values.add(value)
    return used


def tag_conflicts(placement: Placement, pid: str, used: list[set[str]], tag_keys: Sequence[str]) -> int:
    """How many tag keys of the client repeat a value a replica already uses (KIP-708 wants none)."""
    return sum(1 for values, key in zip(used, tag_keys, strict=True) if placement.tags[pid].get(key) in values)


def place_standbys(placement: Placement, tasks: Sequence[TaskId], replicas: int, tag_keys: Sequence[str]) -> None:
    """Give every task ``replicas`` standbys on clients that do not hold it, then even out the loads."""
    replicas = min(replicas, len(placement.process_ids) - 1)
    if replicas <= 0:
        return
    if tag_keys:
        for task in tasks:
            for _ in range(replicas):
                used = used_tag_values(placement, task, tag_keys, but="")
                pid = min(
                    (p for p in placement.process_ids if not placement.holds(p, task)),
                    key=lambda p: (tag_conflicts(placement, p, used, tag_keys), placement.assigned_load(p), p),
                )
                placement.standby[pid].add(task)
    else:
        _place_least_loaded(placement, tasks, replicas)
    _balance_standbys(placement, tag_keys)


def _place_least_loaded(placement: Placement, tasks: Sequence[TaskId], replicas: int) -> None:
    heap = [(placement.assigned_load(p), p) for p in placement.process_ids]
    heapq.heapify(heap)
    for task in tasks:
        skipped: list[tuple[float, str]] = []
        for _ in range(replicas):
            while placement.holds(heap[0][1], task):
                skipped.append(heapq.heappop(heap))
            pid = heap[0][1]
            placement.standby[pid].add(task)
            heapq.heapreplace(heap, (placement.assigned_load(pid), pid))
        for entry in skipped:
            heapq.heappush(heap, entry)


def _balance_standbys(placement: Placement, tag_keys: Sequence[str]) -> None:
    """Shift standbys from the most to the least loaded clients while two differ by more than one per capacity.

    A shift may be a chain (A gives a standby to B, B gives another to C) when no direct move fits. Each
    shift lowers sum(load^2 / capacity), so the loop ends. With rack tags only direct moves that keep the
    task's tag spread are made.
    """
    while True:
        by_load = sorted(placement.process_ids, key=lambda p: (placement.assigned_load(p), p))
        if not _shift_one_standby(placement, by_load, tag_keys):
            return


def _movable(placement: Placement, src: str, dst: str, tag_keys: Sequence[str]) -> TaskId | None:
    """A standby of ``src`` that ``dst`` could take over, or None."""
    for task in sorted(placement.standby[src]):
        if placement.holds(dst, task):
            continue
        if tag_keys:
            used = used_tag_values(placement, task, tag_keys, but=src)
            if tag_conflicts(placement, dst, used, tag_keys) > tag_conflicts(placement, src, used, tag_keys):
                continue
        return task
    return None


def _shift_one_standby(placement: Placement, by_load: list[str], tag_keys: Sequence[str]) -> bool:
    for src in reversed(by_load):
        targets = [d for d in by_load if placement.assigned_load(src) - placement.assigned_load(d) > 1]
        if not targets:
            continue
        path = _shift_path(placement, src, set(targets), tag_keys)
        if path:
            for giver, taker, task in path:
                placement.standby[giver].discard(task)
                placement.standby[taker].add(task)
            return True
    return False


def _shift_path(
    placement: Placement, src: str, targets: set[str], tag_keys: Sequence[str]
) -> list[tuple[str, str, TaskId]]:
    """Breadth-first: the shortest chain of standby moves from ``src`` to the least loaded reachable target."""
    came_from: dict[str, tuple[str, TaskId]] = {}
    frontier = [src]
    max_hops = 1 if tag_keys else len(placement.process_ids)
    for _ in range(max_hops):
        reached: list[str] = []
        for giver in frontier:
            for taker in placement.process_ids:
                if taker == src or taker in came_from:
                    continue
                task = _movable(placement, giver, taker, tag_keys)
                if task is not None:
                    came_from[taker] = (giver, task)
                    reached.append(taker)
        hit = [t for t in reached if t in targets]
        if hit:
            node = min(hit, key=lambda p: (placement.assigned_load(p), p))
            path: list[tuple[str, str, TaskId]] = []
            while node != src:
                giver, task = came_from[node]
                path.append((giver, node, task))
                node = giver
            return path[::-1]
        if not reached:
            break
        frontier = reached
    return []
