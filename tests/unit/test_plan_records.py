"""Signed plan records and the leader's decision: honor a verified, fitting plan; otherwise say why."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from assignor import AssignmentConfigs, ClientState, GroupState, TaskId, plan_group
from assignor.protocol.plan_keys import PlanKeyError, PlanSigner, VerifyKeys
from assignor.protocol.plans import (
    ApprovedPlan,
    PlanRejected,
    Reason,
    Verifier,
    Withdrawal,
    read_record,
    target_digest,
)
from assignor.protocol.strict_json import canonical_json
from assignor.task import LATEST_OFFSET
from schemas import read_json
from tests.support.signing import FORGER, SIGNER, VERIFIER, VERIFY_KEYS, decide_on

SCHEMA = read_json("plan.schema.json")
TASKS = [TaskId(0, p) for p in range(6)]
NOW = 1_700_000_000_000
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=20,
)


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
        "plan-1", "orders", "snap-1", NOW - 10, NOW + 3_600_000, "alice", NOW - 5, configs, plan.target,
        tuple(plan.move_order),
    )  # fmt: skip
    return replace(base, **changes)  # type: ignore[arg-type]


def encode(record: dict[str, object]) -> bytes:
    return json.dumps(record).encode()


def resigned(record: dict[str, Any], signer: PlanSigner = SIGNER) -> bytes:
    """A tampered record signed again by a key holder: only checks after the signature can catch it."""
    fields = {k: v for k, v in record.items() if k != "signature"}
    return encode({**fields, "signature": signer.sign(canonical_json(fields))})


def test_record_matches_the_schema_and_its_signature_covers_the_canonical_json() -> None:
    record = approved(group()).to_record(SIGNER)
    jsonschema.validate(record, SCHEMA)
    assert record["key_id"] == "test-key" and len(record["signature"]) == 128
    assert record["target_digest"] == target_digest(approved(group()).target)
    unsigned = {k: v for k, v in record.items() if k != "signature"}
    assert canonical_json(unsigned) == json.dumps(unsigned, sort_keys=True, separators=(",", ":")).encode()
    assert read_record(encode(record), VERIFY_KEYS) == replace(approved(group()), sequence=record["sequence"])


def test_a_verified_fitting_plan_is_honored() -> None:
    g = group()
    decision = decide_on("orders", g, AssignmentConfigs(), encode(approved(g).to_record(SIGNER)), VERIFIER, NOW)
    assert decision.plan_id == "plan-1" and decision.fallback_reason is None
    assert decision.sequence == NOW - 10 and decision.probing_interval_ms == 5_000
    assert decision.assignment.clients["c"].warmup  # the new instance warms up first
    assert not decision.assignment.clients["c"].active


@pytest.mark.parametrize(
    ("tamper", "code"),
    [
        (lambda r: r.update(approved_by="mallory"), Reason.BAD_SIGNATURE),
        (lambda r: r.update(signature="0" * 128), Reason.BAD_SIGNATURE),
        (lambda r: r.update(signature="0" * 64), Reason.MALFORMED),
        (lambda r: r.update(signature="A" * 128), Reason.MALFORMED),
        (lambda r: r.update(signature="é" * 128), Reason.MALFORMED),
        (lambda r: r.update(key_id="someone-else"), Reason.UNKNOWN_KEY),
        (lambda r: r.pop("target"), Reason.MALFORMED),
        (lambda r: r.update(schema_version=9), Reason.UNSUPPORTED_VERSION),
        (lambda r: r.update(created_at=True), Reason.MALFORMED),
    ],
)
def test_tampered_or_malformed_records_are_rejected(tamper: Any, code: Reason) -> None:
    record = approved(group()).to_record(SIGNER)
    tamper(record)
    with pytest.raises(PlanRejected) as rejected:
        read_record(encode(record), VERIFY_KEYS)
    assert rejected.value.code is code and str(rejected.value).startswith(f"{code}: ")


def test_a_record_signed_by_a_forger_is_rejected() -> None:
    with pytest.raises(PlanRejected) as rejected:
        read_record(encode(approved(group()).to_record(FORGER)), VERIFY_KEYS)
    assert rejected.value.code is Reason.BAD_SIGNATURE


def test_the_digest_binds_the_target_even_for_a_key_holder() -> None:
    record = approved(group()).to_record(SIGNER)
    record["target"]["c"]["active"] = []  # the approved target was changed after approval
    with pytest.raises(PlanRejected) as rejected:
        read_record(resigned(record), VERIFY_KEYS)
    assert rejected.value.code is Reason.DIGEST_MISMATCH


def test_rotation_accepts_every_configured_key_and_names_unknown_ones() -> None:
    new = PlanSigner.generate("next")
    both = VerifyKeys({**VERIFY_KEYS.keys, **new.verify_keys().keys})
    for signer in (SIGNER, new):
        assert read_record(encode(approved(group()).to_record(signer)), both).plan_id == "plan-1"
    with pytest.raises(PlanRejected, match="unknown_key: key_id 'next'"):
        read_record(encode(approved(group()).to_record(new)), VERIFY_KEYS)
    assert VerifyKeys.parse(both.render()).render() == both.render()


@pytest.mark.parametrize("text", ["k", "k=abc", "=" + "0" * 64, "a b=" + "0" * 64, "k=" + "0" * 64 + ",k=" + "1" * 64])
def test_bad_verify_key_settings_name_the_entry(text: str) -> None:
    with pytest.raises(PlanKeyError):
        VerifyKeys.parse(text)


def test_replays_future_plans_and_withdrawals() -> None:
    verifier = Verifier(VERIFY_KEYS, clock_skew_ms=1_000)
    record = encode(approved(group()).to_record(SIGNER, 500))
    assert isinstance(verifier.verify(record, "orders", NOW, highest_sequence=500), ApprovedPlan)
    with pytest.raises(PlanRejected, match=r"^replayed: "):
        verifier.verify(record, "orders", NOW, highest_sequence=501)
    future = encode(approved(group(), created_at=NOW + 1_001).to_record(SIGNER))
    with pytest.raises(PlanRejected, match=r"^future: "):
        verifier.verify(future, "orders", NOW)
    withdrawal = encode(Withdrawal("plan-1", "orders", NOW, 600).to_record(SIGNER))
    jsonschema.validate(json.loads(withdrawal), SCHEMA)
    with pytest.raises(PlanRejected, match=r"^withdrawn: "):
        verifier.verify(withdrawal, "orders", NOW)
    decision = decide_on("orders", group(), AssignmentConfigs(), [record, withdrawal], verifier, NOW)
    assert decision.plan_id is None and decision.sequence == 600
    # The withdrawal is a sequence like any other: the plan it withdrew, replayed after it, is not honored.
    replay = decide_on("orders", group(), AssignmentConfigs(), [record, withdrawal, record], verifier, NOW)
    assert replay.plan_id is None and (replay.fallback_reason or "").startswith("replayed: ")
    # Nor after a restart that finds only the replay on the topic (compacted), with the floor kept on disk.
    restarted = decide_on("orders", group(), AssignmentConfigs(), [record], verifier, NOW, remembered_sequence=600)
    assert restarted.plan_id is None and (restarted.fallback_reason or "").startswith("replayed: ")


def test_a_newest_record_that_does_not_verify_keeps_the_verified_plan_and_says_why() -> None:
    record = encode(approved(group()).to_record(SIGNER, 500))
    forged = encode(approved(group()).to_record(FORGER, 700))
    for newest, code in ((b"\x00garbage", Reason.MALFORMED), (forged, Reason.BAD_SIGNATURE)):
        decision = decide_on("orders", group(), AssignmentConfigs(), [record, newest], VERIFIER, NOW)
        assert decision.plan_id == "plan-1" and decision.sequence == 500
        assert (decision.fallback_reason or "").startswith(f"{code}: ")


def test_an_unsigned_tombstone_like_record_withdraws_nothing() -> None:
    forged = Withdrawal("plan-1", "orders", NOW).to_record(FORGER)
    decision = decide_on("orders", group(), AssignmentConfigs(), encode(forged), VERIFIER, NOW)
    assert (decision.fallback_reason or "").startswith("bad_signature: ")
    assert decision.sequence is None


def test_plan_digest_binds_the_body_even_for_a_key_holder() -> None:
    record = approved(group()).to_record(SIGNER)
    assert record["plan_digest"] == approved(group()).plan_digest
    record["valid_until"] += 86_400_000  # a longer validity than the approver approved
    with pytest.raises(PlanRejected) as rejected:
        read_record(resigned(record), VERIFY_KEYS)
    assert rejected.value.code is Reason.DIGEST_MISMATCH


@pytest.mark.parametrize(
    ("live", "plan_changes", "group_id", "code"),
    [
        (lambda g: g, {"valid_until": NOW - 1}, "orders", Reason.EXPIRED),
        (lambda g: replace(g, clients=g.clients[:2]), {}, "orders", Reason.DEPARTED_INSTANCES),
        (lambda g: replace(g, clients=(*g.clients, ClientState("d"))), {}, "orders", Reason.UNKNOWN_INSTANCES),
        (lambda g: replace(g, stateful_tasks=g.stateful_tasks | {TaskId(1, 0)}), {}, "orders", Reason.TASKS_CHANGED),
        (lambda g: g, {}, "payments", Reason.WRONG_GROUP),
    ],
)
def test_a_plan_that_does_not_fit_falls_back_to_kip441_with_the_reason(
    live: Any, plan_changes: dict[str, object], group_id: str, code: Reason
) -> None:
    g = group()
    record = encode(approved(g, **plan_changes).to_record(SIGNER))
    live_group = live(g)
    decision = decide_on(group_id, live_group, AssignmentConfigs(), record, VERIFIER, NOW)
    assert decision.plan_id is None
    assert (decision.fallback_reason or "").startswith(f"{code}: ")
    decision.assignment.validate(live_group, AssignmentConfigs())


def test_a_target_breaking_the_invariants_is_invalid() -> None:
    g = group()
    plan = approved(g)
    doubled = {**plan.target.clients, "c": replace(plan.target.clients["c"], standby=frozenset({TASKS[0]}))}
    bad = replace(plan, target=replace(plan.target, clients=doubled))
    decision = decide_on("orders", g, AssignmentConfigs(), encode(bad.to_record(SIGNER)), VERIFIER, NOW)
    assert (decision.fallback_reason or "").startswith("invalid_target: ")


def test_no_plan_means_kip441_without_a_fallback_reason() -> None:
    decision = decide_on("orders", group(), AssignmentConfigs(), None, VERIFIER, NOW)
    assert decision.plan_id is None and decision.fallback_reason is None


@pytest.mark.parametrize(
    "value",
    [
        b"\x00garbage",
        b"[" * 100_000,
        b'{"a":' * 40 + b"1" + b"}" * 40,
        b'{"schema_version": 1' + b"0" * 5_000 + b"}",
        b'{"signature": "\xff"}',
        b"\xef\xbb\xbf{}",
        b'{"a": NaN}',
        b'{"a": 1.5}',
        b'{"a": 1, "a": 2}',
        b'{"a": "\\ud800"}',
        b" " * (2 << 20),
    ],
)
def test_hostile_records_are_reported_not_raised(value: bytes) -> None:
    decision = decide_on("orders", group(), AssignmentConfigs(), value, VERIFIER, NOW)
    assert (decision.fallback_reason or "").startswith("malformed: ")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400) | JSON_VALUES.map(lambda v: json.dumps(v).encode()))
def test_any_bytes_give_a_decision_never_an_exception(value: bytes) -> None:
    decision = decide_on("orders", group(), AssignmentConfigs(), value, VERIFIER, NOW)
    assert decision.fallback_reason is not None and decision.plan_id is None


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0), st.data())
def test_any_single_byte_change_to_a_signed_record_is_refused(position: int, data: st.DataObject) -> None:
    value = bytearray(encode(approved(group()).to_record(SIGNER)))
    i = position % len(value)
    replacement = data.draw(st.integers(0, 255).filter(lambda b: b != value[i]))
    value[i] = replacement
    decision = decide_on("orders", group(), AssignmentConfigs(), bytes(value), VERIFIER, NOW)
    # A change inside insignificant whitespace leaves the same JSON: honoring it is correct.
    if decision.plan_id is not None:
        assert json.loads(bytes(value)) == approved(group()).to_record(SIGNER)


def test_a_kept_plan_that_no_longer_fits_reports_the_refused_newest_record() -> None:
    record = encode(approved(group()).to_record(SIGNER, 500))
    forged = encode(approved(group()).to_record(FORGER, 700))
    grown = replace(group(), clients=(*group().clients, ClientState("d")))
    decision = decide_on("orders", grown, AssignmentConfigs(), [record, forged], VERIFIER, NOW)
    assert decision.plan_id is None and (decision.fallback_reason or "").startswith("bad_signature: ")
    alone = decide_on("orders", grown, AssignmentConfigs(), [record], VERIFIER, NOW)
    assert (alone.fallback_reason or "").startswith("unknown_instances: ")
