"""What a live group looks like now, one ``GroupDescription`` per group, from whatever source describes it: the newest
state reports (our runtime, the plugin), the broker's metadata of a report-only classic group, and, later, the broker's
description of a streams-protocol group (any source that builds ``GroupDescription`` values plugs in)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from assignor.protocol.state_report import StateReport

# Bounds of the schedule fields a report may carry (schemas/state_report.schema.json): larger values are ignored.
_MAX_EPOCH_MS = 253_402_300_799_999  # 9999-12-31
_MAX_INTERVAL_MS = 31_536_000_000  # a year


@dataclass(frozen=True)
class InstanceState:
    """One instance (process) of a group and the tasks it holds now."""

    process_id: str
    member_id: str
    host: str
    active: tuple[str, ...]
    standby: tuple[str, ...]
    warmup: tuple[str, ...]
    reported_at: int | None  # epoch ms; None when the source is the broker's metadata, read just now
    generation: int


@dataclass(frozen=True)
class GroupDescription:
    """A live group as one source describes it: the seam ``group_statuses`` takes (streams-protocol groups read
    from the broker arrive as these too). ``source`` names where it came from (a report origin, or the broker)."""

    group_id: str
    protocol: str  # classic | streams
    source: str
    instances: tuple[InstanceState, ...]
    plan_id: str | None  # the plan being honored, as the newest report says
    fallback_reason: str | None  # the newest reason a plan was not honored, or None
    last_report_at: int | None
    next_rebalance_at: int | None  # the follow-up rebalance the group asked for (probing or plan check)
    plan_check_interval_ms: int | None  # how often the group looks for a new plan; None: unknown
    probing_rebalance_interval_ms: int | None
    older_reports: int = 0  # reports of earlier generations (instances gone, or not yet reported again)
    next_check_note: str | None = None  # a source that knows when the group is assigned next says it here
    notes: tuple[str, ...] = ()  # what else status should say about the group (e.g. old reports superseded)


def _bounded(value: Any, high: int) -> int | None:
    """An integer field from outside, within 0..high; anything else reads as unknown."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        return None
    return value


def _field(report: StateReport, name: str) -> Any:
    """A field this version may know as an attribute or only as an extra (fields added by others, additively)."""
    value = getattr(report, name, None)
    return value if value is not None else report.extra.get(name)


def _probing_interval(report: StateReport) -> int | None:
    settings = _field(report, "settings")
    if isinstance(settings, Mapping):
        return _bounded(settings.get("probing_rebalance_interval_ms"), _MAX_INTERVAL_MS)
    value = getattr(settings, "probing_rebalance_interval_ms", None)
    return _bounded(value, _MAX_INTERVAL_MS)


def describe_reports(reports: Iterable[StateReport]) -> list[GroupDescription]:
    """One description per group from its newest reports (one per process, as the compacted topic keeps them).
    The members are the processes of the newest generation; older ones are counted, not shown."""
    by_group: dict[str, list[StateReport]] = defaultdict(list)
    for report in reports:
        by_group[report.group_id].append(report)
    return [_describe(group_id, rs) for group_id, rs in sorted(by_group.items())]


def _describe(group_id: str, reports: list[StateReport]) -> GroupDescription:
    newest_generation = max(r.generation for r in reports)
    current = [r for r in reports if r.generation == newest_generation]
    newest = max(reports, key=lambda r: (r.reported_at, r.process_id))
    fallbacks = [r for r in current if r.fallback_reason]
    protocol = _field(newest, "protocol")
    next_at = [v for r in current if (v := _bounded(_field(r, "next_rebalance_at"), _MAX_EPOCH_MS)) is not None]
    checks = [v for r in current if (v := _bounded(_field(r, "plan_check_interval_ms"), _MAX_INTERVAL_MS)) is not None]
    origin = "" if newest.origin is None else str(newest.origin)
    from_metadata = origin == "group-metadata"
    instances = tuple(
        InstanceState(
            process_id=r.process_id,
            member_id=r.member_id,
            host=r.host,
            active=tuple(sorted((str(t) for t in r.active_tasks), key=_task_order)),
            standby=tuple(sorted((str(t) for t in r.standby_tasks), key=_task_order)),
            warmup=tuple(sorted((str(t) for t in r.warmup_tasks), key=_task_order)),
            reported_at=None if from_metadata else r.reported_at,
            generation=r.generation,
        )
        for r in sorted(current, key=lambda r: r.process_id)
    )
    return GroupDescription(
        group_id=group_id,
        protocol=str(protocol) if protocol else "classic",
        source=origin or "report",
        instances=instances,
        plan_id=newest.plan_id,
        fallback_reason=max(fallbacks, key=lambda r: r.reported_at).fallback_reason if fallbacks else None,
        last_report_at=None if from_metadata else newest.reported_at,
        next_rebalance_at=min(next_at) if next_at else None,
        plan_check_interval_ms=min(checks) if checks else None,
        probing_rebalance_interval_ms=_probing_interval(newest),
        older_reports=len(reports) - len(current),
    )


def _task_order(task: str) -> tuple[int, int]:
    sub, _, partition = task.partition("_")
    return (int(sub), int(partition)) if sub.isdigit() and partition.isdigit() else (-1, -1)
