"""Kafka Streams' SubscriptionInfo and AssignmentInfo user data: every version decodes to what its bytes say;
truncated, mutated or random bytes decode or raise StreamsUserDataError, never anything else."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assignor.protocol.streams_assignment import decode_assignment
from assignor.protocol.streams_subscription import (
    UNKNOWN_VERSION,
    StreamsSubscription,
    StreamsUserDataError,
    decode_subscription,
)
from assignor.task import LATEST_OFFSET, UNKNOWN_OFFSET_SUM, TaskId
from tests.support.streams_user_data import assignment_bytes, i32, subscription_bytes

PROCESS = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")
SUMS = {TaskId(0, 0): LATEST_OFFSET, TaskId(0, 1): UNKNOWN_OFFSET_SUM, TaskId(1, 3): 12_345, TaskId(2, 0): 2**40}


@pytest.mark.parametrize("version", [7, 8, 9, 10, 11])
def test_offset_sum_versions_keep_sums_and_sentinels(version: int) -> None:
    data = subscription_bytes(version, PROCESS, endpoint="app-1:8080", offset_sums=SUMS, unique_field=-7, tags={})
    decoded = decode_subscription(data)
    assert decoded.version == version
    assert decoded.latest_supported_version == 11
    assert decoded.process_id == str(PROCESS)
    assert decoded.user_endpoint == "app-1:8080"
    assert dict(decoded.task_offset_sums) == SUMS
    assert decoded.previous_active == decoded.previous_standby == frozenset()
    assert decoded.unique_field == (-7 if version >= 8 else None)
    assert decoded.error_code == (0 if version >= 9 else None)


def test_version_11_carries_client_tags_and_error_code() -> None:
    data = subscription_bytes(11, PROCESS, offset_sums=SUMS, error_code=3, tags={"zone": "eu-1a", "rack": "r7"})
    decoded = decode_subscription(data)
    assert dict(decoded.client_tags) == {"zone": "eu-1a", "rack": "r7"}
    assert decoded.error_code == 3
    assert decoded.user_endpoint is None  # empty application.server reads as unset, as in Kafka


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5, 6])
def test_old_versions_list_previous_tasks_instead_of_offset_sums(version: int) -> None:
    active, standby = [TaskId(0, 1), TaskId(1, 0)], [TaskId(0, 2)]
    data = subscription_bytes(version, PROCESS, latest=6, previous_active=active, previous_standby=standby)
    decoded = decode_subscription(data)
    assert decoded.previous_active == frozenset(active)
    assert decoded.previous_standby == frozenset(standby)
    assert dict(decoded.task_offset_sums) == {}
    assert dict(decoded.offset_sums()) == {TaskId(0, 1): -2, TaskId(1, 0): -2, TaskId(0, 2): -3}
    assert decoded.latest_supported_version == (6 if version >= 3 else UNKNOWN_VERSION)


def test_bytes_after_the_last_field_are_ignored_as_kafka_does() -> None:
    data = subscription_bytes(11, PROCESS, offset_sums=SUMS)
    assert decode_subscription(data + b"\x00\x01") == decode_subscription(data)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "truncated in version"),
        (i32(0) + bytes(20), "version 0 is not"),
        (i32(12) + i32(12), "newer than the newest read here"),
        (i32(11) + i32(10) + PROCESS.bytes, "latest supported version 10 is below"),
        (i32(11) + i32(11) + PROCESS.bytes[:9], "truncated in processId"),
        (i32(11) + i32(11) + PROCESS.bytes + i32(-1), "userEndPoint is null"),
        (i32(11) + i32(11) + PROCESS.bytes + i32(0) + i32(2**30), "1073741824 element(s) claimed"),
        (i32(11) + i32(11) + PROCESS.bytes + i32(0) + i32(-5), "negative count"),
        (i32(10) + i32(11) + PROCESS.bytes + i32(0) + i32(1) + i32(-1) + i32(0) + bytes(10), "negative task id"),
        (i32(2) + PROCESS.bytes + i32(0) + i32(0) + i32(2) + b"\xff\xfe", "userEndPoint is not UTF-8"),
    ],
)
def test_malformed_subscriptions_say_why(data: bytes, reason: str) -> None:
    with pytest.raises(StreamsUserDataError, match="Kafka Streams subscription") as caught:
        decode_subscription(data)
    assert reason in caught.value.reason


def test_every_truncation_of_a_valid_subscription_is_refused() -> None:
    data = subscription_bytes(11, PROCESS, endpoint="h:1", offset_sums=SUMS, tags={"zone": "a"})
    for cut in range(len(data)):
        with pytest.raises(StreamsUserDataError, match="truncated"):
            decode_subscription(data[:cut])


def test_duplicate_task_and_named_topology_are_refused() -> None:
    twice = subscription_bytes(9, PROCESS, offset_sums={TaskId(0, 0): 5})
    # v7-9 nest sums per subtopology: repeat the one subtopology entry by hand.
    head, entry = twice[: 4 + 4 + 16 + 4], twice[4 + 4 + 16 + 4 + 4 : -5]
    with pytest.raises(StreamsUserDataError, match="twice"):
        decode_subscription(head + i32(2) + entry + entry + twice[-5:])
    named = subscription_bytes(11, PROCESS, offset_sums={TaskId(0, 0): 5}, named_topology="orders")
    with pytest.raises(StreamsUserDataError, match="named topology 'orders'"):
        decode_subscription(named)


@pytest.mark.parametrize("version", range(1, 12))
def test_assignment_names_active_and_standby_tasks_in_every_version(version: int) -> None:
    actives = [TaskId(0, 1), TaskId(1, 1), TaskId(1, 1)]  # a task with two source partitions appears twice
    standbys = {TaskId(1, 0): [("app-store-changelog", 0)]}
    hosts = {"app-1:8080": [("in", 1), ("app-rep-repartition", 1)]}
    data = assignment_bytes(version, actives, standbys, hosts=hosts, error_code=0, next_rebalance_ms=99)
    decoded = decode_assignment(data)
    assert decoded.active_tasks == tuple(actives)
    assert dict(decoded.standby_tasks) == {TaskId(1, 0): frozenset({("app-store-changelog", 0)})}
    assert decoded.next_rebalance_ms == (99 if version >= 7 else None)


def test_every_truncation_of_a_valid_assignment_is_refused() -> None:
    data = assignment_bytes(11, [TaskId(0, 0)], {TaskId(1, 0): [("c", 0)]}, hosts={"h:1": [("in", 0)]})
    for cut in range(len(data)):
        with pytest.raises(StreamsUserDataError, match="truncated"):
            decode_assignment(data[:cut])


def _outcome(decode: Callable[[bytes], object], data: bytes) -> None:
    with contextlib.suppress(StreamsUserDataError):  # the one error allowed; anything else fails the test
        decode(data)


@given(st.binary(max_size=300))
def test_random_bytes_decode_or_raise_the_typed_error(data: bytes) -> None:
    _outcome(decode_subscription, data)
    _outcome(decode_assignment, data)
    _outcome(decode_subscription, i32(11) + data)
    _outcome(decode_assignment, i32(11) + data)


_VALID = [
    subscription_bytes(v, PROCESS, endpoint="h:9", offset_sums=SUMS, tags={"zone": "z"}, previous_active=[TaskId(0, 0)])
    for v in range(1, 12)
]
_VALID_ASSIGNMENTS = [
    assignment_bytes(v, [TaskId(0, 0)], {TaskId(1, 0): [("c", 0)]}, hosts={"h:1": [("in", 0)]}) for v in range(1, 12)
]


@given(st.integers(0, 10), st.data())
def test_mutated_valid_bytes_decode_or_raise_the_typed_error(index: int, data: st.DataObject) -> None:
    for original, decode in ((_VALID[index], decode_subscription), (_VALID_ASSIGNMENTS[index], decode_assignment)):
        mutated = bytearray(original)
        for _ in range(data.draw(st.integers(1, 4))):
            at = data.draw(st.integers(0, len(mutated) - 1))
            mutated[at] = data.draw(st.integers(0, 255))
        cut = data.draw(st.integers(0, len(mutated)))
        _outcome(decode, bytes(mutated[:cut]))
        _outcome(decode, bytes(mutated))


def test_decoded_value_is_frozen() -> None:
    decoded = decode_subscription(subscription_bytes(11, PROCESS, offset_sums=SUMS))
    assert isinstance(decoded, StreamsSubscription)
    with pytest.raises(AttributeError):
        decoded.version = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        decoded.task_offset_sums[TaskId(9, 9)] = 1  # type: ignore[index]
