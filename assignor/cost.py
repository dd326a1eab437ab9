"""What bringing a group to its end state costs: one record for a plan, a baseline assignor's replay and the report."""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass(frozen=True)
class PlanCost:
    """A plan's (or a baseline assignor's) cost, in the plans and plan_baselines tables' own column names."""

    moves: int  # actives whose owner changes
    warmups: int  # warmup placements over all steps
    rounds: int  # steps (probing rebalances)
    restore_offsets: int  # offsets warmups and new standbys replay
    estimated_seconds: float  # how long the whole change takes at the restore rate it was estimated with


COST_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(PlanCost))
"""PlanCost's fields: the cost columns of plans, plan_baselines and the report, in that order."""
