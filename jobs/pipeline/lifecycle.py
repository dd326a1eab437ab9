"""Which event moves a plan from one status to the next: the one table every stage consults (docs/plan-lifecycle.md)."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

from jobs.pipeline.status import PlanStatus


class PlanEvent(StrEnum):
    """Something that happens to a plan; only the stage named in the comment causes it."""

    PASSED_VALIDATION = "passed_validation"  # validate
    FAILED_VALIDATION = "failed_validation"  # validate (approve and publish, for a target changed since)
    APPROVED = "approved"  # approve, a group that honors plans
    APPROVED_REPORT_ONLY = "approved_report_only"  # approve or publish: a group that cannot honor plans
    REJECTED = "rejected"  # approve --reject
    PUBLISHED = "published"  # publish
    SUPERSEDED = "superseded"  # publish, a newer plan of the same group
    WITHDRAWN = "withdrawn"  # withdraw, or observe seeing the group's newest plans record is a withdrawal
    REALIZED = "realized"  # observe: the group runs the target
    EXPIRED = "expired"  # observe: not realized within its validity, or a drained instance left first


_S, _E = PlanStatus, PlanEvent
TRANSITIONS: Mapping[PlanStatus, Mapping[PlanEvent, PlanStatus]] = {
    _S.PENDING: {_E.PASSED_VALIDATION: _S.VALIDATED, _E.FAILED_VALIDATION: _S.REJECTED, _E.REJECTED: _S.REJECTED},
    _S.VALIDATED: {
        _E.APPROVED: _S.APPROVED,
        _E.APPROVED_REPORT_ONLY: _S.HELD,
        _E.REJECTED: _S.REJECTED,
        _E.FAILED_VALIDATION: _S.REJECTED,
    },
    _S.APPROVED: {
        _E.PUBLISHED: _S.PUBLISHED,
        _E.APPROVED_REPORT_ONLY: _S.HELD,  # approved before report-only groups were held at approval
        _E.SUPERSEDED: _S.SUPERSEDED,
        _E.FAILED_VALIDATION: _S.REJECTED,
        _E.WITHDRAWN: _S.WITHDRAWN,  # taken back before publish: publish must never send it
    },
    _S.PUBLISHED: {
        _E.REALIZED: _S.REALIZED,
        _E.EXPIRED: _S.EXPIRED,
        _E.SUPERSEDED: _S.SUPERSEDED,
        _E.WITHDRAWN: _S.WITHDRAWN,
    },
    # A realized plan stays on the plans topic and keeps its group on the target; withdrawing it sends the group
    # back to Kafka's own assignment, so the lake must stop saying the target holds.
    _S.REALIZED: {_E.WITHDRAWN: _S.WITHDRAWN},
    _S.HELD: {_E.WITHDRAWN: _S.WITHDRAWN},
}
FINAL = frozenset(s for s in PlanStatus if s not in TRANSITIONS)


def next_status(current: PlanStatus | str, event: PlanEvent) -> PlanStatus | None:
    """The status ``event`` moves a plan in ``current`` to, or None when the event does not apply to it."""
    return TRANSITIONS.get(PlanStatus(current), {}).get(event)


def moved_by(event: PlanEvent) -> tuple[PlanStatus, ...]:
    """The statuses ``event`` moves a plan out of (what a stage selects before it writes)."""
    return tuple(s for s, moves in TRANSITIONS.items() if event in moves)
