"""``status``: per live group the protocol, members, tasks per instance, the plan being honored and its step, the
age of the newest report, the last fallback reason and when the group looks for a plan next. Pure: descriptions,
published plans and plan steps in, ``GroupStatus`` values out; ``jobs.live.read`` does the I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

from jobs.live.groups import GroupDescription, InstanceState

# One step of a plan as plan_assignments holds it: (process_id, task_id, role) with role ACTIVE, STANDBY or WARMUP.
Step = frozenset[tuple[str, str, str]]
UNKNOWN = "unknown"


@dataclass(frozen=True)
class PublishedPlan:
    """The newest record for a group on the plans topic (as read; status does not verify signatures)."""

    plan_id: str | None
    sequence: int | None
    withdrawn: bool
    created_at: int | None


@dataclass(frozen=True)
class GroupStatus:
    """One group's live state as people and ``--json`` see it."""

    group_id: str
    protocol: str
    source: str
    members: int
    instances: tuple[InstanceState, ...]
    plan_id: str | None
    published_plan_id: str | None  # the newest plan on the plans topic (None: none, or withdrawn)
    step: str  # "2/3", "3/3 (target)", "between steps", "unknown", "-" when no plan is honored
    report_age_ms: int | None
    fallback_reason: str | None
    next_check: str
    older_reports: int
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        body = asdict(self)
        body["instances"] = [asdict(i) for i in self.instances]
        return body


def _current(instances: Sequence[InstanceState]) -> Step:
    return frozenset(
        (i.process_id, task, role)
        for i in instances
        for role, tasks in (("ACTIVE", i.active), ("STANDBY", i.standby), ("WARMUP", i.warmup))
        for task in tasks
    )


def step_of(instances: Sequence[InstanceState], steps: Sequence[Step] | None) -> str:
    """Which of the plan's steps (numbered from 1) the group runs now: the last step equal to what the instances
    hold, else the last whose actives they hold ("actives of"), else "between steps"; "unknown" without steps."""
    if not steps:
        return UNKNOWN
    current, total = _current(instances), len(steps)
    for number in range(total, 0, -1):
        if steps[number - 1] == current:
            return f"{number}/{total}" + (" (target)" if number == total else "")
    actives = {(p, t) for p, t, r in current if r == "ACTIVE"}
    for number in range(total, 0, -1):
        if {(p, t) for p, t, r in steps[number - 1] if r == "ACTIVE"} == actives:
            return f"actives of {number}/{total}"
    return f"between steps (of {total})"


def duration(ms: int) -> str:
    """A short human duration: 45s, 4m05s, 2h10m, 3d4h."""
    seconds = max(0, ms) // 1000
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86_400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86_400}d{seconds % 86_400 // 3600}h"


def next_check(group: GroupDescription, now_ms: int) -> str:
    """When the group looks at the plans topic next, as far as its reports (or its source's note) say."""
    if group.next_check_note is not None:
        return group.next_check_note
    parts = []
    if group.next_rebalance_at is not None:
        delta = group.next_rebalance_at - now_ms
        parts.append(f"rebalance in {duration(delta)}" if delta >= 0 else f"rebalance due {duration(-delta)} ago")
    if group.plan_check_interval_ms is not None:
        every = group.plan_check_interval_ms
        parts.append(f"plan check every {duration(every)}" if every > 0 else "no plan checks (own rebalances only)")
    if not parts and group.source == "group-metadata":
        return "never (report-only: plans are not published to it)"
    return "; ".join(parts) or UNKNOWN


def group_statuses(
    groups: Sequence[GroupDescription],
    published: Mapping[str, PublishedPlan],
    steps: Mapping[str, Sequence[Step]] | None,
    now_ms: int,
) -> list[GroupStatus]:
    """The status of every described group. ``steps``: plan_id -> its steps from the lake, None when the lake
    is not available (every step then reads "unknown")."""
    out = []
    for g in sorted(groups, key=lambda g: g.group_id):
        plan = published.get(g.group_id)
        plan_steps = None if steps is None or g.plan_id is None else steps.get(g.plan_id)
        step = "-" if g.plan_id is None else step_of(g.instances, plan_steps)
        out.append(
            GroupStatus(
                group_id=g.group_id,
                protocol=g.protocol,
                source=g.source,
                members=len(g.instances),
                instances=g.instances,
                plan_id=g.plan_id,
                published_plan_id=None if plan is None or plan.withdrawn else plan.plan_id,
                step=step,
                report_age_ms=None if g.last_report_at is None else max(0, now_ms - g.last_report_at),
                fallback_reason=g.fallback_reason,
                next_check=next_check(g, now_ms),
                older_reports=g.older_reports,
                notes=g.notes,
            )
        )
    return out
