"""The public types: task ids, settings, bad group input and assignment validation (V1..V4)."""

from __future__ import annotations

import pytest

from assignor import (
    LATEST_OFFSET,
    UNKNOWN_OFFSET_SUM,
    AssignmentConfigs,
    AssignmentError,
    ClientAssignment,
    ClientState,
    GroupAssignment,
    GroupState,
    InvalidGroupState,
    Role,
    TaskId,
)

T0, T1, T2 = TaskId(0, 0), TaskId(0, 1), TaskId(1, 0)


def test_task_id_parses_prints_and_orders_by_subtopology_then_partition() -> None:
    assert TaskId.parse("0_3") == TaskId(0, 3)
    assert str(TaskId(12, 7)) == "12_7"
    assert sorted([TaskId(1, 0), TaskId(0, 10), TaskId(0, 2)]) == [TaskId(0, 2), TaskId(0, 10), TaskId(1, 0)]
    assert len({TaskId(0, 1), TaskId.parse("0_1")}) == 1


@pytest.mark.parametrize("text", ["", "0", "0_", "_1", "a_1", "0_1_2", "-1_0", " 0_1", "01_1", "0_3 "])
def test_task_id_parse_rejects_anything_else(text: str) -> None:
    with pytest.raises(ValueError, match="task id"):
        TaskId.parse(text)


def test_sentinels_match_kafka() -> None:
    assert (LATEST_OFFSET, UNKNOWN_OFFSET_SUM) == (-2, -3)


def test_configs_default_to_kafka_streams_values() -> None:
    configs = AssignmentConfigs()
    assert configs.acceptable_recovery_lag == 10_000
    assert configs.max_warmup_replicas == 2
    assert configs.num_standby_replicas == 0
    assert configs.probing_rebalance_interval_ms == 600_000
    assert configs.rack_aware_assignment_tags == ()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("acceptable_recovery_lag", -1),
        ("max_warmup_replicas", 0),
        ("num_standby_replicas", -1),
        ("probing_rebalance_interval_ms", 999),
        ("max_warmup_replicas", 1.5),
        ("max_warmup_replicas", True),
    ],
)
def test_configs_reject_out_of_range_values_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        AssignmentConfigs(**{field: value})  # type: ignore[arg-type]


def test_configs_reject_a_bare_string_as_tags() -> None:
    with pytest.raises(ValueError, match="rack_aware_assignment_tags"):
        AssignmentConfigs(rack_aware_assignment_tags="zone")  # type: ignore[arg-type]


def _group(*clients: ClientState, stateful: frozenset[TaskId] = frozenset({T0, T1})) -> GroupState:
    return GroupState(list(clients), stateful, frozenset({T2}))


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: GroupState([], frozenset({T0})), "at least one client"),
        (lambda: _group(ClientState("a"), ClientState("a")), "duplicate process_id 'a'"),
        (lambda: GroupState([ClientState("a")], frozenset({T0}), frozenset({T0})), "both stateful and stateless: 0_0"),
        (
            lambda: _group(ClientState("a", previous_active=frozenset({TaskId(9, 9)}))),
            "previous_active holds tasks not in the group: 9_9",
        ),
        (
            lambda: _group(ClientState("a", previous_standby=frozenset({TaskId(5, 1)}))),
            "previous_standby holds tasks not in the group: 5_1",
        ),
        (lambda: ClientState("a", capacity=0), "capacity must be an integer >= 1, got 0"),
        (lambda: ClientState("a", capacity=-2), "capacity must be an integer >= 1, got -2"),
        (lambda: ClientState("a", task_offset_sums={T0: -4}), r"task_offset_sums\[0_0\] must be an integer >= -3"),
        (lambda: ClientState("a", task_offset_sums={"0_0": 5}), "keys must be TaskId"),  # type: ignore[dict-item]
        (lambda: ClientState(""), "process_id must be a non-empty string"),
        (lambda: ClientState("a", previous_active=frozenset({"0_0"})), "must hold TaskId"),  # type: ignore[arg-type]
        (lambda: ClientState("a", client_tags={"zone": 1}), "client_tags must map str to str"),  # type: ignore[dict-item]
        (
            lambda: GroupState([ClientState("a")], frozenset({T0}), changelog_end_offset_sums={T0: -1}),
            r"changelog_end_offset_sums\[0_0\] must be an integer >= 0",
        ),
        (lambda: GroupState("ab", frozenset({T0})), "sequence of ClientState"),  # type: ignore[arg-type]
    ],
)
def test_bad_group_state_is_rejected_with_a_message_naming_it(build: object, message: str) -> None:
    with pytest.raises(InvalidGroupState, match=message):
        build()  # type: ignore[operator]


def test_invalid_group_state_is_a_value_error() -> None:
    assert issubclass(InvalidGroupState, ValueError)


def test_inputs_are_frozen_copies() -> None:
    sums = {T0: 5}
    client = ClientState("a", task_offset_sums=sums)
    sums[T0] = 7
    assert client.task_offset_sums[T0] == 5
    with pytest.raises(TypeError):
        client.task_offset_sums[T0] = 1  # type: ignore[index]


def _valid() -> tuple[GroupState, AssignmentConfigs, dict[str, ClientAssignment]]:
    group = GroupState(
        [ClientState("a", task_offset_sums={T0: LATEST_OFFSET}), ClientState("b"), ClientState("c")],
        frozenset({T0, T1}),
        frozenset({T2}),
        {T0: 100_000, T1: 100_000},
    )
    configs = AssignmentConfigs(num_standby_replicas=1, max_warmup_replicas=1)
    clients = {
        "a": ClientAssignment(active=frozenset({T0}), standby=frozenset({T1})),
        "b": ClientAssignment(active=frozenset({T1}), standby=frozenset({T0})),
        "c": ClientAssignment(active=frozenset({T2})),
    }
    return group, configs, clients


def test_validate_accepts_a_valid_assignment() -> None:
    group, configs, clients = _valid()
    GroupAssignment(clients).validate(group, configs)


@pytest.mark.parametrize(
    ("change", "invariant"),
    [
        (lambda c: c.pop("c"), "V1: clients missing"),
        (lambda c: c.update(z=ClientAssignment()), "V1: unknown clients"),
        (lambda c: c.update(c=ClientAssignment()), "V1: task 1_0 is active on 0 clients"),
        (lambda c: c.update(c=ClientAssignment(active=frozenset({T2, T0}))), "V1: task 0_0 is active on 2"),
        (lambda c: c.update(c=ClientAssignment(active=frozenset({T2, TaskId(7, 0)}))), "V1: client 'c' holds unknown"),
        (
            lambda c: c.update(a=ClientAssignment(active=frozenset({T0}), standby=frozenset({T0, T1}))),
            "V2: client 'a' holds",
        ),
        (lambda c: c.update(c=ClientAssignment(active=frozenset({T2}), warmup=frozenset({T2}))), "V2"),
        (lambda c: c.update(a=ClientAssignment(active=frozenset({T0}), standby=frozenset({T1, T2}))), "V3"),
        (lambda c: c.update(c=ClientAssignment(active=frozenset({T2}), standby=frozenset({T1}))), "V4: task 0_1 has 2"),
        (
            lambda c: c.update(c=ClientAssignment(active=frozenset({T2}), warmup=frozenset({T0, T1}))),
            "V4: 2 warmups exceed max_warmup_replicas=1",
        ),
        (
            lambda c: c.update(b=ClientAssignment(active=frozenset({T1}), standby=frozenset(), warmup=frozenset({T0}))),
            "V4: task 0_0 has 0 standbys",
        ),
    ],
)
def test_validate_names_the_broken_invariant(change: object, invariant: str) -> None:
    group, configs, clients = _valid()
    change(clients)  # type: ignore[operator]
    with pytest.raises(AssignmentError, match=invariant):
        GroupAssignment(clients).validate(group, configs)


def test_validate_rejects_a_warmup_on_a_caught_up_client() -> None:
    group, configs, clients = _valid()
    # 'a' runs 0_0 (LATEST_OFFSET): a warmup of 0_0 there would be pointless.
    clients["a"] = ClientAssignment(active=frozenset({T1}), warmup=frozenset({T0}))
    clients["b"] = ClientAssignment(active=frozenset({T0}), standby=frozenset({T1}))
    clients["c"] = ClientAssignment(active=frozenset({T2}), standby=frozenset({T0}))
    with pytest.raises(AssignmentError, match="V4: warmup of 0_0 on client 'a', which is already caught up"):
        GroupAssignment(clients).validate(group, configs)


def test_assignment_equality_ignores_client_order_and_counts_roles() -> None:
    one = GroupAssignment(
        {"b": ClientAssignment(active=frozenset({T1})), "a": ClientAssignment(warmup=frozenset({T0}))}
    )
    two = GroupAssignment(
        {"a": ClientAssignment(warmup=frozenset({T0})), "b": ClientAssignment(active=frozenset({T1}))}
    )
    assert one == two
    assert list(one.clients) == ["a", "b"]
    assert one.count(Role.WARMUP) == 1
    assert one.active_owners() == {T1: "b"}
