"""Movements: keep actives and standbys on caught-up clients and warm up the chosen ones (KIP-441)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from assignor.candidates import least_loaded
from assignor.lags import LagIndex
from assignor.placement import Placement
from assignor.task import TaskId


@dataclass
class WarmupBudget:
    """Warmup replicas still allowed in this assignment (max.warmup.replicas, shared by all movements)."""

    remaining: int

    def take(self) -> bool:
        """Use one warmup if any is left."""
        if self.remaining <= 0:
            return False
        self.remaining -= 1
        return True


def _by_fewest_caught_up(
    lags: LagIndex, moves: list[tuple[TaskId, str]]
) -> list[tuple[int, TaskId, str, Sequence[str]]]:
    """Moves with their caught-up clients; tasks with the fewest places to go first."""
    with_clients = []
    reporters, ends, acceptable = lags.caught_up_reporters, lags.ends, lags.acceptable_recovery_lag
    for task, chosen in moves:
        # Beyond the acceptable lag only reporters can be caught up (LagIndex.caught_up_clients, inlined).
        caught_up = reporters.get(task, ()) if ends.get(task, 0) > acceptable else lags.caught_up_clients(task)
        with_clients.append((len(caught_up), task, chosen, caught_up))
    with_clients.sort()
    return with_clients


def _swap_standby_and_active(placement: Placement, task: TaskId, standby_holder: str, chosen: str) -> None:
    placement.standby[standby_holder].discard(task)
    placement.assign_active(standby_holder, task)
    placement.unassign_active(chosen, task)
    placement.standby[chosen].add(task)


def _move_active_and_warm_up(
    placement: Placement, task: TaskId, source: str, chosen: str, budget: WarmupBudget
) -> None:
    placement.unassign_active(chosen, task)
    placement.assign_active(source, task)
    if budget.take():
        placement.warmup[chosen].add(task)


def move_actives(placement: Placement, lags: LagIndex, stateful_tasks: Sequence[TaskId], budget: WarmupBudget) -> int:
    """Keep each active on a caught-up client when its chosen one is not; return how many moves were needed."""
    owner = placement.owner
    moves = lags.needing_movement((task, owner[task]) for task in stateful_tasks)
    standby = placement.standby
    for _, task, chosen, caught_up in _by_fewest_caught_up(lags, moves):
        if len(caught_up) == 1 and task not in standby[caught_up[0]]:
            # The common case, short-cut: the one caught-up client (usually the owner so far) keeps the task.
            _move_active_and_warm_up(placement, task, caught_up[0], chosen, budget)
            continue
        swap_with = least_loaded(placement.assigned_load, [p for p in caught_up if task in standby[p]])
        if swap_with is not None:
            _swap_standby_and_active(placement, task, swap_with, chosen)
            continue
        source = least_loaded(placement.assigned_load, [p for p in caught_up if p != chosen])
        if source is None:
            source = lags.most_caught_up(task, [p for p in placement.process_ids if p != chosen])
        if source is None:  # pragma: no cover - needing_movement guarantees a better client exists
            raise AssertionError(f"no client is more caught up on {task} than {chosen!r}")
        if task in placement.standby[source]:
            _swap_standby_and_active(placement, task, source, chosen)
        else:
            _move_active_and_warm_up(placement, task, source, chosen, budget)
    return len(moves)


def move_standbys(placement: Placement, lags: LagIndex, budget: WarmupBudget) -> int:
    """Put standbys on caught-up clients, warming up the chosen ones while budget lasts; return the moves."""
    moves = lags.needing_movement(
        (task, pid) for pid in placement.process_ids for task in sorted(placement.standby[pid])
    )
    needed = 0
    for _, task, chosen, caught_up in _by_fewest_caught_up(lags, moves):
        chosen_rank = lags.rank(chosen, task)
        source = least_loaded(placement.assigned_load, [p for p in caught_up if not placement.holds(p, task)])
        if source is None:
            free = [p for p in placement.process_ids if not placement.holds(p, task)]
            source = lags.most_caught_up(task, [p for p in free if lags.rank(p, task) < chosen_rank])
        if source is None:
            continue  # every more caught-up client already holds a copy: nowhere better to put it
        placement.standby[chosen].discard(task)
        placement.standby[source].add(task)
        if budget.take():
            placement.warmup[chosen].add(task)
        needed += 1
    return needed
