"""What every plan's steps must satisfy, checked against the state each step was computed from."""

from __future__ import annotations

from assignor import AssignmentConfigs, GroupState
from assignor.invariants import h1_violations, k1_violations, validity_violations
from assignor.planner import GroupPlan
from assignor.simulation import catch_up_fully


def assert_safe_steps(plan: GroupPlan, group: GroupState, configs: AssignmentConfigs) -> None:
    """V1-V4, H1 and K1 in every step; the last step is the target and stops probing."""
    state = group
    for step in plan.steps:
        assert validity_violations(step, state, configs) == []
        # H1 on the step's own input: an active moves only to a process that is caught up by then.
        assert h1_violations(step, state, configs) == []
        assert k1_violations(step, state, configs) == []
        state = catch_up_fully(state, step)
    assert plan.steps[-1] == plan.target
    assert not plan.steps[-1].probing_rebalance_needed
