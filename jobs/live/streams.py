"""A streams-protocol group (KIP-1071) as ``status`` shows it: the broker's description of it (the streams-groups
reader's output, parsed by ``jobs.pipeline.broker_streams``) and our assignor's newest decision for it, mapped to a
``GroupDescription``. Pure: the I/O is in ``jobs.live.read``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jobs.live.groups import GroupDescription, InstanceState
from jobs.pipeline.broker_streams import BROKER_STREAMS, BrokerStreamsGroup
from jobs.pipeline.intake import Quarantined, parse_report
from jobs.pipeline.streams_assignor import ASSIGNOR_NAME

_MAX_DECISION_BYTES = 1024 * 1024  # a decision names at most 1000 process ids: far below this
_MAX_EPOCH_MS = 253_402_300_799_999  # 9999-12-31
_MAX_ID_CHARS = 249
_MAX_REASON_CHARS = 4096


@dataclass(frozen=True)
class Decision:
    """Our broker-side assignor's newest decision for a group (schemas/broker_assignor_decision.schema.json)."""

    outcome: str  # plan | sticky
    plan_id: str | None
    fallback_reason: str | None
    followup_needed: bool
    decided_at: int


def _text(value: Any, limit: int) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= limit else None


def parse_decision(raw: bytes | None) -> Decision | None:
    """One decisions-topic value, every field checked and bounded; None when it does not read as a decision."""
    if raw is None or len(raw) > _MAX_DECISION_BYTES:
        return None
    try:
        body = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(body, dict) or body.get("outcome") not in ("plan", "sticky"):
        return None
    decided = body.get("decided_at")
    if isinstance(decided, bool) or not isinstance(decided, int) or not 0 <= decided <= _MAX_EPOCH_MS:
        return None
    return Decision(
        outcome=str(body["outcome"]),
        plan_id=_text(body.get("plan_id"), _MAX_ID_CHARS),
        fallback_reason=_text(body.get("fallback_reason"), _MAX_REASON_CHARS),
        followup_needed=body.get("followup_needed") is True,
        decided_at=decided,
    )


def group_decision(
    latest: Mapping[bytes, bytes | None], group_id: str, process_ids: set[str] | frozenset[str]
) -> Decision | None:
    """The group's newest decision: keyed by its id, or (when no plan or tag named the group) by its smallest
    process id, as the assignor keys them; the newer of the two when both are there."""
    keys = [group_id] + ([f"process:{min(process_ids)}"] if process_ids else [])
    found = [d for k in keys if (d := parse_decision(latest.get(k.encode()))) is not None]
    return max(found, key=lambda d: d.decided_at) if found else None


def _task_order(task: str) -> tuple[int, int]:
    sub, _, partition = task.partition("_")
    return (int(sub), int(partition)) if sub.isdigit() and partition.isdigit() else (-1, -1)


def _tasks(tasks: Any) -> tuple[str, ...]:
    return tuple(sorted((str(t) for t in tasks), key=_task_order))


def assignor_of(group: BrokerStreamsGroup) -> str:
    """The assignor the broker uses for the group: its own ``streams.assignor.name``, else the one the broker last
    assigned with, else the broker's default."""
    return group.settings.assignor_name or group.assignor_name or "the broker's default"


def describe_streams_group(
    group: BrokerStreamsGroup, decision: Decision | None, superseded_reports: int = 0
) -> GroupDescription:
    """A streams group's ``GroupDescription``: its processes' tasks as the broker holds them, and the plan and
    fallback reason of our assignor's newest decision, but only while the group selects our assignor."""
    instances = []
    for key, value in group.reports:
        parsed = parse_report(key, value)
        if isinstance(parsed, Quarantined):  # extract quarantines it; status shows the members that read
            continue
        r = parsed.record
        instances.append(
            InstanceState(
                process_id=r.process_id,
                member_id=r.member_id,
                host=r.host,
                active=_tasks(r.active_tasks),
                standby=_tasks(r.standby_tasks),
                warmup=_tasks(r.warmup_tasks),
                reported_at=None,  # read from the broker just now
                generation=r.generation,
            )
        )
    assignor = assignor_of(group)
    ours = assignor == ASSIGNOR_NAME
    # A decision left from before the group went back to sticky says nothing about who assigns it now.
    honored = decision.plan_id if ours and decision is not None and decision.outcome == "plan" else None
    fallback = decision.fallback_reason if decision is not None and decision.outcome == "sticky" else None
    next_check = f"broker assigns at the next epoch; assignor: {assignor}"
    if ours and decision is not None and decision.followup_needed:
        next_check += " (a step is pending: the plan's next step waits for the next epoch)"
    notes = []
    if superseded_reports:
        notes.append(
            f"{superseded_reports} old plugin report(s) on the reports topic not shown: the group runs the streams "
            "protocol now and is read from the broker"
        )
    if decision is None and ours:
        notes.append("no decision of our assignor for it yet")
    return GroupDescription(
        group_id=group.group_id,
        protocol="streams",
        source=BROKER_STREAMS,
        instances=tuple(sorted(instances, key=lambda i: i.process_id)),
        plan_id=honored,
        fallback_reason=fallback,
        last_report_at=None,
        next_rebalance_at=None,
        plan_check_interval_ms=None,
        probing_rebalance_interval_ms=None,
        next_check_note=next_check,
        notes=tuple(notes),
    )
