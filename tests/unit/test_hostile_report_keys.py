"""One state report whose subtopology or task-id key is a hostile number costs that record alone: it is quarantined
with the reason, and every other group of the night is extracted (issue 30, hostile input)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from assignor.task import TaskId
from jobs.pipeline.intake import SCHEMA_VIOLATION, GroupTask, Quarantined, Report, intake_records, parse_report
from tests.support.pipeline_kafka import report, stateful_topology

HUGE = "9" * 5_000  # past Python's 4,300-digit limit of int() from text
BEYOND_INT32 = str(2**31)


def _hostile(change: str) -> dict[str, Any]:
    base = report("g", "p1", active=["0_0"], offset_sums={"0_0": -2}, topology=stateful_topology("g", 1))
    sub = base["topology"]["0"]
    return {
        "topology key of 5000 digits": {**base, "topology": {HUGE: sub}},
        "topology key beyond int32": {**base, "topology": {"0": sub, BEYOND_INT32: sub}},
        "offset-sum key of 5000 digits": {**base, "task_offset_sums": {f"0_{HUGE}": 1}},
        "lag key of 5000 digits": {**base, "task_lags": {f"{HUGE}_0": 1}},
        "active task of 5000 digits": {**base, "active_tasks": [f"0_{HUGE}"]},
        "standby task beyond int32": {**base, "standby_tasks": [f"0_{BEYOND_INT32}"]},
        "warmup task with a subtopology beyond int32": {**base, "warmup_tasks": [f"{BEYOND_INT32}_0"]},
    }[change]


CHANGES = [
    "topology key of 5000 digits",
    "topology key beyond int32",
    "offset-sum key of 5000 digits",
    "lag key of 5000 digits",
    "active task of 5000 digits",
    "standby task beyond int32",
    "warmup task with a subtopology beyond int32",
]


@pytest.mark.parametrize("change", CHANGES)
def test_a_hostile_number_in_a_key_quarantines_the_record_with_a_short_reason(change: str) -> None:
    value = json.dumps(_hostile(change)).encode()
    outcome = parse_report(b"g/p1", value)
    assert isinstance(outcome, Quarantined), outcome
    assert outcome.reason.startswith(f"{SCHEMA_VIOLATION}: at ")
    assert "0..2147483647" in outcome.reason
    assert len(outcome.reason) < 300  # names the value without repeating thousands of digits
    assert outcome.group_id == "g" and outcome.raw == value.decode()


@pytest.mark.parametrize("change", CHANGES)
def test_a_hostile_report_fails_nothing_but_itself(change: str) -> None:
    h = report("h", "p1", active=["0_0"], offset_sums={"0_0": -2}, topology=stateful_topology("h", 1))
    records = {b"g/p1": json.dumps(_hostile(change)).encode(), b"h/p1": json.dumps(h).encode()}
    partitions = {"h-in0": 1, "h-store0-changelog": 1}
    intake = intake_records(records, partitions, captured_at=h["reported_at"], stale_age_ms=1)
    assert [r.key for r, _ in intake.reports] == ["h/p1"]
    assert [(q.key, q.reason.split(":", 1)[0]) for q in intake.quarantine] == [("g/p1", SCHEMA_VIOLATION)]
    assert intake.tasks == [GroupTask("h", "0_0", 0, 0, True)]


def test_the_largest_ids_kafka_allows_are_kept() -> None:
    top = 2**31 - 1
    body = report("g", "p1", active=[f"{top}_{top}"], topology={str(top): stateful_topology("g", 1)["0"]})
    outcome = parse_report(b"g/p1", json.dumps(body).encode())
    assert isinstance(outcome, Report), outcome
    assert outcome.record.active_tasks == (TaskId(top, top),)
    assert set(outcome.record.topology) == {top}


@pytest.mark.parametrize(
    "text",
    [f"0_{HUGE}", f"{HUGE}_0", f"0_{BEYOND_INT32}", f"{BEYOND_INT32}_0", "0_99999999999", "٣_1", "+1_0", "00_1"],
)
def test_task_id_parse_refuses_ids_beyond_kafka_before_converting(text: str) -> None:
    with pytest.raises(ValueError, match=r"0\.\.2147483647") as refused:
        TaskId.parse(text)
    assert len(str(refused.value)) < 200


def test_task_id_parse_takes_every_part_up_to_int32() -> None:
    assert TaskId.parse("2147483647_2147483647") == TaskId(2**31 - 1, 2**31 - 1)
    assert TaskId.parse("0_0") == TaskId(0, 0)


def test_an_offset_sum_below_the_sentinels_under_a_huge_key_gets_a_short_reason() -> None:
    body = report("g", "p1", offset_sums={f"0_{HUGE}": -5}, topology=stateful_topology("g", 1))
    outcome = parse_report(b"g/p1", json.dumps(body).encode())
    assert isinstance(outcome, Quarantined) and outcome.reason.startswith("offset_sum_below_-3: 0_999")
    assert len(outcome.reason) < 500 and outcome.reason.endswith("999=-5")


def test_a_huge_record_key_gets_a_short_reason() -> None:
    body = report("g", "p1", topology=stateful_topology("g", 1))
    outcome = parse_report(b"g/" + b"p" * 100_000, json.dumps(body).encode())
    assert isinstance(outcome, Quarantined) and outcome.reason.startswith("conflicting_report: key 'g/ppp")
    assert len(outcome.reason) < 500 and outcome.reason.endswith("but the report is from 'g/p1'")
