"""The streams-groups reader's JSON lines become state reports of streams-protocol groups; every integer is bounded
before conversion, and a bad line, member or group is quarantined with the reason instead of failing extract."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from jobs.pipeline.broker_streams import BROKER_STREAMS, MAX_NESTING, parse_reader_output
from jobs.pipeline.intake import Report, parse_report
from jobs.pipeline.streams_reader import java_client_properties

CAPTURED = 1_795_000_000_000
P1, P2 = "11111111-1111-1111-1111-111111111111", "22222222-2222-2222-2222-222222222222"


def _member(
    member_id: str, process_id: str, active: dict[str, list[int]], standby: dict[str, list[int]]
) -> dict[str, Any]:
    current = {"active": active, "standby": standby, "warmup": {}}
    return {
        "member_id": member_id, "member_epoch": 5, "instance_id": None, "rack_id": "rack-a", "client_id": "c",
        "client_host": "/127.0.0.1", "topology_epoch": 0, "process_id": process_id, "user_endpoint": None,
        "client_tags": {"zone": "z1"}, "task_offsets": [["1", 1, 120]], "task_end_offsets": [["1", 1, 2**63 - 1]],
        "assignment": current, "target_assignment": current, "is_classic": False,
    }  # fmt: skip


def _group() -> dict[str, Any]:
    return {
        "kind": "group", "group_id": "app", "state": "Stable", "group_epoch": 5, "target_assignment_epoch": 5,
        "topology_epoch": 0, "assignor_name": "sticky", "coordinator": "localhost:9092 (id 1)",
        "subtopologies": [
            {"subtopology_id": "0", "source_topics": ["app-input"], "repartition_sink_topics": ["app-r-repartition"],
             "state_changelog_topics": {}, "repartition_source_topics": {}},
            {"subtopology_id": "1", "source_topics": [], "repartition_sink_topics": [],
             "state_changelog_topics": {"app-counts-changelog": 2},
             "repartition_source_topics": {"app-r-repartition": 2}},
        ],
        "members": [
            _member("m1", P1, {"0": [0], "1": [0]}, {"1": [1]}),
            _member("m2", P2, {"0": [1], "1": [1]}, {"1": [0]}),
        ],
        "configs": {"streams.num.standby.replicas": "1", "streams.assignor.name": "sticky"},
        "configs_error": None,
    }  # fmt: skip


def _lines(*objects: Any) -> list[bytes]:
    return [json.dumps(o).encode() for o in objects] + [b'{"kind": "end", "listed": 1, "described": 1}']


def _reports(lines: list[bytes]) -> dict[str, dict[str, Any]]:
    read = parse_reader_output(lines, CAPTURED)
    return {json.loads(v)["process_id"]: json.loads(v) for g in read.groups for _, v in g.reports}


def test_a_described_group_becomes_one_report_per_process_with_tasks_offsets_topology_and_settings() -> None:
    read = parse_reader_output(_lines(_group()), CAPTURED)
    assert read.complete and read.listed == 1 and read.quarantine == ()
    (group,) = read.groups
    assert (group.group_id, group.assignor_name, group.settings.num_standby_replicas) == ("app", "sticky", 1)
    assert group.processes == {"m1": P1, "m2": P2}
    reports = _reports(_lines(_group()))
    one = reports[P1]
    assert (one["origin"], one["protocol"], one["settings"]["num_standby_replicas"]) == (BROKER_STREAMS, "streams", 1)
    assert (one["active_tasks"], one["standby_tasks"], one["warmup_tasks"]) == (["0_0", "1_0"], ["1_1"], [])
    # Stateful tasks only: the active is caught up (-2), the standby has the offset the broker reported.
    assert one["task_offset_sums"] == {"1_0": -2, "1_1": 120}
    assert one["topology"] == {
        "0": {"source_topics": ["app-input"], "changelog_topics": [], "stateful": False},
        "1": {"source_topics": ["app-r-repartition"], "changelog_topics": ["app-counts-changelog"], "stateful": True},
    }
    assert (one["client_tags"], one["rack_id"], one["generation"], one["reported_at"]) == (
        {"zone": "z1"},
        "rack-a",
        5,
        CAPTURED,
    )
    # The reports pass the same checks as the reports topic's.
    for key, value in read.groups[0].reports:
        assert isinstance(parse_report(key, value), Report)


def test_a_standby_without_an_offset_yet_is_unknown() -> None:
    group = _group()
    for m in group["members"]:
        m["task_offsets"] = []
    assert _reports(_lines(group))[P1]["task_offset_sums"] == {"1_0": -2, "1_1": -3}


def _with(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    group = copy.deepcopy(_group())
    target: Any = group
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return group


@pytest.mark.parametrize(
    ("path", "value", "reason"),
    [
        (("members", 0, "member_epoch"), 2**31, "member_epoch 2147483648 is not an integer in"),
        (("members", 0, "task_offsets"), [["1", 1, 2**63]], "offset of 1_1 9223372036854775808 is not an integer"),
        (("members", 0, "task_offsets"), [["1", 1, -4]], "is not an integer in -3.."),
        (("members", 0, "task_offsets"), [["1", 2**31, 5]], "task_offsets partition 2147483648"),
        (("members", 0, "task_offsets"), [["1", 1]], "entry has 2 items, not 3"),
        (("members", 0, "assignment", "active"), {"named-topology": [0]}, "is not a subtopology number"),
        (("members", 0, "assignment", "active"), {"0": [True]}, "partition True is not an integer"),
        (("members", 0, "process_id"), "p" * 250, "process_id is not a non-empty string of at most 249"),
        (("members", 0, "client_tags"), {"zone": 3}, "client tag zone is not a"),
    ],
    ids=["epoch", "offset", "below-sentinel", "partition", "triple", "named", "bool", "process-id", "tag"],
)
def test_a_member_out_of_bounds_is_quarantined_and_the_others_are_reported(
    path: tuple[Any, ...], value: Any, reason: str
) -> None:
    read = parse_reader_output(_lines(_with(path, value)), CAPTURED)
    (group,) = read.groups
    (bad,) = group.quarantine
    assert (bad.source, bad.key, bad.group_id) == (BROKER_STREAMS, "app/m1", "app")
    assert reason in bad.reason and bad.raw is not None
    assert [json.loads(v)["process_id"] for _, v in group.reports] == [P2]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b'{"kind": "group", "group_id": "app", "group_epoch": ' + b"9" * 5000 + b"}", "an integer of 5000 digits"),
        (b'{"kind": "group", "group_id": "app", "group_epoch": 1.5}', "a non-integer number"),
        (b'{"kind": "group", "group_id": "app", "group_epoch": NaN}', "a non-integer number"),
        (b"[" * 100_000 + b"]" * 100_000, "not JSON: RecursionError"),
        (json.dumps({"kind": "group", "group_id": "app", "x": json.loads("[" * 40 + "]" * 40)}).encode(), "nested"),
        (b"\xff\xfe", "not JSON: UnicodeDecodeError"),
        (b'"just a string"', "a JSON str, not an object"),
        (b'{"kind": "surprise"}', "unknown line kind 'surprise'"),
    ],
    ids=["huge-int", "float", "nan", "deep-array", "deep-object", "bytes", "string", "kind"],
)
def test_a_malformed_line_is_quarantined_with_the_reason(line: bytes, reason: str) -> None:
    read = parse_reader_output([line, *_lines(_group())], CAPTURED)
    assert [g.group_id for g in read.groups] == ["app"]  # the good group is still read
    (bad,) = read.quarantine
    assert bad.source == BROKER_STREAMS and reason in bad.reason, bad.reason


def test_a_group_whose_topology_or_configs_break_a_bound_is_quarantined_by_name() -> None:
    bad_topology = _with(("subtopologies", 1, "state_changelog_topics"), {"app-counts-changelog": 2**31})
    bad_configs = _with(("configs",), {"streams.num.standby.replicas": "99999999999"})
    bad_configs["group_id"] = "other"
    read = parse_reader_output(_lines(bad_topology, bad_configs), CAPTURED)
    assert read.groups == ()
    assert {(q.group_id, q.key) for q in read.quarantine} == {("app", "app"), ("other", "other")}
    assert all(q.reason.startswith("malformed_streams_group: ") for q in read.quarantine)


def test_a_group_the_broker_did_not_describe_and_an_incomplete_run_are_said() -> None:
    error = {"kind": "group_error", "group_id": "locked", "error": "GroupAuthorizationException: denied"}
    read = parse_reader_output([json.dumps(error).encode()], CAPTURED)
    assert not read.complete
    (q,) = read.quarantine
    assert (q.group_id, q.reason) == ("locked", "the broker did not describe it: GroupAuthorizationException: denied")


def test_unreadable_configs_leave_the_settings_unknown_with_the_reason() -> None:
    group = _with(("configs",), None)
    group["configs_error"] = "ClusterAuthorizationException: no DescribeConfigs"
    (read,) = parse_reader_output(_lines(group), CAPTURED).groups
    assert read.settings.num_standby_replicas is None and "DescribeConfigs" in (read.settings.error or "")
    assert _reports(_lines(group))[P1]["settings"]["num_standby_replicas"] is None


def test_depth_bound_is_the_contracts() -> None:
    assert MAX_NESTING == 32


def test_librdkafka_security_settings_become_java_client_properties() -> None:
    props, dropped = java_client_properties(
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "rbp",
            "sasl.password": 'p"w',
            "ssl.ca.location": "/etc/ca.pem",
            "socket.keepalive.enable": "true",
        }
    )
    assert props["security.protocol"] == "SASL_SSL" and props["sasl.mechanism"] == "SCRAM-SHA-512"
    assert props["sasl.jaas.config"] == (
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="rbp" password="p\\"w";'
    )
    assert (props["ssl.truststore.type"], props["ssl.truststore.location"]) == ("PEM", "/etc/ca.pem")
    assert dropped == ["socket.keepalive.enable"]
