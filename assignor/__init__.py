"""Pure-Python task assignment for Kafka Streams-style groups: lags, KIP-441, the broker-side assignment, planner."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from assignor.native import select_build

# Before any core module loads: the mypyc build (make core) if it matches the sources, else the sources.
CORE_BUILD = select_build()

if TYPE_CHECKING:
    from assignor.assignment import ClientAssignment, GroupAssignment, Role
    from assignor.configs import AssignmentConfigs
    from assignor.cost import PlanCost
    from assignor.errors import AssignmentError, InvalidGroupState
    from assignor.high_availability import assign_high_availability
    from assignor.honor import honor_plan
    from assignor.lags import compute_lags
    from assignor.planner import GroupPlan, plan_group
    from assignor.state import ClientState, GroupState
    from assignor.task import LATEST_OFFSET, UNKNOWN_OFFSET_SUM, TaskId

# Public name -> defining module. Loaded on first use so that importing a light module (assignor.task, the
# wire formats) does not pull in the planner and, through it, the solvers' numeric libraries.
_PUBLIC = {
    "LATEST_OFFSET": "assignor.task",
    "UNKNOWN_OFFSET_SUM": "assignor.task",
    "AssignmentConfigs": "assignor.configs",
    "AssignmentError": "assignor.errors",
    "ClientAssignment": "assignor.assignment",
    "ClientState": "assignor.state",
    "GroupAssignment": "assignor.assignment",
    "GroupPlan": "assignor.planner",
    "GroupState": "assignor.state",
    "InvalidGroupState": "assignor.errors",
    "PlanCost": "assignor.cost",
    "Role": "assignor.assignment",
    "TaskId": "assignor.task",
    "assign_high_availability": "assignor.high_availability",
    "compute_lags": "assignor.lags",
    "honor_plan": "assignor.honor",
    "plan_group": "assignor.planner",
}

__all__ = [
    "LATEST_OFFSET",
    "UNKNOWN_OFFSET_SUM",
    "AssignmentConfigs",
    "AssignmentError",
    "ClientAssignment",
    "ClientState",
    "GroupAssignment",
    "GroupPlan",
    "GroupState",
    "InvalidGroupState",
    "PlanCost",
    "Role",
    "TaskId",
    "assign_high_availability",
    "compute_lags",
    "honor_plan",
    "plan_group",
]


def __getattr__(name: str) -> object:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'assignor' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))
