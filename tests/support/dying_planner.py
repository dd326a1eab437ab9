"""Worker jobs that die as the out-of-memory killer would end them (SIGKILL), for the worker-fault tests."""

from __future__ import annotations

import os
import signal
from typing import Any

import pyarrow as pa

from assignor import AssignmentConfigs
from jobs.pipeline.baselines import baseline_records
from jobs.pipeline.group_input import PlanningRows, first_value
from jobs.pipeline.plan_record import PlanCall, plan_table

POISON = "poison"


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def plan_or_die(rows: pa.Table, call: PlanCall) -> pa.Table:
    """plan_table, except that a call holding group POISON kills its process."""
    if POISON in rows.column("group_id").to_pylist():
        die()
    return plan_table(rows, call)


def baselines_or_die(
    rows: PlanningRows, configs: AssignmentConfigs, restore_rate: float | None
) -> list[dict[str, Any]]:
    """baseline_records, except that group POISON kills its process."""
    if first_value(rows, "group_id") == POISON:
        die()
    return baseline_records(rows, configs, restore_rate)
