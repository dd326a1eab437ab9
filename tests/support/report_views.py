"""Report view records built without Spark: a few groups, one detail, hostile and long ids (for the rendering tests
and the report served inside Airflow)."""

from __future__ import annotations

from dataclasses import replace

from assignor.cost import PlanCost
from jobs.report.detail import placements, schedule
from jobs.report.fleet import importance, summarize
from jobs.report.model import Assignor, FailedExpectation, GroupDetail, GroupRow, Held, PlanVersion, Report

LONG_PID = "3f2a9c4e-7b1d-4e8a-9f00-5d2c1b7a6e91"
HOSTILE = "<script>alert(1)</script>|*g*"


def row(i: int, status: str = "VALIDATED", kip: bool = True, group: str | None = None) -> GroupRow:
    plan = PlanCost(moves=i, warmups=i, rounds=i + 1, restore_offsets=1_000 * i, estimated_seconds=60.0 * i)
    baselines = {Assignor.KIP441: PlanCost(i + 2, i + 3, i + 2, 3_000 * i + 500, 120.0 * i)} if kip else {}
    built = GroupRow(f"s/g{i}", group or f"g{i}", status, None, plan, baselines, 0.5, 0.0, 7, 7)
    return replace(built, restore_lower_bound=800 * i)


def report(rows: list[GroupRow]) -> Report:
    rows = sorted(rows, key=importance)
    first = rows[0]
    detail = GroupDetail(
        first,
        placements({LONG_PID: Held(frozenset({"0_0", "0_1"}))},
                   {LONG_PID: Held(frozenset({"0_0"})), "b": Held(frozenset({"0_1"}))}, {"b": "host-b:8080"}),
        schedule({1: {"b": Held(warmup=frozenset({"0_1"}))}, 2: {"b": Held(frozenset({"0_1"}))}},
                 {("b", "0_1"): 4_321}, 600),
        (FailedExpectation("plan_assignments", "warmups_within_budget", 1),),
        (PlanVersion("s", first.plan_id, first.status, 1, 1_000, 1_795_000_000_000, None, None),),
    )  # fmt: skip
    return Report("s", 1_795_000_000_000, summarize("s", rows), tuple(rows), (detail,))
