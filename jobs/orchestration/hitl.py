"""The plan approval step of the planning DAG: Airflow's human-in-the-loop operator and what its answer means.

Imported when the DAG file is parsed, so it imports nothing of the pipeline (no Spark, no assignor) until the answer
is recorded.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, NamedTuple

from airflow.providers.standard.operators.hitl import HITLOperator
from airflow.sdk.execution_time.hitl import HITLUser

APPROVE_ALL = "Approve all validated"
REJECT_ALL = "Reject all"
APPROVE_SELECTED = "Approve selected groups"
OPTIONS = [APPROVE_ALL, REJECT_ALL, APPROVE_SELECTED]
TIMEOUT_USER = "approval-timeout"


class PlanApprovalOperator(HITLOperator):
    """Asks a person to approve the run's plans; the wait's timeout comes from the review step (param or setting)."""

    def __init__(self, *, review_task_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.review_task_id = review_task_id

    def execute(self, context: Any) -> Any:
        review = context["ti"].xcom_pull(task_ids=self.review_task_id) or {}
        # Set per run, not at parse time: a person may shorten or lengthen the wait when triggering.
        self.response_timeout = timedelta(seconds=float(review.get("approval_timeout_s", 43_200)))
        # Airflow itself then refuses answers from anyone else (its auth manager's is_authorized_hitl_task).
        allowed = [approver(a) for a in review.get("approvers") or ()]
        self.assigned_users = [HITLUser(id=a.id, name=a.name) for a in allowed] or None
        return super().execute(context)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        """Record the decision here, from the trigger's event (Airflow's HITL record of who answered what): the
        answer never crosses XCom, which any task of the deployment can write."""
        answer = super().execute_complete(context, event)
        from jobs.orchestration import tasks  # noqa: PLC0415 (Spark and the stages load only when a task runs)

        reviewed = context["ti"].xcom_pull(task_ids=self.review_task_id)
        triggered_by = getattr(context.get("dag_run"), "triggering_user_name", None)
        return tasks.decide(tasks.runtime(context["params"]), reviewed, dict(answer), triggered_by)


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
        picked = [str(g).strip() for g in params.get("selected_groups") or [] if str(g).strip()]
        unknown = sorted(set(picked) - set(candidates))
        if unknown:
            raise DecisionError(f"groups without a validated plan in this run: {', '.join(unknown)}")
        approve = tuple(sorted(candidates[g] for g in set(picked)))
        rest = tuple(sorted(set(everything) - set(approve)))
        return Decision(by, approve, rest, reason, reason or "not among the selected groups", False)
    return Decision(by, (), everything, reason, reason, False)
