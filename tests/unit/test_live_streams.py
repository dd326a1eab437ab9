"""What ``status`` makes of a streams-protocol group read from the broker: its processes' tasks, the plan and fallback
reason of our assignor's newest decision (only while the group selects our assignor), the step against the lake's
plan, and an honest next check. Pure: parsed reader lines in, ``GroupDescription``/``GroupStatus`` out."""

from __future__ import annotations

import json
from typing import Any

from jobs.live.status import group_statuses
from jobs.live.streams import Decision, describe_streams_group, group_decision, parse_decision
from jobs.pipeline.broker_streams import BROKER_STREAMS, BrokerStreamsGroup, parse_reader_output
from tests.unit.test_broker_streams import P1, P2, _group, _lines

CAPTURED = 1_795_000_000_000


def _read(**configs: str) -> BrokerStreamsGroup:
    line = _group()
    line["configs"] = {**line["configs"], **configs}
    (group,) = parse_reader_output(_lines(line), CAPTURED).groups
    return group


def _decision(**fields: Any) -> bytes:
    body = {"schema_version": 1, "assignor": "rebalance-planner", "group_id": "app", "process_ids": [P1, P2],
            "members": 2, "decided_at": CAPTURED - 1_000, "outcome": "plan", "plan_id": "plan-7",
            "fallback_reason": None, "followup_needed": False, "warmups": 0, "rejected_record": None}  # fmt: skip
    return json.dumps({**body, **fields}).encode()


def test_a_sticky_group_maps_to_its_processes_tasks_and_names_the_broker_and_its_assignor() -> None:
    group = describe_streams_group(_read(), None)
    assert (group.group_id, group.protocol, group.source) == ("app", "streams", BROKER_STREAMS)
    assert [(i.process_id, i.active, i.standby, i.warmup) for i in group.instances] == [
        (P1, ("0_0", "1_0"), ("1_1",), ()),
        (P2, ("0_1", "1_1"), ("1_0",), ()),
    ]
    assert all(i.reported_at is None and i.member_id in ("m1", "m2") for i in group.instances)
    assert (group.plan_id, group.fallback_reason, group.last_report_at) == (None, None, None)
    (status,) = group_statuses([group], {}, None, CAPTURED)
    assert status.next_check == "broker assigns at the next epoch; assignor: sticky"
    assert (status.members, status.step, status.report_age_ms, status.notes) == (2, "-", None, ())


def test_the_plan_honored_comes_from_our_assignors_decision_and_its_step_from_the_lake() -> None:
    group = _read(**{"streams.assignor.name": "rebalance-planner"})
    decision = group_decision({b"app": _decision(followup_needed=True)}, "app", {P1, P2})
    described = describe_streams_group(group, decision)
    assert described.plan_id == "plan-7" and described.fallback_reason is None
    target = frozenset(
        (p, t, r)
        for p, actives, standbys in ((P1, ("0_0", "1_0"), ("1_1",)), (P2, ("0_1", "1_1"), ("1_0",)))
        for t, r in [*((a, "ACTIVE") for a in actives), *((s, "STANDBY") for s in standbys)]
    )
    first = frozenset((p, t, r) for p, t, r in target if r == "ACTIVE")
    (status,) = group_statuses([described], {}, {"plan-7": [first, target]}, CAPTURED)
    assert status.step == "2/2 (target)"
    assert status.next_check.startswith("broker assigns at the next epoch; assignor: rebalance-planner")
    assert "a step is pending" in status.next_check


def test_a_fallback_is_shown_and_a_decision_from_before_the_group_went_back_to_sticky_honors_nothing() -> None:
    sticky = _decision(outcome="sticky", plan_id=None, fallback_reason="plans_unreadable: not read yet")
    ours = describe_streams_group(_read(**{"streams.assignor.name": "rebalance-planner"}), parse_decision(sticky))
    assert (ours.plan_id, ours.fallback_reason) == (None, "plans_unreadable: not read yet")
    released = describe_streams_group(_read(), parse_decision(_decision()))
    assert released.plan_id is None


def test_decisions_are_found_by_group_or_by_smallest_process_id_and_bad_ones_read_as_none() -> None:
    by_process = {f"process:{P1}".encode(): _decision(group_id=None, decided_at=5)}
    assert group_decision(by_process, "app", {P1, P2}) == Decision("plan", "plan-7", None, False, 5)
    newer = {**by_process, b"app": _decision(decided_at=9, plan_id="plan-8")}
    found = group_decision(newer, "app", {P1, P2})
    assert found is not None and found.plan_id == "plan-8"
    assert group_decision({}, "app", set()) is None
    for bad in (b"not json", b"[1]", _decision(outcome="maybe"), _decision(decided_at=10**30),
                _decision(decided_at=True), _decision(decided_at=-1), b"x" * (2 << 20)):  # fmt: skip
        assert parse_decision(bad) is None, bad[:40]


def test_old_plugin_reports_of_a_group_now_on_the_streams_protocol_are_counted_in_a_note() -> None:
    (status,) = group_statuses([describe_streams_group(_read(), None, superseded_reports=2)], {}, None, CAPTURED)
    (note,) = status.notes
    assert note.startswith("2 old plugin report(s) on the reports topic not shown")
    assert json.loads(json.dumps(status.to_json()))["protocol"] == "streams"
