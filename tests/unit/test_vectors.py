"""The shared vectors (schemas/vectors) against the Python rules; JUnit runs the same files against the plugin."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from typing import Any

import pytest

from assignor import (
    AssignmentConfigs,
    ClientState,
    GroupAssignment,
    GroupState,
    TaskId,
    assign_high_availability,
    compute_lags,
)
from assignor.assignment import ClientAssignment
from assignor.honor import honor_target
from assignor.protocol.deferral import DeferralSettings, Departure, defer, pending_departures
from assignor.protocol.plan_keys import VerifyKeys
from assignor.protocol.plan_ledger import PlanLedger
from assignor.protocol.plans import PlanRejected, Verifier, fit_rejection, target_for
from assignor.protocol.restored_offsets import RestoredOffsetsReport, RestoredRejected, TaskRestore
from jobs.pipeline.streams_steps import lag as streams_lag
from tests.support.restored_vectors import restored_vectors
from tests.support.vectors import (
    VECTORS,
    _plan,
    assignment_json,
    deferral_vectors,
    ha_vectors,
    heartbeat_lag_vectors,
    honor_vectors,
    plan_ledger_vectors,
    signed_plan_vectors,
)

SIGNED = json.loads((VECTORS / "signed_plans.json").read_text(encoding="utf-8"))
HONOR = json.loads((VECTORS / "honor_cases.json").read_text(encoding="utf-8"))
HA = json.loads((VECTORS / "high_availability_cases.json").read_text(encoding="utf-8"))
DEFERRAL = json.loads((VECTORS / "deferral_cases.json").read_text(encoding="utf-8"))
LEDGER = json.loads((VECTORS / "plan_ledger_cases.json").read_text(encoding="utf-8"))
HEARTBEAT_LAGS = json.loads((VECTORS / "heartbeat_lags.json").read_text(encoding="utf-8"))
RESTORED = json.loads((VECTORS / "restored_offsets_cases.json").read_text(encoding="utf-8"))


def test_the_committed_vectors_are_what_the_rules_produce() -> None:
    # A rule change must come with regenerated vectors (python -m tests.support.vectors) that Java then meets.
    assert signed_plan_vectors() == SIGNED
    assert honor_vectors() == HONOR
    assert ha_vectors() == HA
    assert deferral_vectors() == DEFERRAL
    assert plan_ledger_vectors() == LEDGER
    assert heartbeat_lag_vectors() == HEARTBEAT_LAGS
    assert restored_vectors() == RESTORED


@pytest.mark.parametrize("case", RESTORED["cases"], ids=lambda c: c["name"])
def test_restored_offsets_record(case: dict[str, Any]) -> None:
    value = case["value"].encode("utf-8")
    if not case["accepted"]:
        with pytest.raises(RestoredRejected):
            RestoredOffsetsReport.decode(case["key"], value)
        return
    report = RestoredOffsetsReport.decode(case["key"], value)
    assert {str(t): [r.offsets, r.started_at] for t, r in report.restores.items()} == case["restores"]


def test_restored_offsets_encoding_is_the_shared_bytes() -> None:
    e = RESTORED["encoding"]
    restores = {TaskId.parse(t): TaskRestore(*r) for t, r in e["restores"].items()}
    report = RestoredOffsetsReport(e["group_id"], e["process_id"], e["reported_at"], restores)
    assert (report.key, report.encode().decode("utf-8")) == (e["key"], e["value"])


@pytest.mark.parametrize("case", LEDGER["cases"], ids=lambda c: c["name"])
def test_plan_ledger(case: dict[str, Any]) -> None:
    keys = VerifyKeys.parse(",".join(f"{k}={v}" for k, v in LEDGER["keys"].items()))
    verifier, now = Verifier(keys, LEDGER["clock_skew_ms"]), LEDGER["now_ms"]
    ledger = PlanLedger(case["group_id"]).remember(case["remembered_sequence"])
    for entry in case["records"]:
        value = None if entry["record_b64"] is None else base64.b64decode(entry["record_b64"])
        if value is not None:
            value = value.ljust(entry.get("pad_with_spaces_to", 0), b" ")
        ledger = ledger.offer(value, verifier, now)
    choice = ledger.recheck(verifier, now).choice(now)
    got = {
        "plan_id": None if choice.plan is None else choice.plan.plan_id,
        "reason_code": None if choice.reason is None else str(choice.reason.code),
        "highest_sequence": choice.sequence,
    }
    assert got == case["expected"]


def test_the_ledger_vectors_cover_keeping_a_plan_past_every_kind_of_bad_newest_record() -> None:
    kept = {c["expected"]["reason_code"] for c in LEDGER["cases"] if c["expected"]["plan_id"] is not None}
    assert {"malformed", "bad_signature", "unknown_key", "replayed", "wrong_group", "future"} <= kept


def test_the_deferral_vectors_cover_every_outcome() -> None:
    outcomes = {(c["expected"]["deferred"], bool(c["expected"].get("held"))) for c in DEFERRAL["cases"]}
    assert outcomes == {(False, False), (True, False), (True, True)}


def test_every_reason_code_a_record_or_a_target_can_cause_has_a_vector() -> None:
    codes = {c["reason_code"] for c in SIGNED["cases"]} | {
        c["expected"]["fallback"] for c in HONOR["cases"] if "fallback" in c["expected"]
    }
    assert codes - {None} == {
        "malformed", "unsupported_version", "unknown_key", "bad_signature", "digest_mismatch", "wrong_group",
        "future", "replayed", "withdrawn", "expired", "departed_instances", "unknown_instances", "tasks_changed",
        "invalid_target",
    }  # fmt: skip


@pytest.mark.parametrize("case", SIGNED["cases"], ids=lambda c: c["name"])
def test_signed_record(case: dict[str, Any]) -> None:
    keys = VerifyKeys.parse(",".join(f"{k}={v}" for k, v in SIGNED["keys"].items()))
    value = base64.b64decode(case["record_b64"])
    value = value.ljust(case.get("pad_with_spaces_to", 0), b" ")
    verifier = Verifier(keys, SIGNED["clock_skew_ms"])
    try:
        plan = verifier.verify(value, case["group_id"], SIGNED["now_ms"], case["highest_sequence"])
    except PlanRejected as rejected:
        assert (case["outcome"], case["reason_code"]) == (
            "withdrawn" if rejected.code == "withdrawn" else "rejected",
            rejected.code,
        )
    else:
        assert case["outcome"] == "plan" and case["plan_id"] == plan.plan_id


def _tasks(values: list[str]) -> frozenset[TaskId]:
    return frozenset(TaskId.parse(v) for v in values)


def _group(data: dict[str, Any]) -> GroupState:
    clients = [
        ClientState(
            c["process_id"],
            c["capacity"],
            _tasks(c["previous_active"]),
            _tasks(c["previous_standby"]),
            {TaskId.parse(t): s for t, s in c["task_offset_sums"].items()},
            c["client_tags"],
        )
        for c in data["clients"]
    ]
    ends = {TaskId.parse(t): e for t, e in data["changelog_end_offset_sums"].items()}
    return GroupState(clients, _tasks(data["stateful_tasks"]), _tasks(data["stateless_tasks"]), ends)


@pytest.mark.parametrize("case", HONOR["cases"], ids=lambda c: c["name"])
def test_honor_case(case: dict[str, Any]) -> None:
    group = _group(case["group"])
    lags = {pid: {str(t): lag for t, lag in tl.items()} for pid, tl in compute_lags(group).items()}
    assert lags == case["lags"]  # the plugin's input (KIP-924 lag sums) says the same as the offset sums
    target = GroupAssignment(
        {pid: ClientAssignment(_tasks(r["active"]), _tasks(r["standby"])) for pid, r in case["target"].items()}
    )
    plan = replace(
        _plan(),
        configs=AssignmentConfigs(**case["configs"]),
        target=target,
        move_order=tuple(TaskId.parse(t) for t in case["move_order"]),
    )
    rejection = fit_rejection(plan, group)
    if "fallback" in case["expected"]:
        assert rejection is not None and rejection.code == case["expected"]["fallback"]
        return
    assert rejection is None
    live = honor_target(target_for(plan.target, group), group, plan.configs, plan.move_order)
    got = assignment_json(live)
    assert got == case["expected"]["assignment"]
    assert live.probing_rebalance_needed == case["expected"]["followup_rebalance"]
    live.validate(group, plan.configs)


@pytest.mark.parametrize("case", HA["cases"], ids=lambda c: c["name"])
def test_high_availability_case(case: dict[str, Any]) -> None:
    group = _group(case["group"])
    configs = case["configs"]
    result = assign_high_availability(
        group,
        AssignmentConfigs(**{**configs, "rack_aware_assignment_tags": tuple(configs["rack_aware_assignment_tags"])}),
    )
    got = assignment_json(result)
    assert got == case["expected"]["assignment"]
    assert result.probing_rebalance_needed == case["expected"]["followup_rebalance"]


def _departures(data: dict[str, Any]) -> dict[str, Departure]:
    return {pid: Departure(pid, d["departed_at_ms"], _tasks(d["active"])) for pid, d in data.items()}


@pytest.mark.parametrize("case", DEFERRAL["cases"], ids=lambda c: c["name"])
def test_deferral_case(case: dict[str, Any]) -> None:
    group = _group(case["group"])
    configs = AssignmentConfigs(**case["configs"])
    settings = DeferralSettings(**case["settings"])
    previous = (
        GroupAssignment(
            {
                pid: ClientAssignment(_tasks(r["active"]), _tasks(r["standby"]), _tasks(r["warmup"]))
                for pid, r in case["previous"].items()
            }
        )
        if case["previous"] is not None
        else None
    )
    expected = case["expected"]
    pending = pending_departures(previous, group, _departures(case["departures"]), case["now_ms"], settings)
    assert pending == _departures(expected["pending"])
    assert bool(pending and previous) == expected["deferred"]
    if previous is None or not pending:
        return
    deferral = defer(previous, group, configs, pending, case["now_ms"], settings)
    assert assignment_json(deferral.assignment) == expected["assignment"]
    assert sorted(map(str, deferral.held)) == expected["held"]
    assert deferral.rebalance_in_ms == expected["rebalance_in_ms"]


@pytest.mark.parametrize("case", HEARTBEAT_LAGS["cases"], ids=lambda c: c["name"])
def test_heartbeat_lag_case(case: dict[str, Any]) -> None:
    # observe's step rule and the broker assignor (JUnit: HeartbeatLagVectorsTest) read a warm-up's lag alike.
    assert streams_lag(case["offset_sum"], case["end_offset_sum"]) == case["lag"]
