"""Signed plan records and the leader's decision: honor a verified, fitting plan; otherwise say why."""

from __future__ import annotations

import json
from dataclasses import replace

import jsonschema
import pytest

from assignor import AssignmentConfigs, ClientState, GroupState, TaskId, plan_group
from assignor.runtime.leader import decide
from assignor.runtime.plans import ApprovedPlan, PlanRejected, canonical_json, parse_plan, sign
from assignor.task import LATEST_OFFSET
from schemas import read_json

KEY = b"test-signing-key"
SCHEMA = read_json("plan.schema.json")
TASKS = [TaskId(0, p) for p in range(6)]
NOW = 1_700_000_000_000


def group() -> GroupState:
    owned = {"a": TASKS[:3], "b": TASKS[3:]}
    clients = [
        ClientState(pid, previous_active=frozenset(ts), task_offset_sums=dict.fromkeys(ts, LATEST_OFFSET))
        for pid, ts in owned.items()
    ]
    return GroupState(
        [*clients, ClientState("c")], frozenset(TASKS), changelog_end_offset_sums=dict.fromkeys(TASKS, 10**6)
    )


def approved(g: GroupState, **changes: object) -> ApprovedPlan:
    configs = AssignmentConfigs(probing_rebalance_interval_ms=5_000)
    plan = plan_group(g, configs)
    base = ApprovedPlan(
        "plan-1",
        "orders",
        "snap-1",
        NOW - 10,
        NOW + 3_600_000,
        "alice",
        NOW - 5,
        configs,
        plan.target,
        tuple(plan.move_order),
    )
    return replace(base, **changes)  # type: ignore[arg-type]


def encode(record: dict[str, object]) -> bytes:
    return json.dumps(record).encode()


def test_record_matches_the_schema_and_its_signature_covers_the_canonical_json() -> None:
    record = approved(group()).to_record(KEY)
    jsonschema.validate(record, SCHEMA)
    unsigned = {k: v for k, v in record.items() if k != "signature"}
    assert canonical_json(unsigned) == json.dumps(unsigned, sort_keys=True, separators=(",", ":")).encode()
    assert record["signature"] == sign(record, KEY)
    assert parse_plan(encode(record), KEY) == approved(group())


def test_a_verified_fitting_plan_is_honored() -> None:
    g = group()
    decision = decide("orders", g, AssignmentConfigs(), encode(approved(g).to_record(KEY)), KEY, NOW)
    assert decision.plan_id == "plan-1" and decision.fallback_reason is None
    assert decision.assignment.clients["c"].warmup  # the new instance warms up first
    assert not decision.assignment.clients["c"].active


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [
        (lambda r: r.update(approved_by="mallory"), "bad signature"),
        (lambda r: r.update(signature="0" * 64), "bad signature"),
        (lambda r: r.pop("target"), "malformed plan: target"),
        (lambda r: r.update(schema_version=9), "unsupported plan schema_version 9"),
    ],
)
def test_tampered_or_malformed_records_are_rejected(tamper: object, reason: str) -> None:
    record = approved(group()).to_record(KEY)
    tamper(record)  # type: ignore[operator]
    with pytest.raises(PlanRejected, match=reason):
        parse_plan(encode(record), KEY)


def test_a_record_signed_with_another_key_is_rejected() -> None:
    with pytest.raises(PlanRejected, match="bad signature"):
        parse_plan(encode(approved(group()).to_record(b"other-key")), KEY)


@pytest.mark.parametrize(
    ("live", "plan_changes", "group_id", "reason"),
    [
        (lambda g: g, {"valid_until": NOW - 1}, "orders", "expired"),
        (lambda g: replace(g, clients=g.clients[:2]), {}, "orders", "names departed instances: c"),
        (lambda g: replace(g, clients=(*g.clients, ClientState("d"))), {}, "orders", "does not know instances: d"),
        (
            lambda g: replace(g, stateful_tasks=g.stateful_tasks | {TaskId(1, 0)}),
            {},
            "orders",
            "does not match the group's tasks",
        ),
        (lambda g: g, {}, "payments", "is for group 'orders'"),
    ],
)
def test_a_plan_that_does_not_fit_falls_back_to_kip441_with_the_reason(
    live: object, plan_changes: dict[str, object], group_id: str, reason: str
) -> None:
    g = group()
    record = encode(approved(g, **plan_changes).to_record(KEY))
    live_group = live(g)  # type: ignore[operator]
    decision = decide(group_id, live_group, AssignmentConfigs(), record, KEY, NOW)
    assert decision.plan_id is None
    assert decision.fallback_reason is not None and reason in decision.fallback_reason
    decision.assignment.validate(live_group, AssignmentConfigs())


def test_no_plan_means_kip441_without_a_fallback_reason() -> None:
    decision = decide("orders", group(), AssignmentConfigs(), None, KEY, NOW)
    assert decision.plan_id is None and decision.fallback_reason is None


def test_garbage_record_is_reported_not_raised() -> None:
    decision = decide("orders", group(), AssignmentConfigs(), b"\x00garbage", KEY, NOW)
    assert decision.fallback_reason is not None and "malformed plan" in decision.fallback_reason
