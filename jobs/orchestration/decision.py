"""What a person's answer to the plan approval means: the options, the allowed approvers, the selection check and the
decision recorded on the plans. Pure: no Airflow, no Spark; the approval operator (hitl.py), the decision page
(report_plugin.py) and the decide task (tasks.py) all use it."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

APPROVE_ALL = "Approve all validated"
REJECT_ALL = "Reject all"
APPROVE_SELECTED = "Approve selected groups"
OPTIONS = [APPROVE_ALL, REJECT_ALL, APPROVE_SELECTED]
TIMEOUT_USER = "approval-timeout"
# The planning DAG's task ids the decision page reads (dags/rebalance_planning.py names its tasks so).
REVIEW_TASK, APPROVAL_TASK, PUBLISH_TASK = "review", "approval", "publish"
NAMED = 10  # unknown groups a refusal names
OFFER_PARAM = "offer"  # the approval form's field carrying the offer's digest, answered back with the person's choice


class Approver(NamedTuple):
    """One allowed approver: the auth manager's user id, and the name people see on the approval page."""

    id: str
    name: str


def approver(entry: str) -> Approver:
    """``id`` or ``id:name`` (FAB's ids are numbers: ``2:alice`` shows alice where the page lists approvers)."""
    user_id, _, name = entry.partition(":")
    return Approver(user_id.strip(), name.strip() or user_id.strip())


class DecisionError(ValueError):
    """The answer names groups that have no plan waiting for approval."""


@dataclass(frozen=True)
class Decision:
    """What to record for the run's candidate plans: who decided, which plans are approved and which rejected."""

    by: str
    approve: tuple[str, ...]
    reject: tuple[str, ...]
    reason: str | None  # the person's note, recorded on every plan decided
    reject_reason: str | None
    timed_out: bool


def duration(seconds: float) -> str:
    """12 h, 90 min, 3 s: how a person reads a timeout."""
    for unit, size in (("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g} {unit}"
    return f"{seconds:g} s"


def in_filter(group_id: str, patterns: Sequence[str]) -> bool:
    """Whether the run's group filter (exact ids or shell patterns; empty: every group) admits the group."""
    return not patterns or any(fnmatch.fnmatchcase(group_id, p) for p in patterns)


MAX_REASON = 1024  # characters of a person's note with an answer: it lands in Airflow, the lake and the report


def answer_reason(answer: Mapping[str, Any]) -> str | None:
    """The note sent with an answer, stripped (None when empty); DecisionError past MAX_REASON characters."""
    reason = str(answer.get("reason") or "").strip()
    if len(reason) > MAX_REASON:
        raise DecisionError(f"the reason is {len(reason):,} characters long; at most {MAX_REASON:,}")
    return reason or None


def check_selection(selected: object, candidates: Mapping[str, str]) -> list[str]:
    """The selected group ids, stripped and de-duplicated; DecisionError naming every group without a VALIDATED plan
    among ``candidates`` (group_id -> plan_id). The decision page checks before it answers; decide checks again."""
    if selected is None:
        return []
    if not isinstance(selected, list | tuple):
        raise DecisionError(f"selected_groups must be a list of group ids, not {type(selected).__name__}")
    picked = sorted({str(g).strip() for g in selected if str(g).strip()})
    unknown = [g for g in picked if g not in candidates]
    if unknown:  # named, the first few: the refusal goes back to the page and into the task log
        more = f" and {len(unknown) - NAMED:,} more" if len(unknown) > NAMED else ""
        raise DecisionError(f"groups without a validated plan in this run: {', '.join(unknown[:NAMED])}{more}")
    return picked


def decision(
    answer: Mapping[str, Any] | None,
    candidates: Mapping[str, str],
    timeout_s: float,
    approvers: Sequence[str] = (),
    triggered_by: str | None = None,
) -> Decision:
    """Turn the approval step's answer into plan decisions; ``candidates`` maps group_id -> VALIDATED plan_id,
    ``approvers`` who may answer, as ``id`` or ``id:name`` (empty: anyone Airflow lets answer); ``triggered_by``:
    who triggered the run, when the two-person rule forbids them to approve it."""
    answer = answer or {}
    user = answer.get("responded_by_user") or {}
    chosen = list(answer.get("chosen_options") or [])
    params = dict(answer.get("params_input") or {})
    reason = str(params.get("reason") or "").strip() or None
    everything = tuple(sorted(candidates.values()))
    if not user:  # the scheduler applied the default (Reject all) when nobody answered in time
        return Decision(TIMEOUT_USER, (), everything, None, f"no decision within {duration(timeout_s)}", True)
    by = str(user.get("name") or user.get("id"))
    if approvers and str(user.get("id")) not in {approver(a).id for a in approvers}:
        # Airflow enforces the same list; this holds if its auth manager lets others through (e.g. all admins).
        refused = f"answered by {by}, who is not among the allowed approvers"
        return Decision(by, (), everything, None, refused, False)
    if triggered_by and triggered_by in {str(user.get("id")), str(user.get("name"))}:
        # The two-person rule: whoever started the run cannot also be the one who lets it change the groups.
        refused = f"answered by {by}, who triggered this run (two-person rule)"
        return Decision(by, (), everything, None, refused, False)
    if APPROVE_ALL in chosen:
        return Decision(by, everything, (), reason, None, False)
    if APPROVE_SELECTED in chosen:
        picked = check_selection(params.get("selected_groups"), candidates)
        approve = tuple(sorted(candidates[g] for g in set(picked)))
        rest = tuple(sorted(set(everything) - set(approve)))
        return Decision(by, approve, rest, reason, reason or "not among the selected groups", False)
    return Decision(by, (), everything, reason, reason, False)


# Airflow 3.x can mark the approval task FAILED when its answer arrives within about 3 s of the task starting to wait
# (apache/airflow#71580): the answer races the task's own move to its waiting state. The decision page holds an answer
# until the task has waited this long.
SETTLE_S = 5.0
# The waiting states: DEFERRED (a trigger waits), or AWAITING_INPUT (Airflow 3.3+ parks HITL tasks without one).
WAITING_STATES = frozenset({"deferred", "awaiting_input"})


def answer_hold_s(hitl: Mapping[str, Any], now: datetime) -> float | None:
    """Seconds to hold an answer before it is safe to send (0: now); None while the approval task is not waiting."""
    state = (hitl.get("task_instance") or {}).get("state")
    if state not in WAITING_STATES:
        return None
    try:
        asked = datetime.fromisoformat(str(hitl["created_at"]).replace("Z", "+00:00"))
    except (KeyError, ValueError) as err:
        raise DecisionError(f"Airflow's approval entry has no readable created_at: {hitl.get('created_at')!r}") from err
    if asked.tzinfo is None:
        raise DecisionError(f"Airflow's approval created_at {hitl['created_at']!r} has no time zone")
    return max(0.0, SETTLE_S - (now - asked).total_seconds())
