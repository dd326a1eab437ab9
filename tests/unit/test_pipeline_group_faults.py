"""A fault while planning or replaying one group costs that group only, never the stage."""

from __future__ import annotations

import pandas as pd
import pytest

from assignor import AssignmentConfigs
from assignor.baselines import baseline_cost
from jobs.pipeline import baselines
from jobs.pipeline.plan_record import PLANNED_SCHEMA, STEP_COLUMNS, plan_id_of, plan_record
from jobs.pipeline.status import PlanStatus
from tests.support.planning_rows import two_client_rows


def _rows() -> pd.DataFrame:
    return two_client_rows(100, 100)


def test_the_rows_plan_without_faults() -> None:
    record = plan_record(_rows(), AssignmentConfigs(), None, created_at=1)
    assert record["status"] in (PlanStatus.PENDING, PlanStatus.NOOP)
    assert {r["assignor"] for r in baselines.baseline_records(_rows(), AssignmentConfigs(), 10_000.0)} == {
        "kip441",
        "streams_broker",
    }


def test_a_planner_fault_rejects_only_that_group_naming_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_args: object, **_kwargs: object) -> None:
        raise KeyError("boom")

    monkeypatch.setattr("jobs.pipeline.plan_record.plan_group", broken)
    record = plan_record(_rows(), AssignmentConfigs(), None, created_at=1)
    assert record["status"] == PlanStatus.REJECTED
    assert record["reason"].startswith("planning failed: internal error KeyError")
    assert record["plan_id"] == plan_id_of("s1", "g1")


def test_a_baseline_fault_drops_only_that_assignors_row(monkeypatch: pytest.MonkeyPatch) -> None:
    def flaky(group, configs, name, **kwargs):  # type: ignore[no-untyped-def]
        if name == "kip441":
            raise ZeroDivisionError("boom")
        return baseline_cost(group, configs, name, **kwargs)

    monkeypatch.setattr(baselines, "baseline_cost", flaky)
    records = baselines.baseline_records(_rows(), AssignmentConfigs(), 10_000.0)
    assert [r["assignor"] for r in records] == ["streams_broker"]


def test_groups_past_the_size_cap_get_no_baselines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(baselines, "BASELINE_MAX_TASKS", 1)
    assert baselines.baseline_records(_rows(), AssignmentConfigs(), 10_000.0) == []


def test_a_plans_steps_are_columns_of_plan_assignments() -> None:
    record = plan_record(_rows(), AssignmentConfigs(), None, created_at=1)
    steps = record["assignments"].columns()
    assert tuple(steps) == STEP_COLUMNS and len({len(v) for v in steps.values()}) == 1
    entries = [dict(zip(STEP_COLUMNS, e, strict=True)) for e in zip(*steps.values(), strict=True)]
    assert entries and {e["step"] for e in entries} == set(range(1, record["rounds"] + 1))
    last = max(e["step"] for e in entries)
    actives = sorted((e["process_id"], e["task_id"]) for e in entries if e["step"] == last and e["role"] == "ACTIVE")
    assert actives in ([("p1", "0_0"), ("p2", "0_1")], [("p1", "0_1"), ("p2", "0_0")])
    assert record["move_order"] is None or all(isinstance(t, str) for t in record["move_order"])


def test_a_rejected_group_has_no_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_args: object, **_kwargs: object) -> None:
        raise KeyError("boom")

    monkeypatch.setattr("jobs.pipeline.plan_record.plan_group", broken)
    record = plan_record(_rows(), AssignmentConfigs(), None, created_at=1)
    assert (record["assignments"].columns(), record["move_order"]) == ({c: [] for c in STEP_COLUMNS}, None)


def test_the_planner_output_schema_comes_from_the_table_schema_files() -> None:
    assert PLANNED_SCHEMA.endswith(
        "assignments array<struct<step: int, process_id: string, task_id: string, role: string>>"
    )
    assert "`move_order` array<string>" in PLANNED_SCHEMA
