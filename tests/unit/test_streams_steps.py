"""When observe triggers a streams group's next plan step (jobs/pipeline/streams_steps.py)."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assignor import ClientAssignment, GroupAssignment, TaskId
from jobs.live.streams import Decision
from jobs.pipeline.broker_streams import group_read
from jobs.pipeline.streams_steps import (
    GroupNow,
    StepRule,
    decide_step,
    drains_left,
    lag,
    lagging_warmups,
    warmup_copies,
)

T0, T1 = TaskId(0, 0), TaskId(0, 1)
RULE = StepRule(min_interval_ms=30_000, max_wait_ms=600_000)
NOW = 1_800_000_000_000
# The plan moves 0_1's active from a to c; the first step placed a warm-up standby of 0_1 on c.
TARGET = GroupAssignment(
    {
        "a": ClientAssignment(active=frozenset({T0})),
        "c": ClientAssignment(active=frozenset({T1})),
    }
)


def pending(**changes: object) -> GroupNow:
    base = GroupNow(
        plan_id="p1",
        target=TARGET,
        acceptable_recovery_lag=100,
        decision=Decision("plan", "p1", None, True, NOW - 60_000),
        standbys={"a": frozenset(), "c": frozenset({T1})},
        offset_sums={"a": {T0: -2, T1: -2}, "c": {T1: 950}},
        end_offset_sums={T1: 1_000},
        last_trigger_ms=NOW - 65_000,
        now_ms=NOW,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_warmup_caught_up_triggers() -> None:
    verdict = decide_step(pending(), RULE)
    assert verdict.trigger, verdict.reason


def test_warmup_behind_waits_until_the_maximum_wait() -> None:
    behind = pending(offset_sums={"c": {T1: 10}})
    assert not decide_step(behind, RULE).trigger
    late = dataclasses.replace(
        behind, last_trigger_ms=NOW - 600_000, decision=Decision("plan", "p1", None, True, NOW - 590_000)
    )
    assert decide_step(late, RULE).trigger


@pytest.mark.parametrize("offset", [-3, None])
def test_unknown_offsets_are_not_caught_up(offset: int | None) -> None:
    sums = {"c": {T1: offset}} if offset is not None else {"c": {}}
    assert lagging_warmups(pending(offset_sums=sums)) == [("c", T1)]
    assert lagging_warmups(pending(end_offset_sums={})) == [("c", T1)]
    assert not decide_step(pending(end_offset_sums={}), RULE).trigger


def test_no_step_pending_or_another_plan_or_a_fallback() -> None:
    assert not decide_step(pending(decision=Decision("plan", "p1", None, False, NOW - 60_000)), RULE).trigger
    assert not decide_step(pending(decision=Decision("plan", "p0", None, True, NOW - 60_000)), RULE).trigger
    stale = pending(
        decision=Decision("sticky", None, "tasks_changed: x", False, NOW - 700_000), last_trigger_ms=NOW - 700_000
    )
    assert not decide_step(stale, RULE).trigger


def test_unread_plans_are_retried_after_the_wait_only() -> None:
    fell = Decision("sticky", None, "plans_unreadable: starting", False, NOW - 60_000)
    assert not decide_step(pending(decision=fell), RULE).trigger
    assert decide_step(pending(decision=fell, last_trigger_ms=NOW - 600_000), RULE).trigger


def test_a_trigger_not_yet_decided_is_not_repeated_before_the_wait() -> None:
    assert not decide_step(pending(last_trigger_ms=NOW - 40_000), RULE).trigger  # decided before that trigger
    assert decide_step(pending(last_trigger_ms=NOW - 40_000, decision=None), StepRule(0, 30_000)).trigger


def test_warmups_are_the_standbys_the_target_does_not_keep() -> None:
    target = GroupAssignment({"a": ClientAssignment(active=frozenset({T0}), standby=frozenset({T1}))})
    assert warmup_copies(target, {"a": frozenset({T1}), "b": frozenset({T0})}) == {("b", T0)}


def test_lag_mirrors_the_assignor() -> None:
    assert lag(950, 1_000) == 50
    assert lag(1_001, 1_000) == 0  # 4.4 reports offsets as next offsets and ends as last offsets: caught up
    assert lag(1_200, 1_000) == 0  # an end snapshot older than the offsets
    assert lag(-2, 1_000) is None and lag(5, None) is None


def test_rule_bounds() -> None:
    with pytest.raises(ValueError):
        StepRule(min_interval_ms=10, max_wait_ms=5)
    with pytest.raises(ValueError):
        StepRule(min_interval_ms=-1)


times = st.integers(min_value=0, max_value=10**13)


@given(last=st.one_of(st.none(), times), decided=times, now=times, offset=st.integers(-3, 2_000))
def test_never_more_often_than_the_minimum_interval(last: int | None, decided: int, now: int, offset: int) -> None:
    state = pending(
        last_trigger_ms=last,
        decision=Decision("plan", "p1", None, True, decided),
        now_ms=now,
        offset_sums={"c": {T1: offset}},
    )
    verdict = decide_step(state, RULE)
    if verdict.trigger:
        assert now - max(last or 0, decided) >= RULE.min_interval_ms


@given(offset=st.integers(-3, 2_000), end=st.integers(-3, 2_000), acceptable=st.integers(0, 2_000))
def test_caught_up_triggers_within_the_wait_only_when_within_the_acceptable_lag(
    offset: int, end: int, acceptable: int
) -> None:
    state = pending(offset_sums={"c": {T1: offset}}, end_offset_sums={T1: end}, acceptable_recovery_lag=acceptable)
    within = offset >= 0 and end >= 0 and max(end - offset, 0) <= acceptable
    assert decide_step(state, RULE).trigger == within


def test_reader_end_offsets_are_the_largest_known() -> None:
    member = {
        "member_id": "m{}",
        "process_id": "p{}",
        "member_epoch": 3,
        "assignment": {"active": {}, "standby": {"0": [1]}, "warmup": {}},
        "task_offsets": [["0", 1, 5]],
    }
    one = {**member, "member_id": "m1", "process_id": "p1", "task_end_offsets": [["0", 1, 90], ["0", 0, 2**63 - 1]]}
    two = {**member, "member_id": "m2", "process_id": "p2", "task_end_offsets": [["0", 1, 100]]}
    line = {"kind": "group", "group_id": "g", "group_epoch": 4, "members": [one, two], "configs": {}}
    assert group_read(line, NOW).end_offset_sums == {T1: 100}


def test_a_realized_drain_releases_its_group_only_once_every_drained_process_left() -> None:
    drained = {"g": ["b"], "h": ["c", "d"], "unread": ["x"]}
    members = {"g": ["a"], "h": ["a", "d"]}
    assert drains_left(drained, members) == {"g"}  # h still has d; unread was not described: undecided
    assert drains_left({"g": ["b"]}, {"g": []}) == {"g"}  # every member gone (the group is empty)
