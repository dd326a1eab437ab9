"""Steps between epochs for streams-protocol groups (KIP-1071): the broker runs our assignor only when a group's epoch
changes, so a plan whose first step placed warm-up standbys needs its next assignment triggered. Pure: the decision
whether to trigger a group now; the I/O is in ``observe_streams.follow_steps``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from assignor import GroupAssignment, TaskId
from jobs.live.streams import Decision

_MAX_MS = 253_402_300_799_999  # 9999-12-31: every time and interval below is bounded by it
_MAX_LAG = (1 << 63) - 1
# Defaults: a Kafka Streams 4.4 client sends its task offsets with the heartbeat that takes a new assignment, then at
# most every streams.task.offset.interval.ms (broker default 60 s, at least 15 s), and a trigger takes about 3 s to
# reach the assignor, so triggering more often than every 30 s mostly re-reads the same offsets.
MIN_INTERVAL_MS = 30_000
MAX_WAIT_MS = 600_000  # a warm-up that never reports caught up is still re-evaluated every 10 minutes
# A fallback that the next assignment can cure (the assignor had not read the plans yet, e.g. after a broker restart).
RETRIED_FALLBACKS = ("plans_unreadable",)


@dataclass(frozen=True)
class StepRule:
    """How often a group's next step may be triggered: never within ``min_interval_ms`` of the last trigger or
    assignment, and at the latest ``max_wait_ms`` after the last trigger while a step is pending."""

    min_interval_ms: int = MIN_INTERVAL_MS
    max_wait_ms: int = MAX_WAIT_MS

    def __post_init__(self) -> None:
        if not 0 <= self.min_interval_ms <= _MAX_MS or not self.min_interval_ms <= self.max_wait_ms <= _MAX_MS:
            raise ValueError(f"0 <= min_interval_ms <= max_wait_ms <= {_MAX_MS}: {self}")


@dataclass(frozen=True)
class GroupNow:
    """One streams group with a PUBLISHED plan, as observe sees it now."""

    plan_id: str
    target: GroupAssignment  # the plan's target
    acceptable_recovery_lag: int  # the plan's
    decision: Decision | None  # our assignor's newest decision for the group
    standbys: Mapping[str, frozenset[TaskId]]  # process id -> the standbys it runs now (warm-ups are standbys)
    offset_sums: Mapping[str, Mapping[TaskId, int]]  # process id -> task offset sums (-3: unknown)
    end_offset_sums: Mapping[TaskId, int]  # task -> changelog end offset sum, where known
    last_trigger_ms: int | None  # our last trigger of an assignment for this plan (publish or a step)
    now_ms: int


@dataclass(frozen=True)
class StepVerdict:
    """Whether to trigger the group's next assignment now, and why (logged)."""

    trigger: bool
    reason: str


def warmup_copies(target: GroupAssignment, standbys: Mapping[str, frozenset[TaskId]]) -> set[tuple[str, TaskId]]:
    """The standbys the target does not keep: warm-ups our assignor placed as extra standbys (4.4 has no role)."""
    out = set()
    for pid, tasks in standbys.items():
        kept = target.clients[pid].standby if pid in target.clients else frozenset()
        out |= {(pid, t) for t in tasks - kept}
    return out


def lag(offset_sum: int | None, end_offset_sum: int | None) -> int | None:
    """A copy's lag from the heartbeats, as our assignor computes it (schemas/vectors/heartbeat_lags.json); None when
    either side is unknown."""
    if offset_sum is None or end_offset_sum is None:
        return None
    if not 0 <= offset_sum < _MAX_LAG or not 0 <= end_offset_sum < _MAX_LAG:  # negative or Long.MAX_VALUE: unknown
        return None
    # At or ahead of the end is caught up, as Kafka Streams 4.4 judges its own warm-ups: its offset sums are next
    # offsets to fetch (last + 1) but its end sums last offsets (log end - 1), so a caught-up copy reads ahead.
    return max(end_offset_sum - offset_sum, 0)


def lagging_warmups(g: GroupNow) -> list[tuple[str, TaskId]]:
    """The warm-up copies not yet within the plan's acceptable lag (unknown offsets count as not caught up)."""
    behind = []
    for pid, task in sorted(warmup_copies(g.target, g.standbys)):
        copy_lag = lag(g.offset_sums.get(pid, {}).get(task), g.end_offset_sums.get(task))
        if copy_lag is None or copy_lag > min(max(g.acceptable_recovery_lag, 0), _MAX_LAG):
            behind.append((pid, task))
    return behind


def decide_step(g: GroupNow, rule: StepRule) -> StepVerdict:
    """Trigger when the newest decision for this plan says a step is pending and every warm-up caught up, or a
    curable fallback or a pending step has waited ``max_wait_ms``; never within ``min_interval_ms``."""
    d = g.decision
    last = max(g.last_trigger_ms or 0, d.decided_at if d is not None else 0)
    since_last = g.now_ms - last
    if since_last < rule.min_interval_ms:
        return StepVerdict(False, f"last trigger or assignment {max(since_last, 0)} ms ago")
    waited = g.last_trigger_ms is None or g.now_ms - g.last_trigger_ms >= rule.max_wait_ms
    if d is None or (g.last_trigger_ms is not None and d.decided_at < g.last_trigger_ms):
        # The assignment our last trigger asked for has not been decided (yet): ask again only after the wait.
        return StepVerdict(waited, "no decision since the last trigger" + (": waited long enough" if waited else ""))
    if d.outcome != "plan" or d.plan_id != g.plan_id:
        curable = d.outcome == "sticky" and (d.fallback_reason or "").startswith(RETRIED_FALLBACKS)
        return StepVerdict(curable and waited, f"decision {d.outcome} {d.plan_id or d.fallback_reason or ''}".strip())
    if not d.followup_needed:
        return StepVerdict(False, "the plan's target reached: no step pending")
    behind = lagging_warmups(g)
    if not behind:
        return StepVerdict(True, "step pending and every warm-up caught up")
    named = ", ".join(f"{p}:{t}" for p, t in behind[:5])
    if waited:
        return StepVerdict(True, f"step pending, {len(behind)} warm-up(s) behind ({named}) after the maximum wait")
    return StepVerdict(False, f"step pending, {len(behind)} warm-up(s) behind ({named})")


def drains_left(drained: Mapping[str, Iterable[str]], members: Mapping[str, Iterable[str]]) -> set[str]:
    """The groups (group -> the processes their realized drain plans drain) none of whose drained processes is a
    member any more; a group the broker did not describe is not decided (its members are unknown)."""
    return {g for g, pids in drained.items() if g in members and not set(pids) & set(members[g])}
