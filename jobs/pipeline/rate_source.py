"""Where a plan's restore rate came from: a module of its own, so the planner workers that record it load no engine."""

from __future__ import annotations

from enum import StrEnum


class RateSource(StrEnum):
    """Where a plan's restore rate came from (the plans table's restore_rate_source)."""

    SETTINGS = "settings"  # RBP_RESTORE_RATE
    OBSERVED = "observed"  # this group's own restoring copies, previous snapshot -> this one
    FLEET = "fleet"  # nothing restoring in this group: the median of every observed instance in the snapshot
    DEFAULT = "default"  # nothing observed at all: assignor.estimate.DEFAULT_RESTORE_RATE
