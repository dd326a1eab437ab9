"""Wire formats of the group protocol: versions 1 and 2, KIP-268 version probing, malformed user data."""

from __future__ import annotations

import json

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from assignor import TaskId
from assignor.runtime.protocol import (
    LATEST_VERSION,
    AssignmentInfo,
    ErrorCode,
    NewerVersionError,
    ProtocolError,
    Subscription,
    negotiate_version,
    next_version,
)
from schemas import read_json

SUBSCRIPTION_SCHEMA = read_json("subscription.schema.json")
ASSIGNMENT_SCHEMA = read_json("assignment.schema.json")

task_ids = st.builds(TaskId, st.integers(0, 20), st.integers(0, 200))


@given(
    st.sets(task_ids, max_size=10),
    st.sets(task_ids, max_size=10),
    st.dictionaries(task_ids, st.integers(-3, 10**12), max_size=10),
    st.dictionaries(st.sampled_from(["zone", "rack"]), st.text(min_size=1, max_size=5), max_size=2),
    st.sampled_from([1, 2]),
)
def test_subscription_round_trips_in_each_version(active, standby, sums, tags, version) -> None:  # type: ignore[no-untyped-def]
    original = Subscription("p-1", 3, frozenset(active), frozenset(standby), sums, "h:1", tags, version, 2)
    data = original.encode()
    jsonschema.validate(json.loads(data), SUBSCRIPTION_SCHEMA)
    decoded = Subscription.decode(data)
    expected_tags = tags if version >= 2 else {}
    assert decoded == Subscription(
        "p-1", 3, frozenset(active), frozenset(standby), sums, "h:1", expected_tags, version, 2
    )


def test_version_1_has_no_client_tags_on_the_wire() -> None:
    data = Subscription("p", client_tags={"zone": "a"}, version=1, latest_supported_version=1).encode()
    assert "client_tags" not in json.loads(data)


@given(
    st.dictionaries(task_ids, st.lists(st.tuples(st.text(min_size=1, max_size=8), st.integers(0, 99)), max_size=3)),
    st.one_of(st.none(), st.text(max_size=10)),
    st.one_of(st.none(), st.integers(0, 2**45)),
    st.sampled_from(list(ErrorCode)),
)
def test_assignment_round_trips(tasks, plan_id, probing, code) -> None:  # type: ignore[no-untyped-def]
    parts = {t: tuple(p) for t, p in tasks.items()}
    original = AssignmentInfo(parts, parts, {}, plan_id, None, probing, code)
    data = original.encode()
    jsonschema.validate(json.loads(data), ASSIGNMENT_SCHEMA)
    assert AssignmentInfo.decode(data) == original


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\xff\xfe", "not UTF-8 JSON"),
        (b"[1, 2]", "must be a JSON object"),
        (b'{"version": 0, "latest_supported_version": 1}', "bad versions"),
        (b'{"version": 2, "latest_supported_version": 1}', "bad versions"),
        (
            b'{"version": 1, "latest_supported_version": 1, "process_id": "p", "capacity": 0, "previous_active": [],'
            b' "previous_standby": [], "task_offset_sums": {}, "endpoint": ""}',
            r"capacity must be 1\.\.1024",
        ),
        (
            b'{"version": 1, "latest_supported_version": 1, "process_id": "p", "capacity": 100000000000000000000,'
            b' "previous_active": [], "previous_standby": [], "task_offset_sums": {}, "endpoint": ""}',
            r"integer must be a decimal integer in -9223372036854775808\.\.9223372036854775807",  # refused as read
        ),
        (
            b'{"version": 1, "latest_supported_version": 1, "process_id": "", "capacity": 1, "previous_active": [],'
            b' "previous_standby": [], "task_offset_sums": {}, "endpoint": ""}',
            r"process_id must be 1\.\.249 characters",
        ),
        (
            b'{"version": 1, "latest_supported_version": 1, "process_id": "p", "capacity": 1, "previous_active": ["x"],'
            b' "previous_standby": [], "task_offset_sums": {}, "endpoint": ""}',
            "previous_active: task id",
        ),
        (
            b'{"version": 1, "latest_supported_version": 1, "process_id": "p", "capacity": 1, "previous_active": [],'
            b' "previous_standby": [], "task_offset_sums": {"0_1": -9}, "endpoint": ""}',
            r"task_offset_sums\[0_1\] must be an integer >= -3",
        ),
        (
            b'{"version": 2, "latest_supported_version": 2, "process_id": "p", "capacity": 1, "previous_active": [],'
            b' "previous_standby": [], "task_offset_sums": {}, "endpoint": ""}',
            "client_tags must be dict",
        ),
    ],
)
def test_malformed_subscriptions_are_rejected_with_a_reason(data: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        Subscription.decode(data)


def test_a_newer_version_is_reported_for_probing() -> None:
    data = json.dumps({"version": LATEST_VERSION + 1, "latest_supported_version": LATEST_VERSION + 1}).encode()
    with pytest.raises(NewerVersionError) as caught:
        Subscription.decode(data)
    assert (caught.value.version, caught.value.latest_supported_version) == (LATEST_VERSION + 1, LATEST_VERSION + 1)


def test_mixed_group_speaks_the_oldest_common_version_and_switches_up_when_all_upgraded() -> None:
    mixed = negotiate_version({"a": (1, 1), "b": (2, 2), "c": (1, 2)})
    assert mixed.group_version == 1 and not mixed.probing_members
    upgraded = negotiate_version({"a": (1, 2), "b": (2, 2), "c": (1, 2)})
    assert upgraded.group_version == 2
    # Members that spoke 1 learn from the assignment that 2 is now common, and rejoin speaking it.
    assert next_version(1, AssignmentInfo(version=1, latest_supported_version=2)) == (2, True)
    assert next_version(2, AssignmentInfo(version=2, latest_supported_version=2)) == (2, False)


def test_a_member_newer_than_the_leader_probes_downgrades_and_rejoins() -> None:
    decision = negotiate_version({"old-leader": (1, 1), "new": (2, 2)}, leader_latest=1)
    assert decision.probing_members == {"new"}
    assert decision.group_version == 1
    probe = AssignmentInfo(error_code=ErrorCode.VERSION_PROBING, version=1, latest_supported_version=1)
    assert next_version(2, probe) == (1, True)


def test_bad_assignment_fields_are_rejected() -> None:
    with pytest.raises(ProtocolError, match="error_code"):
        AssignmentInfo.decode(b'{"version": 1, "latest_supported_version": 1, "error_code": 7}')
    with pytest.raises(ProtocolError, match=r"active_tasks\[0_1\]"):
        AssignmentInfo.decode(b'{"version": 1, "latest_supported_version": 1, "active_tasks": {"0_1": [["t"]]}}')
