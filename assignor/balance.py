"""Balanced active placement by capacity, ignoring history the way Kafka's HA assignor does."""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from assignor.placement import Placement
from assignor.task import TaskId


def deal_actives(placement: Placement, tasks: Iterable[TaskId]) -> None:
    """Give each task, in order, to the client with the lowest active load (ties by process id).

    Clients of equal capacity are served in a fixed cycle, so each subtopology (a contiguous run of
    sorted tasks) is spread evenly over them (B2), and loads per capacity never differ by more than one (B1).
    """
    heap = [(placement.active_load(p), p) for p in placement.process_ids]
    heapq.heapify(heap)
    capacity = placement.capacity
    for task in tasks:
        _, pid = heap[0]
        placement.assign_active(pid, task)
        heapq.heapreplace(heap, (len(placement.active[pid]) / capacity[pid], pid))
