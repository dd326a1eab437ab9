"""Per-task lags with Kafka Streams' semantics, dense for callers and sparse for the assignors."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from assignor.configs import AssignmentConfigs
from assignor.state import GroupState
from assignor.task import LATEST_OFFSET, UNKNOWN_OFFSET_SUM, TaskId


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

    process_ids: tuple[str, ...]
    ends: Mapping[TaskId, int]
    reported: Mapping[TaskId, Mapping[str, int]]
    acceptable_recovery_lag: int

    @classmethod
    def of(cls, group: GroupState, configs: AssignmentConfigs) -> LagIndex:
        """Index the reported offset sums of the group's stateful tasks."""
        ends = group.changelog_end_offset_sums
        stateful = group.stateful_tasks
        reported: dict[TaskId, dict[str, int]] = {}
        for client in group.clients:
            pid = client.process_id
            for task, offset_sum in client.task_offset_sums.items():
                if task in stateful:
                    reported.setdefault(task, {})[pid] = task_lag(offset_sum, ends.get(task, 0))
        return cls(
            process_ids=tuple(sorted(c.process_id for c in group.clients)),
            ends=ends,
            reported=reported,
            acceptable_recovery_lag=configs.acceptable_recovery_lag,
        )

    def lag(self, process_id: str, task: TaskId) -> int:
        """The lag of one client on one stateful task."""
        lag = self.reported.get(task, {}).get(process_id)
        return self.ends.get(task, 0) if lag is None else lag

    def caught_up(self, process_id: str, task: TaskId) -> bool:
        """Whether the client may run the task as an active without a restore pause."""
        return lag_is_caught_up(self.lag(process_id, task), self.acceptable_recovery_lag)

    def _empty_clients_caught_up(self, task: TaskId) -> bool:
        return self.ends.get(task, 0) <= self.acceptable_recovery_lag

    def caught_up_clients(self, task: TaskId) -> list[str]:
        """Every caught-up client of the task, in process-id order."""
        reported = self.reported.get(task, {})
        acceptable = self.acceptable_recovery_lag
        if self._empty_clients_caught_up(task):
            return [p for p in self.process_ids if p not in reported or lag_is_caught_up(reported[p], acceptable)]
        return sorted(p for p, lag in reported.items() if lag_is_caught_up(lag, acceptable))

    def rank(self, process_id: str, task: TaskId) -> tuple[int, int]:
        """How caught up the client is on the task; smaller is better."""
        return lag_rank(self.lag(process_id, task), self.acceptable_recovery_lag)

    def best_rank(self, task: TaskId) -> tuple[int, int]:
        """The rank of the most caught-up client of the task."""
        ranks = [lag_rank(lag, self.acceptable_recovery_lag) for lag in self.reported.get(task, {}).values()]
        if len(ranks) < len(self.process_ids):
            ranks.append(lag_rank(self.ends.get(task, 0), self.acceptable_recovery_lag))
        return min(ranks)

    def most_caught_up(self, task: TaskId, eligible: Callable[[str], bool]) -> str | None:
        """The eligible client with the best rank (ties by process id), or None."""
        reported = self.reported.get(task, {})
        best: tuple[tuple[int, int], str] | None = None
        for pid, lag in reported.items():
            if eligible(pid):
                key = (lag_rank(lag, self.acceptable_recovery_lag), pid)
                if best is None or key < best:
                    best = key
        if len(reported) < len(self.process_ids):
            empty_rank = lag_rank(self.ends.get(task, 0), self.acceptable_recovery_lag)
            if best is None or empty_rank <= best[0]:
                for pid in self.process_ids:
                    if pid not in reported and eligible(pid):
                        if best is None or (empty_rank, pid) < best:
                            best = (empty_rank, pid)
                        break
        return None if best is None else best[1]
