"""Lag semantics identical to Kafka Streams, and the sparse index agreeing with the dense computation."""

from __future__ import annotations

import random

import pytest
from hypothesis import given

from assignor import (
    LATEST_OFFSET,
    UNKNOWN_OFFSET_SUM,
    AssignmentConfigs,
    ClientState,
    GroupState,
    TaskId,
    assign_high_availability,
    compute_lags,
)
from assignor.catch_up import catch_up_fully
from assignor.lags import LagIndex, lag_is_caught_up
from tests.support.strategies import Case, cases

T = TaskId(0, 0)


@pytest.mark.parametrize(
    ("offset_sum", "end", "lag"),
    [
        (LATEST_OFFSET, 500, LATEST_OFFSET),  # running active
        (UNKNOWN_OFFSET_SUM, 500, UNKNOWN_OFFSET_SUM),  # state exists, offsets unknown
        (None, 500, 500),  # no state: the whole changelog
        (700, 500, 500),  # ahead of the log: corrupt, restore from scratch
        (500, 500, 0),
        (120, 500, 380),
        (0, 0, 0),
        (-1, 10, 11),  # not a sentinel: plain arithmetic
    ],
)
def test_compute_lags_follows_kafka(offset_sum: int | None, end: int, lag: int) -> None:
    sums = {} if offset_sum is None else {T: offset_sum}
    group = GroupState([ClientState("a", task_offset_sums=sums)], frozenset({T}), changelog_end_offset_sums={T: end})
    assert compute_lags(group) == {"a": {T: lag}}


def test_missing_end_offset_counts_as_zero_and_stateless_tasks_have_no_lag() -> None:
    group = GroupState([ClientState("a"), ClientState("b")], frozenset({T}), frozenset({TaskId(1, 0)}))
    assert compute_lags(group) == {"a": {T: 0}, "b": {T: 0}}


@pytest.mark.parametrize(
    ("lag", "caught_up"),
    [(LATEST_OFFSET, True), (UNKNOWN_OFFSET_SUM, False), (0, True), (10_000, True), (10_001, False)],
)
def test_caught_up_means_running_or_within_acceptable_lag(lag: int, caught_up: bool) -> None:
    assert lag_is_caught_up(lag, 10_000) is caught_up


@given(cases(max_clients=8, max_tasks=40))
def test_sparse_index_agrees_with_compute_lags(case: Case) -> None:
    dense = compute_lags(case.group)
    index = LagIndex.of(case.group, case.configs)
    acceptable = case.configs.acceptable_recovery_lag
    for task in sorted(case.group.stateful_tasks):
        expected_caught_up = [p for p in sorted(dense) if lag_is_caught_up(dense[p][task], acceptable)]
        assert list(index.caught_up_clients(task)) == expected_caught_up
        assert index.best_rank(task) == min(index.rank(p, task) for p in dense)
        for pid, lags in dense.items():
            assert index.lag(pid, task) == lags[task]
            assert index.caught_up(pid, task) is (pid in expected_caught_up)


def test_index_of_a_big_sparse_group_stores_only_reports() -> None:
    rng = random.Random(1)
    tasks = [TaskId(0, p) for p in range(500)]
    clients = [ClientState(f"c{i}", task_offset_sums={rng.choice(tasks): LATEST_OFFSET}) for i in range(50)]
    group = GroupState(clients, frozenset(tasks), changelog_end_offset_sums=dict.fromkeys(tasks, 10**6))
    index = LagIndex.of(group, AssignmentConfigs())
    assert sum(len(v) for v in index.reported.values()) <= 50


@given(cases(max_clients=8, max_tasks=40))
def test_index_after_full_catch_up_equals_reindexing_the_caught_up_group(case: Case) -> None:
    group, configs = case.group, case.configs
    lags = LagIndex.of(group, configs)
    for _ in range(3):  # a schedule's first steps: KIP-441's assignment of each state in turn
        assignment = assign_high_availability(group, configs)
        group, lags = catch_up_fully(group, assignment), lags.after_catch_up(assignment, group.stateful_tasks)
        assert lags == LagIndex.of(group, configs)
