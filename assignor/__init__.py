"""Pure-Python task assignment for Kafka Streams-style groups: lags, KIP-441, the broker-side assignment, planner."""

from assignor.assignment import ClientAssignment, GroupAssignment, Role
from assignor.configs import AssignmentConfigs
from assignor.errors import AssignmentError, InvalidGroupState
from assignor.high_availability import assign_high_availability
from assignor.lags import compute_lags
from assignor.planner import GroupPlan, honor_plan, plan_group
from assignor.state import ClientState, GroupState
from assignor.task import LATEST_OFFSET, UNKNOWN_OFFSET_SUM, TaskId

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
    "Role",
    "TaskId",
    "assign_high_availability",
    "compute_lags",
    "honor_plan",
    "plan_group",
]
