"""Per-task lags with Kafka Streams' semantics, dense for callers and sparse for the assignors."""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from assignor.configs import AssignmentConfigs
from assignor.state import GroupState
from assignor.task import LATEST_OFFSET, UNKNOWN_OFFSET_SUM, TaskId

if TYPE_CHECKING:
    from assignor.assignment import GroupAssignment


def task_lag(offset_sum: int | None, end_offset_sum: int) -> int:
    """The lag of one replica: sentinels pass through, no state or state ahead of the log means the full log."""
    if offset_sum is None:
        return end_offset_sum
    if offset_sum in (LATEST_OFFSET, UNKNOWN_OFFSET_SUM):
        return offset_sum
    if offset_sum > end_offset_sum:
        return end_offset_sum
    return end_offset_sum - offset_sum


def lag_is_caught_up(lag: int, acceptable_recovery_lag: int) -> bool:
    """Caught up: a running active, or a known lag within the acceptable recovery lag."""
    return lag == LATEST_OFFSET or 0 <= lag <= acceptable_recovery_lag


def restore_owed(lag: int, end: int, acceptable_recovery_lag: int) -> int:
    """Offsets a replica with this lag replays before it is caught up: 0 when it already is, the whole changelog
    (``end``) when its position is unknown. The one measure of restore plans, baselines and estimates share."""
    if lag_is_caught_up(lag, acceptable_recovery_lag):
        return 0
    return end if lag < 0 else lag


def lag_rank(lag: int, acceptable_recovery_lag: int) -> tuple[int, int]:
    """Sort key, best first: caught-up clients before the others, then by lag (Kafka ranks -3 first)."""
    return (0 if lag_is_caught_up(lag, acceptable_recovery_lag) else 1, lag)


def compute_lags(group: GroupState) -> dict[str, dict[TaskId, int]]:
    """Lag of every client on every stateful task (dense; see LagIndex for the sparse form)."""
    ends = group.changelog_end_offset_sums
    tasks = sorted(group.stateful_tasks)
    return {
        client.process_id: {t: task_lag(client.task_offset_sums.get(t), ends.get(t, 0)) for t in tasks}
        for client in group.clients
    }


@dataclass(frozen=True)
class LagIndex:
    """Lags stored only where a client reported an offset sum; every other client lags the whole changelog."""

    # dicts, not Mappings, and never changed once built: compiled, a dict's get() is a native call, a Mapping's a
    # method looked up by name (the schedule asks these for every replica of every step).
    process_ids: tuple[str, ...]
    ends: dict[TaskId, int]
    reported: dict[TaskId, dict[str, int]]
    acceptable_recovery_lag: int
    caught_up_reporters: dict[TaskId, list[str]]  # sorted by process id
    best_reported_rank: dict[TaskId, tuple[int, int]]
    # Per client, the stateful tasks it runs (lag -2) and those it holds at the log end (lag 0): what a step
    # under full catch-up changes (after_catch_up).
    running: dict[str, frozenset[TaskId]]
    at_log_end: dict[str, frozenset[TaskId]]

    @classmethod
    def of(cls, group: GroupState, configs: AssignmentConfigs) -> LagIndex:
        """Index the reported offset sums of the group's stateful tasks in one pass."""
        acceptable = configs.acceptable_recovery_lag
        ends = dict(group.changelog_end_offset_sums)
        stateful = group.stateful_tasks
        reported: dict[TaskId, dict[str, int]] = {}
        caught_up: dict[TaskId, list[str]] = {}
        best: dict[TaskId, tuple[int, int]] = {}
        running: dict[str, frozenset[TaskId]] = {}
        at_log_end: dict[str, frozenset[TaskId]] = {}
        for client in group.clients:
            pid = client.process_id
            runs: list[TaskId] = []
            at_end: list[TaskId] = []
            for task, offset_sum in client.task_offset_sums.items():
                if task not in stateful:
                    continue
                # task_lag and lag_rank, inlined: this loop sees every reported offset sum.
                end = ends.get(task, 0)
                if offset_sum in (LATEST_OFFSET, UNKNOWN_OFFSET_SUM):
                    lag = offset_sum
                else:
                    lag = end if offset_sum > end else end - offset_sum
                task_lags = reported.get(task)
                if task_lags is None:
                    task_lags = reported[task] = {}
                task_lags[pid] = lag
                if lag == LATEST_OFFSET:
                    runs.append(task)
                elif lag == 0:
                    at_end.append(task)
                kind = 0 if lag == LATEST_OFFSET or 0 <= lag <= acceptable else 1
                if kind == 0:
                    caught_up.setdefault(task, []).append(pid)
                previous = best.get(task)
                # rank < previous for the ranks (kind, lag), without a tuple per offset sum unless it is the best
                if previous is None or kind < previous[0] or (kind == previous[0] and lag < previous[1]):
                    best[task] = (kind, lag)
            running[pid], at_log_end[pid] = frozenset(runs), frozenset(at_end)
        for pids in caught_up.values():
            pids.sort()
        return cls(
            process_ids=tuple(sorted(c.process_id for c in group.clients)),
            ends=ends,
            reported=reported,
            acceptable_recovery_lag=acceptable,
            caught_up_reporters=caught_up,
            best_reported_rank=best,
            running=running,
            at_log_end=at_log_end,
        )

    def after_catch_up(self, assignment: GroupAssignment, stateful: frozenset[TaskId]) -> LagIndex:
        """LagIndex.of the group catch_up_fully(group, assignment) returns, derived from this index: held replicas
        report the log end (running actives -2), actives that stopped checkpoint there, other lags stay; only the
        tasks where that changes a lag are re-ranked."""
        empty: frozenset[TaskId] = frozenset()
        running: dict[str, frozenset[TaskId]] = {}
        at_log_end: dict[str, frozenset[TaskId]] = {}
        holding: list[tuple[str, frozenset[TaskId], frozenset[TaskId]]] = []
        changed: set[TaskId] = set()
        for pid in self.process_ids:
            ca = assignment.clients[pid]
            active = ca.active & stateful
            held = (ca.standby | ca.warmup) & stateful  # an active held twice stays running (catch_up_fully)
            was_running, was_at_end = self.running.get(pid, empty), self.at_log_end.get(pid, empty)
            if active == was_running and held <= was_at_end:  # a client whose replicas stay put: no lag changes
                running[pid], at_log_end[pid] = was_running, was_at_end
                continue
            changed |= active ^ was_running
            changed |= held - was_at_end - active
            running[pid] = active
            at_log_end[pid] = (was_at_end | was_running | held) - active
            holding.append((pid, active, held | (was_running - active)))  # stopped actives checkpoint at the end
        updates: dict[TaskId, dict[str, int]] = {task: {} for task in changed}
        for pid, active, at_end in holding:
            for task in at_end & changed:
                updates[task][pid] = 0
            for task in active & changed:
                updates[task][pid] = LATEST_OFFSET
        acceptable = self.acceptable_recovery_lag
        reported = dict(self.reported)
        caught_up = dict(self.caught_up_reporters)
        best = dict(self.best_reported_rank)
        for task, update in updates.items():
            after = {**self.reported.get(task, {}), **update}
            reported[task] = after
            up = sorted(pid for pid, lag in after.items() if lag == LATEST_OFFSET or 0 <= lag <= acceptable)
            # -2 sorts before every caught-up lag, -3 before every lagging one: ranks order as lags do.
            if up:
                caught_up[task] = up
                best[task] = (0, min(after[pid] for pid in up))
            else:
                caught_up.pop(task, None)
                best[task] = (1, min(after.values()))
        return LagIndex(self.process_ids, self.ends, reported, acceptable, caught_up, best, running, at_log_end)

    def lag(self, process_id: str, task: TaskId) -> int:
        """The lag of one client on one stateful task."""
        lag = self.reported.get(task, {}).get(process_id)
        return self.ends.get(task, 0) if lag is None else lag

    def caught_up(self, process_id: str, task: TaskId) -> bool:
        """Whether the client may run the task as an active without a restore pause."""
        # lag() and lag_is_caught_up(), inlined: every step of a schedule asks this about every replica.
        task_lags = self.reported.get(task)
        lag = task_lags.get(process_id) if task_lags is not None else None
        if lag is None:
            lag = self.ends.get(task, 0)
        return lag == LATEST_OFFSET or 0 <= lag <= self.acceptable_recovery_lag

    def owed(self, process_id: str, task: TaskId) -> int:
        """restore_owed of one client on one stateful task."""
        return restore_owed(self.lag(process_id, task), self.ends.get(task, 0), self.acceptable_recovery_lag)

    def owed_total(self, process_id: str, tasks: Iterable[TaskId]) -> int:
        """owed() summed over stateful ``tasks`` of one client (inlined: plans sum it for every replica of
        every step)."""
        if isinstance(tasks, (set, frozenset)):
            # Replicas running or at the log end (lag -2 or 0) owe nothing: after a schedule's first step, most.
            none: frozenset[TaskId] = frozenset()
            tasks = tasks - self.running.get(process_id, none) - self.at_log_end.get(process_id, none)
        reported, ends, acceptable = self.reported, self.ends, self.acceptable_recovery_lag
        total = 0
        for task in tasks:
            end = ends.get(task, 0)
            task_lags = reported.get(task)
            lag = end if task_lags is None else task_lags.get(process_id, end)
            if lag == LATEST_OFFSET or 0 <= lag <= acceptable:
                continue
            total += end if lag < 0 else lag
        return total

    def caught_up_clients(self, task: TaskId) -> Sequence[str]:
        """Every caught-up client of the task, in process-id order."""
        if task in self.caught_up_reporters and self.ends.get(task, 0) > self.acceptable_recovery_lag:
            return self.caught_up_reporters[task]
        if self.ends.get(task, 0) <= self.acceptable_recovery_lag:  # then clients without state are caught up
            reported = self.reported.get(task, {})
            acceptable = self.acceptable_recovery_lag
            return [p for p in self.process_ids if p not in reported or lag_is_caught_up(reported[p], acceptable)]
        return self.caught_up_reporters.get(task, ())

    def rank(self, process_id: str, task: TaskId) -> tuple[int, int]:
        """How caught up the client is on the task; smaller is better."""
        return lag_rank(self.lag(process_id, task), self.acceptable_recovery_lag)

    def best_rank(self, task: TaskId) -> tuple[int, int]:
        """The rank of the most caught-up client of the task."""
        best = self.best_reported_rank.get(task)
        if best is not None and len(self.reported[task]) == len(self.process_ids):
            return best
        empty = lag_rank(self.ends.get(task, 0), self.acceptable_recovery_lag)
        return empty if best is None else min(best, empty)

    def needing_movement(self, holders: Iterable[tuple[TaskId, str]]) -> list[tuple[TaskId, str]]:
        """The (task, client) pairs where the client is not caught up and another client is more caught up,
        in input order."""
        reported, ends, best_reported = self.reported, self.ends, self.best_reported_rank
        acceptable, clients = self.acceptable_recovery_lag, len(self.process_ids)
        found = []
        for task, pid in holders:
            task_lags = reported.get(task)
            end = ends.get(task, 0)
            lag = end if task_lags is None else task_lags.get(pid, end)
            if lag == LATEST_OFFSET or 0 <= lag <= acceptable:
                continue
            best = best_reported.get(task)
            if task_lags is None or len(task_lags) < clients:
                empty = (0 if end <= acceptable else 1, end)
                best = empty if best is None or empty < best else best
            if best is not None and best < (1, lag):
                found.append((task, pid))
        return found

    def most_caught_up(self, task: TaskId, candidates: Sequence[str]) -> str | None:
        """The candidate with the best rank on the task (ties by process id), or None."""
        return min(candidates, key=lambda p: (self.rank(p, task), p), default=None)


def restore_lower_bound(group: GroupState, lags: LagIndex, standbys: int, *, balanced: bool = True) -> int:
    """Offsets any balanced assignment of the group with ``standbys`` standbys per stateful task must restore, in
    restore_owed's measure (the plans' own).

    Each task's 1 + standbys copies owe at least what its least-owing clients owe. Balance adds to that: a client
    that reported no state must still hold its share of the stateful replicas (B1: within one per unit of
    capacity of every other client), and each replica there owes the whole changelog instead of the cheapest
    copy it displaces; the cheapest such share is added (one client's: shares may overlap in tasks). Only for
    clients of equal capacity (where that share is always feasible), and not with ``balanced`` False (a drain)."""
    clients = len(lags.process_ids)
    copies = 1 + min(clients - 1, standbys)
    acceptable = lags.acceptable_recovery_lag
    total = 0
    extra: list[int] = []  # per task: what putting a copy on a client without state adds to its cheapest copies
    for task in group.stateful_tasks:
        end = lags.ends.get(task, 0)
        reported = lags.reported.get(task, {})
        empty = restore_owed(end, end, acceptable)  # what a client without state owes: the whole changelog
        owed = [restore_owed(lag, end, acceptable) for lag in reported.values()]
        owed.extend([empty] * min(copies, clients - len(reported)))
        owed.sort()  # not heapq.nsmallest: a Python loop per task, where a dozen values sort at once in C
        cheapest = owed[:copies]
        total += sum(cheapest)
        extra.append(empty - cheapest[-1] if cheapest else 0)
    stateful = group.stateful_tasks
    # any() stops at a client's first stateful offset sum, where a set intersection would hash all of them.
    silent = [c for c in group.clients if not any(t in stateful for t in c.task_offset_sums)]
    if balanced and silent and extra and len({c.capacity for c in group.clients}) == 1:
        # B1 with equal capacities c: counts lie within c of each other, so the R replicas leave the least-loaded
        # client at least ceil((R - (clients - 1) * c) / clients) of them (the others hold at most c more each).
        replicas, capacity = len(group.stateful_tasks) * copies, group.clients[0].capacity
        share = max(0, -(-(replicas - (clients - 1) * capacity) // clients))
        total += sum(heapq.nsmallest(min(share, len(extra)), extra))
    return total
