"""The life of a plan, as the `plans.status` column spells it (docs/formats.md)."""

from __future__ import annotations

from enum import StrEnum


class PlanStatus(StrEnum):
    """A plan's status; a StrEnum, so it is stored and compared as the contract's string."""

    PENDING = "PENDING"
    VALIDATED = "VALIDATED"
    REJECTED = "REJECTED"
    APPROVED = "APPROVED"
    PUBLISHED = "PUBLISHED"
    SUPERSEDED = "SUPERSEDED"
    EXPIRED = "EXPIRED"
    REALIZED = "REALIZED"
    NOOP = "NOOP"  # the group is already balanced: nothing to do
    WITHDRAWN = "WITHDRAWN"  # a signed withdrawal was published for it: the group runs Kafka's own assignment
    HELD = "HELD"  # approved for a report-only group, which cannot honor plans: never published


# Statuses a plan reaches only after a person approved it.
APPROVED_LATER = (
    PlanStatus.APPROVED,
    PlanStatus.PUBLISHED,
    PlanStatus.SUPERSEDED,
    PlanStatus.EXPIRED,
    PlanStatus.REALIZED,
    PlanStatus.WITHDRAWN,
    PlanStatus.HELD,
)
