"""The typed state report: what the runtime writes and what the plugin writes both read back whole."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assignor import AssignmentConfigs, TaskId
from assignor.protocol.state_report import (
    MAX_CAPACITY,
    RejectReason,
    ReportOrigin,
    ReportRejected,
    StateReport,
    SubtopologyReport,
    _validator,
    check_report,
    schema_violation,
)
from assignor.runtime.group_assignor import MemberView, Subtopology, Topology
from assignor.runtime.protocol import AssignmentInfo
from assignor.runtime.reports import build_state_report

TOPOLOGY = Topology((Subtopology(0, ("in-0",), ("chg-0",)), Subtopology(1, ("clicks",))))


def runtime_report() -> StateReport:
    member = MemberView("p1", capacity=2, client_tags={"zone": "a"}, offset_sums=lambda: {TaskId(0, 1): -2})
    member.info = AssignmentInfo(
        active_tasks={TaskId(0, 1): (("in-0", 1),), TaskId(0, 10): (("in-0", 10),)},
        warmup_tasks={TaskId(0, 2): (("chg-0", 2),)},
        plan_id="plan-9",
    )
    args: dict[str, Any] = {"member_id": "m-1", "client_id": "c", "host": "h", "generation": 4, "reported_at": 17}
    args["configs"] = AssignmentConfigs(num_standby_replicas=1, rack_aware_assignment_tags=("zone",))
    return build_state_report("orders", member, TOPOLOGY, **args)


def test_the_runtime_report_reads_back_equal_and_its_json_is_the_published_object() -> None:
    report = runtime_report()
    assert StateReport.decode(report.key, report.encode()) == report
    assert report.key == "orders/p1" and report.origin is ReportOrigin.PYTHON_RUNTIME
    body = json.loads(report.encode())
    assert body["active_tasks"] == ["0_1", "0_10"] and body["warmup_tasks"] == ["0_2"]
    assert body["task_offset_sums"] == {"0_1": -2} and body["origin"] == "python-runtime"
    assert body["topology"] == {
        "0": {"source_topics": ["in-0"], "changelog_topics": ["chg-0"], "stateful": True},
        "1": {"source_topics": ["clicks"], "changelog_topics": [], "stateful": False},
    }
    assert "task_lags" not in body  # optional fields only when set
    assert body["protocol"] == "classic"
    assert body["settings"] == {
        "acceptable_recovery_lag": 10_000, "max_warmup_replicas": 2, "num_standby_replicas": 1,
        "probing_rebalance_interval_ms": 600_000, "rack_aware_assignment_tags": ["zone"],
    }  # fmt: skip


def plugin_value() -> bytes:
    """A report as StateReports.java writes it: canonical JSON, lags instead of offset sums, no member yet."""
    topology = {
        "0": {"changelog_topics": ["app-store-changelog"], "source_topics": ["app-in"], "stateful": True},
        "1": {"changelog_topics": [], "source_topics": ["app-repartition"], "stateful": False},
    }
    fields = {
        "active_tasks": ["0_0", "1_0"], "capacity": 2, "client_id": "", "client_tags": {"rack": "r1"},
        "fallback_reason": "departed_instances: 1 instance(s) of the plan left", "generation": -1,
        "group_id": "app", "host": "10.0.0.5:8080", "member_id": "", "origin": "kafka-streams", "plan_id": None,
        "process_id": "6f1c2d3e-0000-4000-8000-000000000001", "protocol_version": 1, "reported_at": 1790000000000,
        "schema_version": 1, "standby_tasks": ["0_1"], "task_lags": {"0_0": -2, "0_1": 35, "1_0": -2},
        "task_offset_sums": {}, "task_offset_sums_error": "changelog end offsets not listed within 2000 ms",
        "topology": topology, "warmup_tasks": [],
    }  # fmt: skip
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def test_a_report_the_kafka_streams_plugin_writes_reads_whole() -> None:
    value = plugin_value()
    report = StateReport.decode("app/6f1c2d3e-0000-4000-8000-000000000001", value)
    assert report.origin is ReportOrigin.KAFKA_STREAMS and report.generation == -1 and report.member_id == ""
    assert report.task_lags == {TaskId(0, 0): -2, TaskId(0, 1): 35, TaskId(1, 0): -2}
    assert report.task_offset_sums == {} and report.standby_tasks == (TaskId(0, 1),)
    assert report.task_offset_sums_error == "changelog end offsets not listed within 2000 ms"
    assert report.topology[1] == SubtopologyReport(("app-repartition",), (), False)
    assert report.to_json() == json.loads(value)  # nothing the plugin wrote is lost


def test_fields_a_newer_writer_adds_are_kept_as_read() -> None:
    report = runtime_report()
    value = json.dumps({**report.to_json(), "threads": [{"name": "t1"}]}).encode()
    decoded = StateReport.decode(report.key, value)
    assert decoded.extra == {"threads": [{"name": "t1"}]}
    assert json.loads(decoded.encode()) == json.loads(value)


@pytest.mark.parametrize(
    ("change", "code", "detail"),
    [
        ({"capacity": MAX_CAPACITY + 1}, RejectReason.SCHEMA_VIOLATION, "at capacity"),
        ({"task_offset_sums": {"0_1": -4}}, RejectReason.OFFSET_SUM_BELOW_SENTINEL, "0_1=-4"),
        ({"process_id": "p2"}, RejectReason.CONFLICTING_REPORT, "key 'orders/p1'"),
        ({"standby_tasks": ["0_1"]}, RejectReason.CONFLICTING_REPORT, "held in two roles"),
        ({"origin": "someone-else"}, RejectReason.SCHEMA_VIOLATION, "at origin"),
    ],
)
def test_a_report_breaking_a_rule_is_rejected_with_its_code(
    change: dict[str, Any], code: RejectReason, detail: str
) -> None:
    value = json.dumps({**runtime_report().to_json(), **change}).encode()
    with pytest.raises(ReportRejected) as rejected:
        StateReport.decode("orders/p1", value)
    assert rejected.value.code is code and detail in str(rejected.value) and str(rejected.value).startswith(code)
    assert rejected.value.group_id == "orders"


def test_bytes_that_are_not_a_json_object_are_malformed() -> None:
    for value in (b"{nope", b"\xff\xfe", b"[1, 2]"):
        with pytest.raises(ReportRejected) as rejected:
            check_report("orders/p1", value)
        assert rejected.value.code is RejectReason.MALFORMED_JSON and rejected.value.group_id is None


ids = st.text(st.characters(codec="utf-8"), min_size=1, max_size=30)
tasks = st.builds(TaskId, st.integers(0, 5), st.integers(0, 40))
offsets = st.integers(-3, 2**63 - 1)


@st.composite
def reports(draw: st.DrawFn) -> StateReport:
    held = draw(st.lists(tasks, unique=True, max_size=9))
    split = sorted(draw(st.lists(st.integers(0, len(held)), min_size=2, max_size=2)))
    topics = st.tuples(*[ids] * draw(st.integers(0, 2)))
    return StateReport(
        group_id=draw(ids),
        process_id=draw(ids),
        member_id=draw(st.text(max_size=10)),
        client_id=draw(st.text(max_size=10)),
        host=draw(st.text(max_size=10)),
        capacity=draw(st.integers(1, MAX_CAPACITY)),
        client_tags=draw(st.dictionaries(ids, ids, max_size=3)),
        protocol_version=draw(st.integers(1, 2**31 - 1)),
        generation=draw(st.integers(-(2**63), 2**63 - 1)),
        reported_at=draw(st.integers(0, 2**63 - 1)),
        active_tasks=tuple(held[: split[0]]),
        standby_tasks=tuple(held[split[0] : split[1]]),
        warmup_tasks=tuple(held[split[1] :]),
        task_offset_sums=draw(st.dictionaries(tasks, offsets, max_size=5)),
        topology=draw(st.dictionaries(st.integers(0, 5), st.builds(SubtopologyReport, topics, topics, st.booleans()))),
        plan_id=draw(st.none() | ids),
        fallback_reason=draw(st.none() | st.text(max_size=40)),
        origin=draw(st.none() | st.sampled_from(ReportOrigin)),
        task_lags=draw(st.none() | st.dictionaries(tasks, offsets, max_size=5)),
        task_offset_sums_error=draw(st.none() | st.text(max_size=40)),
    )


@given(reports())
def test_every_report_within_the_bounds_reads_back_equal(report: StateReport) -> None:
    assert StateReport.decode(report.key, report.encode()) == report


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
FIELDS = sorted(json.loads(runtime_report().encode()))


@given(
    field=st.sampled_from(FIELDS),
    value=JSON | st.sampled_from(["0_1", "0_1\n", "01_1", "", "x" * 300, 2**63, -(2**70), 1.0, 1e20]),
    drop=st.booleans(),
)
def test_the_compiled_schema_validator_refuses_everything_jsonschema_refuses(
    field: str, value: object, drop: bool
) -> None:
    """The compiled validator's "valid" is final: it must never pass a record jsonschema refuses."""
    fields = json.loads(runtime_report().encode())
    if drop:
        del fields[field]
    else:
        fields[field] = value
    if list(_validator().iter_errors(fields)):
        assert schema_violation(fields) is not None, f"{field}={value!r} passed only the compiled validator"


def test_a_task_id_with_a_trailing_newline_is_refused_as_json_schema_specifies() -> None:
    """Python's "$" matches before a final newline (so jsonschema passes "0_1\n"); JSON Schema's patterns are
    ECMA-262, where it does not, and the report is rejected with the compiled validator's message."""
    fields = json.loads(runtime_report().encode())
    fields["active_tasks"] = ["0_1\n"]
    assert not list(_validator().iter_errors(fields))
    with pytest.raises(ReportRejected, match=r"at active_tasks/0: .* does not match") as rejected:
        check_report("orders/p1", json.dumps(fields).encode())
    assert rejected.value.code is RejectReason.SCHEMA_VIOLATION
