"""The plan lifecycle's rules without Spark or Kafka: which event moves which status, how observe reads withdrawals
off the plans topic and fallbacks off the reports, and how the report shows a report-only plan."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from assignor.protocol.plans import Withdrawal
from jobs.pipeline.intake import parse_records
from jobs.pipeline.lifecycle import FINAL, TRANSITIONS, PlanEvent, moved_by, next_status
from jobs.pipeline.plan_reality import (
    PublishedPlan,
    fallen_back,
    group_fallbacks,
    newest_withdrawals,
    withdrawn_plans,
)
from jobs.pipeline.report_only import GROUP_METADATA_REASON
from jobs.pipeline.status import APPROVED_LATER, PlanStatus
from jobs.report.approval import approval_body
from schemas import read_json
from tests.support.pipeline_kafka import report, stateful_topology
from tests.support.report_views import report as view
from tests.support.report_views import row
from tests.support.signing import FORGER, SIGNER, VERIFY_KEYS

S, E = PlanStatus, PlanEvent


@pytest.mark.parametrize(
    ("status", "event", "after"),
    [
        (S.PENDING, E.PASSED_VALIDATION, S.VALIDATED),
        (S.PENDING, E.FAILED_VALIDATION, S.REJECTED),
        (S.VALIDATED, E.APPROVED, S.APPROVED),
        (S.VALIDATED, E.APPROVED_REPORT_ONLY, S.HELD),
        (S.APPROVED, E.APPROVED_REPORT_ONLY, S.HELD),
        (S.APPROVED, E.PUBLISHED, S.PUBLISHED),
        (S.APPROVED, E.WITHDRAWN, S.WITHDRAWN),
        (S.PUBLISHED, E.WITHDRAWN, S.WITHDRAWN),
        (S.PUBLISHED, E.REALIZED, S.REALIZED),
        (S.PUBLISHED, E.EXPIRED, S.EXPIRED),
        (S.PUBLISHED, E.SUPERSEDED, S.SUPERSEDED),
        (S.REALIZED, E.WITHDRAWN, S.WITHDRAWN),
        (S.HELD, E.WITHDRAWN, S.WITHDRAWN),
    ],
)
def test_each_event_moves_a_plan_to_its_next_status(status: PlanStatus, event: PlanEvent, after: PlanStatus) -> None:
    assert next_status(status, event) == after
    assert next_status(str(status), event) == after  # as the plans table stores it


def test_a_held_plan_is_never_published_and_final_statuses_never_move() -> None:
    assert next_status(S.HELD, E.PUBLISHED) is None
    assert next_status(S.VALIDATED, E.PUBLISHED) is None  # only an approved plan goes out
    assert {S.REJECTED, S.SUPERSEDED, S.EXPIRED, S.NOOP, S.WITHDRAWN} == FINAL
    assert all(next_status(s, e) is None for s in FINAL for e in PlanEvent)
    assert set(moved_by(E.WITHDRAWN)) == {S.APPROVED, S.PUBLISHED, S.REALIZED, S.HELD}


def test_every_status_is_in_the_schema_the_suite_and_the_approval_record() -> None:
    names = {str(s) for s in PlanStatus}
    suite = read_json("expectations/plans.json")["expectations"][0]["kwargs"]["value_set"]
    assert set(suite) == names
    assert {S.WITHDRAWN, S.HELD} <= set(APPROVED_LATER)  # approving again leaves them as they are
    reached = {after for moves in TRANSITIONS.values() for after in moves.values()}
    assert reached | {S.PENDING, S.NOOP} == set(PlanStatus)


def _topic(*records: dict[str, object]) -> dict[bytes, bytes | None]:
    return {str(r["group_id"]).encode(): json.dumps(r).encode() for r in records}


def test_only_a_verified_withdrawal_as_the_newest_record_withdraws() -> None:
    signed = Withdrawal("p1", "orders", 1_000).to_record(SIGNER)
    forged = Withdrawal("p2", "clicks", 1_000).to_record(FORGER)
    unsigned = {"withdrawn": True, "group_id": "pays", "plan_id": "p3"}
    found = newest_withdrawals(_topic(signed, forged, unsigned) | {b"gone": None}, VERIFY_KEYS)
    assert list(found) == ["orders"] and found["orders"].plan_id == "p1"


def test_a_withdrawal_takes_back_the_plan_it_names_and_the_groups_newest_published_plan() -> None:
    plans = [
        PublishedPlan("old", "orders", "REALIZED", 10),
        PublishedPlan("new", "orders", "PUBLISHED", 20),
        PublishedPlan("other", "clicks", "PUBLISHED", 20),
    ]
    withdrawal = Withdrawal("old", "orders", 30)
    assert set(withdrawn_plans(plans, {"orders": withdrawal})) == {"old", "new"}
    assert set(withdrawn_plans(plans, {"orders": replace(withdrawal, plan_id="elsewhere")})) == {"new"}
    assert withdrawn_plans(plans, {}) == {}


def test_a_fallback_counts_only_after_publish_and_only_for_a_published_plan() -> None:
    topology = stateful_topology("orders", 1)
    records = {
        b"orders/a": report("orders", "a", topology=topology, reported_at=100) | {"fallback_reason": "expired: x"},
        b"orders/b": report("orders", "b", topology=topology, reported_at=300) | {"fallback_reason": "does_not_fit: y"},
        b"clicks/x": report("clicks", "x", topology=stateful_topology("clicks", 1), plan_id="p-clicks"),
    }
    reports, intake = parse_records({k: json.dumps(v).encode() for k, v in records.items()})
    assert not intake.quarantine
    fallbacks = group_fallbacks(reports)
    assert set(fallbacks) == {"orders"}  # clicks honors its plan
    assert (fallbacks["orders"].process_id, fallbacks["orders"].reason) == ("b", "does_not_fit: y")  # the newest
    assert set(fallen_back([PublishedPlan("p", "orders", "PUBLISHED", 200)], fallbacks)) == {"p"}
    assert fallen_back([PublishedPlan("p", "orders", "PUBLISHED", 400)], fallbacks) == {}  # reported before publish
    assert fallen_back([PublishedPlan("p", "orders", "REALIZED", 200)], fallbacks) == {}


def test_the_approval_page_marks_a_lower_bound_restore_and_says_a_report_only_plan_will_be_held() -> None:
    legacy = replace(
        row(3, group="legacy"), report_only=GROUP_METADATA_REASON, source_age_ms=5_400_000, missing_offset_sums=2
    )
    plain = replace(row(2, group="plain"), source_age_ms=1_000)
    assert legacy.restore_figure == "≥ 3,000" and plain.restore_figure == "2,000" and plain.source_note == ""
    assert legacy.source_note.startswith("report-only: planned from group metadata at least 1 h 30 min old")
    assert "approving it HOLDs it" in legacy.source_note
    assert "2 held replicas without offset sums" in replace(legacy, status="HELD").source_note
    assert "HOLDs" not in replace(legacy, status="HELD").source_note
    body = approval_body(view([legacy, plain]), "r", "d", 0, 60)
    line = next(x for x in body.splitlines() if "| legacy |" in x)
    assert "≥ 3,000" in line and "report-only" in line
