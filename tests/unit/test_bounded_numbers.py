"""Every integer parsed from outside input is bounded before conversion and refused with the decoder's own typed
error naming the field: user data, signed plans, Kafka Streams' assignment, command-line flags and DAG params."""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest
from airflow.sdk.exceptions import ParamValidationError

from assignor.protocol.bounded import INT32_MAX, INT64_MAX, OutOfBounds, check_int, parse_int, shown
from assignor.protocol.plans import PlanRejected, Reason, Verifier
from assignor.protocol.streams_assignment import decode_assignment
from assignor.protocol.streams_wire import StreamsUserDataError
from assignor.runtime.protocol import AssignmentInfo, ProtocolError, Subscription
from assignor.task import TaskId
from jobs.cli.arguments import PORT, bounded_int, task_id
from jobs.orchestration.params import PLANNING_PARAMS
from jobs.pipeline.history import parse_as_of
from jobs.pipeline.stage import StageInputError
from tests.support.signing import SIGNER
from tests.support.streams_user_data import assignment_bytes
from tests.support.vectors import KEYS, NOW, _plan, _resign

HUGE = "9" * 5_000


@pytest.mark.parametrize("text", [HUGE, "9" * 11, "2147483648", "-1", "+1", "1_000", " 1", "01", "٣", "", "1.0"])
def test_parse_int_refuses_text_outside_the_form_or_range_naming_the_field(text: str) -> None:
    with pytest.raises(OutOfBounds, match=r"^partition .*0\.\.2147483647") as refused:
        parse_int(text, 0, INT32_MAX, "partition")
    assert len(str(refused.value)) < 150


def test_parse_int_takes_the_bounds_themselves() -> None:
    assert parse_int("0", 0, INT32_MAX, "p") == 0 and parse_int("2147483647", 0, INT32_MAX, "p") == INT32_MAX
    assert parse_int(str(-(2**63)), -(2**63), INT64_MAX, "n") == -(2**63)


@pytest.mark.parametrize(
    "value", [True, 1.0, "1", None, 2**31, -1, 10**5000], ids=["bool", "float", "text", "null", "2^31", "-1", "10^5000"]
)
def test_check_int_refuses_non_integers_and_values_beyond_the_range(value: object) -> None:
    with pytest.raises(OutOfBounds, match=r"^capacity ") as refused:
        check_int(value, 0, INT32_MAX, "capacity")
    assert len(str(refused.value)) < 150


def test_shown_never_prints_a_huge_value_in_full() -> None:
    assert shown("x" * 10_000).endswith("(10000 characters)") and len(shown("x" * 10_000)) < 80
    assert shown(10**5000) == f"a {(10**5000).bit_length()}-bit integer"
    assert shown({"k": "v" * 1000}).endswith("characters)")


def _subscription(**changes: Any) -> bytes:
    body = {"version": 2, "latest_supported_version": 2, "process_id": "p", "capacity": 1, "previous_active": [],
            "previous_standby": [], "task_offset_sums": {}, "endpoint": "", "client_tags": {}}  # fmt: skip
    return json.dumps({**body, **changes}).encode()


@pytest.mark.parametrize(
    ("data", "where"),
    [
        (_subscription(task_offset_sums={f"0_{HUGE}": 1}), "task_offset_sums"),
        (_subscription(task_offset_sums={f"{2**31}_0": 1}), "task_offset_sums"),
        (_subscription(previous_active=[f"{HUGE}_0"]), "previous_active"),
        (_subscription(rejoin_epoch=int(HUGE[:4000])), "integer"),
        (_subscription(rejoin_epoch=2**63), "integer"),
        (_subscription(endpoint=0).replace(b'"endpoint": 0', b'"endpoint": ' + b"[" * 5_000 + b"]" * 5_000), "deeply"),
    ],
    ids=["sum key 5000 digits", "sum key beyond int32", "task list", "4000-digit value", "beyond int64", "depth"],
)
def test_subscription_user_data_with_hostile_numbers_is_a_protocol_error(data: bytes, where: str) -> None:
    with pytest.raises(ProtocolError, match=where) as refused:
        Subscription.decode(data)
    assert len(str(refused.value)) < 300


@pytest.mark.parametrize("partition", [-1, 2**31, 2**63, True])
def test_assignment_user_data_refuses_partitions_beyond_kafka(partition: object) -> None:
    body = {"version": 2, "latest_supported_version": 2, "active_tasks": {"0_0": [["in", partition]]}}
    with pytest.raises(ProtocolError, match=r"partition 0\.\.2147483647|integer 9223372036854775808 is outside"):
        AssignmentInfo.decode(json.dumps(body).encode())


def test_a_streams_assignment_with_a_negative_standby_partition_is_refused() -> None:
    data = assignment_bytes(11, [TaskId(0, 0)], {TaskId(0, 1): [("app-store-changelog", -5)]})
    with pytest.raises(StreamsUserDataError, match="negative partition -5"):
        decode_assignment(data)


@pytest.mark.parametrize(
    "edit",
    [
        lambda r: r["move_order"].append(f"0_{HUGE}"),
        lambda r: next(iter(r["target"].values()))["active"].append(f"{HUGE}_1"),
        lambda r: r["target"].update({"p" * 100_000: {"active": [f"0_{2**31}"], "standby": []}}),
    ],
    ids=["move_order", "target task", "long process id"],
)
def test_a_signed_plan_with_a_hostile_task_id_is_malformed_with_a_short_reason(edit: Any) -> None:
    record = _plan().to_record(SIGNER)
    edit(record)
    value = json.dumps(_resign(record)).encode()
    with pytest.raises(PlanRejected) as refused:
        Verifier(KEYS).verify(value, "orders-app", NOW)
    assert refused.value.code is Reason.MALFORMED
    assert "0..2147483647" in str(refused.value) and len(str(refused.value)) < 400


@pytest.mark.parametrize(("kind", "text"), [(PORT, "65536"), (PORT, HUGE), (bounded_int(1, 10), "0"), (task_id, HUGE)])
def test_command_line_numbers_and_task_ids_are_refused_with_the_range(kind: Any, text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError) as refused:
        kind(text)
    assert ".." in str(refused.value) and len(str(refused.value)) < 200


def test_history_as_of_refuses_a_huge_epoch() -> None:
    with pytest.raises(StageInputError, match=r"--as-of epoch milliseconds"):
        parse_as_of(HUGE)
    with pytest.raises(StageInputError):
        parse_as_of("٣٣")  # digits of another script: not epoch milliseconds
    assert parse_as_of("1790000000000") == 1_790_000_000_000


@pytest.mark.parametrize("name", ["acceptable_recovery_lag", "max_warmup_replicas", "num_standby_replicas"])
def test_dag_params_bound_every_integer(name: str) -> None:
    param = PLANNING_PARAMS[name]
    assert param.schema["maximum"] <= INT64_MAX
    with pytest.raises(ParamValidationError, match=r"maximum|greater"):
        param.resolve(2**64)


def test_dag_params_bound_ids_and_the_approval_timeout() -> None:
    with pytest.raises(ParamValidationError, match="long"):
        PLANNING_PARAMS["groups"].resolve(["g" * 250])
    with pytest.raises(ParamValidationError, match=r"maximum|greater"):
        PLANNING_PARAMS["approval_timeout_s"].resolve(1e300)
