"""Restored offsets: the state report's field and the Kafka Streams members' own record, bounded on the way in, and
observe's sum of what a group restored while a plan was carried out."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from assignor import TaskId
from assignor.protocol.restored_offsets import RestoredOffsetsReport, TaskRestore
from assignor.protocol.state_report import RejectReason, ReportRejected, StateReport, check_report
from jobs.pipeline.broker_streams import parse_reader_output
from jobs.pipeline.intake import RESTORED_REJECTED, SCHEMA_VIOLATION, Report, parse_records, parse_report, restored_only
from jobs.pipeline.observe import group_members
from jobs.pipeline.observe_streams import group_reports
from jobs.pipeline.restored import RestoredDuring, groups_restored, newest_restores, restored_during
from tests.unit.test_broker_streams import P1, P2
from tests.unit.test_broker_streams import _group as _streams_group
from tests.unit.test_broker_streams import _lines as _reader_lines
from tests.unit.test_state_report import runtime_report

PUBLISHED = 1_790_000_000_000


def _with_restores(report: StateReport, restores: dict[TaskId, TaskRestore] | None, **over: object) -> StateReport:
    return replace(report, restored_offsets=restores, **over)  # type: ignore[arg-type]


def test_a_report_without_the_field_stays_valid_and_means_not_reported() -> None:
    old = runtime_report()
    body = json.loads(old.encode())
    body.pop("restored_offsets", None)
    decoded = StateReport.decode(old.key, json.dumps(body).encode())
    assert decoded.restored_offsets is None


def test_the_runtime_report_carries_its_restores_and_reads_them_back() -> None:
    report = _with_restores(runtime_report(), {TaskId(0, 2): TaskRestore(1_234, PUBLISHED + 5)})
    body = json.loads(report.encode())
    assert body["restored_offsets"] == {"0_2": {"offsets": 1_234, "started_at": PUBLISHED + 5}}
    assert StateReport.decode(report.key, report.encode()) == report


@pytest.mark.parametrize(
    ("restore", "where"),
    [
        ({"offsets": 2**63, "started_at": 1}, "restored_offsets/0_2"),
        ({"offsets": -1, "started_at": 1}, "restored_offsets/0_2"),
        ({"offsets": 10**400, "started_at": 1}, "restored_offsets/0_2"),
        ({"offsets": True, "started_at": 1}, "restored_offsets/0_2"),
        ({"offsets": 1}, "restored_offsets/0_2"),
        ({"offsets": 1, "started_at": 253_402_300_800_000}, "restored_offsets/0_2"),
    ],
)
def test_a_hostile_restored_value_is_refused_naming_where(restore: dict[str, object], where: str) -> None:
    report = runtime_report()
    body = json.loads(report.encode()) | {"restored_offsets": {"0_2": restore}}
    with pytest.raises(ReportRejected) as refused:
        check_report(report.key, json.dumps(body).encode())
    assert refused.value.code is RejectReason.SCHEMA_VIOLATION
    assert where in str(refused.value)


def test_a_hostile_report_goes_to_quarantine_with_its_reason_and_a_good_restored_record_is_read() -> None:
    report = runtime_report()
    hostile = json.dumps(json.loads(report.encode()) | {"restored_offsets": {"0_2": {"offsets": -5, "started_at": 1}}})
    good = RestoredOffsetsReport("orders", "p2", PUBLISHED, {TaskId(0, 1): TaskRestore(10, PUBLISHED)})
    bad_value = b'{"schema_version":1,"group_id":"orders","process_id":"p3","reported_at":1,"restored_offsets":'
    bad_value += b'{"0_1":{"offsets":99999999999999999999,"started_at":1}}}'
    records: dict[bytes, bytes | None] = {
        report.key.encode(): hostile.encode(),
        good.key.encode(): good.encode(),
        b"orders/p3/restored": bad_value,
    }
    reports, intake = parse_records(records)
    assert reports == [] and intake.restored == [good]
    # The state-report count holds state reports only (each kept or quarantined); the other two are counted apart.
    assert (intake.read, intake.restored_read) == (1, 2)
    reasons = sorted(q.reason for q in intake.quarantine)
    assert reasons[0].startswith(f"{RESTORED_REJECTED}: malformed: integer") and "64-bit" in reasons[0]
    assert reasons[1].startswith(f"{SCHEMA_VIOLATION}: at restored_offsets/0_2/offsets")
    # Observe's second read takes the well-formed restored records alone, the same as the first read's.
    assert restored_only(records | {b"orders/p4/restored": None, b"": b"x"}) == intake.restored


def test_only_restores_begun_between_publish_and_realization_count() -> None:
    restores = {
        "p1": {TaskId(0, 1): TaskRestore(100, PUBLISHED - 1), TaskId(0, 2): TaskRestore(40, PUBLISHED)},
        "p2": {TaskId(0, 3): TaskRestore(7, PUBLISHED + 10), TaskId(0, 4): TaskRestore(1_000, PUBLISHED + 99)},
    }
    assert restored_during(["p1", "p2", "p3"], restores, PUBLISHED, PUBLISHED + 50) == RestoredDuring(47, 2, 3)


def test_the_newer_record_of_an_instance_wins_and_a_report_without_the_field_says_nothing() -> None:
    base = runtime_report()
    silent = replace(base, process_id="p2", reported_at=PUBLISHED + 100)  # no restored_offsets: not reported
    own = _with_restores(base, {TaskId(0, 2): TaskRestore(5, PUBLISHED)}, reported_at=PUBLISHED + 10)
    streams_member = RestoredOffsetsReport("orders", "p1", PUBLISHED + 20, {TaskId(0, 2): TaskRestore(8, PUBLISHED)})
    newest = newest_restores([own, silent], [streams_member])
    assert newest == {("orders", "p1"): (PUBLISHED + 20, streams_member.restores)}
    outcome = groups_restored({"plan-1": ("orders", PUBLISHED)}, [own, silent], [streams_member], PUBLISHED + 200)
    assert outcome == {"plan-1": RestoredDuring(offsets=8, reporting=1, members=2)}


def test_a_restored_record_of_an_instance_no_longer_in_the_group_does_not_count() -> None:
    member = _with_restores(runtime_report(), {})
    gone = RestoredOffsetsReport("orders", "left", PUBLISHED, {TaskId(0, 1): TaskRestore(500, PUBLISHED + 1)})
    outcome = groups_restored({"plan-1": ("orders", PUBLISHED)}, [member], [gone], PUBLISHED + 10)
    assert outcome == {"plan-1": RestoredDuring(offsets=0, reporting=1, members=1)}


def test_a_streams_protocol_groups_members_are_the_brokers_and_their_listener_records_join_by_process_id() -> None:
    read = parse_reader_output(_reader_lines(_streams_group()), PUBLISHED)
    described = group_reports(read.groups)  # what observe reads for a streams-protocol group
    old_plugin = replace(runtime_report(), group_id="app", process_id="before-the-switch")  # superseded, still fresh
    old = parse_report(old_plugin.key.encode(), old_plugin.encode())
    assert isinstance(old, Report), old
    members = group_members([old], described, {"app"})
    assert sorted(r.process_id for r in members) == [P1, P2]
    listener = [
        RestoredOffsetsReport("app", P1, PUBLISHED + 30, {TaskId(1, 0): TaskRestore(900, PUBLISHED + 5)}),
        RestoredOffsetsReport("app", P2, PUBLISHED + 30, {}),
    ]
    outcome = groups_restored({"plan-1": ("app", PUBLISHED)}, members, listener, PUBLISHED + 60)
    assert outcome == {"plan-1": RestoredDuring(offsets=900, reporting=2, members=2)}
