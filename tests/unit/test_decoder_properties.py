"""Decoding any input either yields a valid typed record or raises the decoder's own typed rejection, never another
exception; keys (task ids, subtopology ids, group and process ids) are drawn hostile too (issue 30)."""

from __future__ import annotations

import json

from hypothesis import assume, given
from hypothesis import strategies as st

from assignor.protocol.bounded import INT32_MAX, OutOfBounds, parse_int
from assignor.protocol.plans import PlanRejected, Verifier
from assignor.protocol.state_report import MAX_ID_CHARS
from assignor.protocol.streams_assignment import decode_assignment
from assignor.protocol.streams_subscription import decode_subscription
from assignor.protocol.streams_wire import StreamsUserDataError
from assignor.protocol.strict_json import MalformedJson, strict_loads
from assignor.runtime.protocol import AssignmentInfo, ProtocolError, Subscription
from assignor.task import TaskId
from jobs.pipeline.intake import REASONS, Quarantined, Report, parse_report
from tests.support.hostile_strategies import ids, number_texts, reports_with_hostile_keys, task_id_texts
from tests.support.signing import SIGNER
from tests.support.vectors import KEYS, NOW, _plan, _resign

_IN_RANGE = range(INT32_MAX + 1)


def _task_in_range(task: TaskId) -> bool:
    return task.subtopology in _IN_RANGE and task.partition in _IN_RANGE


@given(task_id_texts())
def test_task_id_parse_gives_a_task_within_int32_or_a_value_error(text: str) -> None:
    try:
        task = TaskId.parse(text)
    except ValueError as err:
        assert len(str(err)) < 200
    else:
        assert _task_in_range(task) and str(task) == text  # only the canonical text of a task parses


@given(number_texts())
def test_parse_int_gives_an_integer_within_the_range_or_out_of_bounds(text: str) -> None:
    try:
        value = parse_int(text, 0, INT32_MAX, "n")
    except OutOfBounds as err:
        assert str(err).startswith("n ") and len(str(err)) < 200
    else:
        assert value in _IN_RANGE and str(value) == text.removeprefix("-")  # "-0" is a JSON integer too


@given(reports_with_hostile_keys())
def test_a_report_with_hostile_keys_is_a_typed_report_or_quarantined_with_a_reason(record: tuple[bytes, bytes]) -> None:
    key, value = record
    outcome = parse_report(key, value)
    if isinstance(outcome, Quarantined):
        assert outcome.reason.startswith(REASONS) and len(outcome.reason) < 4_000
    else:
        assert isinstance(outcome, Report)
        typed = outcome.record
        assert all(_task_in_range(t) for t in typed.named_tasks())
        assert all(s in _IN_RANGE for s in typed.topology)
        assert 0 < len(typed.group_id) <= MAX_ID_CHARS and 0 < len(typed.process_id) <= MAX_ID_CHARS


@given(st.binary(max_size=2_000))
def test_any_bytes_are_a_report_or_quarantined(value: bytes) -> None:
    assert isinstance(parse_report(b"g/p", value), Report | Quarantined)


@given(st.binary(max_size=2_000))
def test_any_bytes_decode_to_user_data_or_a_protocol_error(data: bytes) -> None:
    for decode in (Subscription.decode, AssignmentInfo.decode):
        try:
            decode(data)
        except ProtocolError as err:
            assert str(err)


@given(st.dictionaries(task_id_texts(), st.integers(-5, 2**64), max_size=3), ids(), number_texts())
def test_user_data_with_hostile_keys_decodes_or_is_a_protocol_error(sums: dict[str, int], pid: str, n: str) -> None:
    body = {"version": 1, "latest_supported_version": 1, "process_id": pid, "capacity": 1, "previous_active": [],
            "previous_standby": [], "task_offset_sums": sums, "endpoint": ""}  # fmt: skip
    text = json.dumps(body)
    for data in (text.encode("utf-8", "surrogatepass"), text.replace('"capacity": 1', f'"capacity": {n}').encode()):
        try:
            subscription = Subscription.decode(data)
        except ProtocolError as err:
            assert str(err)
        else:
            assert all(_task_in_range(t) for t in subscription.task_offset_sums)


@given(st.binary(max_size=2_000))
def test_any_bytes_decode_to_streams_user_data_or_its_error(data: bytes) -> None:
    for decode in (decode_subscription, decode_assignment):
        try:
            decode(data)
        except StreamsUserDataError as err:
            assert err.reason


@given(st.binary(max_size=2_000))
def test_any_bytes_are_strict_json_or_malformed(data: bytes) -> None:
    try:
        strict_loads(data)
    except MalformedJson as err:
        assert str(err)


@given(st.lists(task_id_texts(), max_size=3), ids())
def test_a_signed_plan_with_hostile_task_ids_and_process_ids_verifies_or_is_rejected(
    tasks: list[str], pid: str
) -> None:
    assume(all(not 0xD800 <= ord(c) <= 0xDFFF for c in pid + "".join(tasks)))  # no UTF-8 form: nothing to sign
    record = _plan().to_record(SIGNER)
    record["move_order"] = tasks
    record["target"][pid] = {"active": tasks, "standby": []}
    value = json.dumps(_resign(record)).encode("utf-8", "surrogatepass")
    try:
        plan = Verifier(KEYS).verify(value, "orders-app", NOW)
    except PlanRejected as rejected:
        assert len(str(rejected)) < 1_000
    else:
        assert all(_task_in_range(t) for t in plan.move_order)
