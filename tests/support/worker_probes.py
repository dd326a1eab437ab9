"""What tests run inside worker processes: a module that imports no pandas, so a worker unpickling these functions
loads only what the worker itself would."""

from __future__ import annotations

import sys

import pyarrow as pa

from jobs.pipeline.plan_record import PlanCall, plan_table


def loaded_modules() -> list[str]:
    """The modules this process has loaded."""
    return sorted(sys.modules)


def plan_then_list_modules(rows: pa.Table, call: PlanCall) -> tuple[int, list[str]]:
    """The groups plan_table planned from ``rows``, and the modules loaded once it has."""
    return plan_table(rows, call).num_rows, loaded_modules()
