"""The baseline's movement rules on small hand-made groups: swaps, warmups, budget, fallbacks, stateless."""

from __future__ import annotations

from assignor import (
    LATEST_OFFSET,
    UNKNOWN_OFFSET_SUM,
    AssignmentConfigs,
    ClientState,
    GroupAssignment,
    GroupState,
    TaskId,
    assign_high_availability,
)

END = 1_000_000
T = [TaskId(0, p) for p in range(8)]


def group(clients: list[ClientState], n_tasks: int, stateless: int = 0) -> GroupState:
    stateful = frozenset(T[:n_tasks])
    return GroupState(
        clients,
        stateful,
        frozenset(TaskId(9, p) for p in range(stateless)),
        dict.fromkeys(stateful, END),
    )


def active(assignment: GroupAssignment, pid: str) -> set[str]:
    return {str(t) for t in assignment.clients[pid].active}


def test_a_task_stays_on_its_caught_up_owner_and_the_chosen_client_warms_up() -> None:
    # Round-robin would give 0_1 to 'b', which has no state: 'a' keeps it and 'b' warms up.
    g = group([ClientState("a", task_offset_sums={T[0]: LATEST_OFFSET, T[1]: LATEST_OFFSET}), ClientState("b")], 2)
    result = assign_high_availability(g, AssignmentConfigs())
    assert active(result, "a") == {"0_0", "0_1"}
    assert result.clients["b"].warmup == {T[1]}
    assert result.probing_rebalance_needed


def test_a_caught_up_standby_is_swapped_in_without_spending_warmup_budget() -> None:
    # a runs 0_1, b runs 0_0; round-robin deals them the other way round and puts each task's standby on
    # its current owner. Both moves become swaps: owners keep their actives, the chosen ones get standbys.
    a = ClientState("a", task_offset_sums={T[1]: LATEST_OFFSET})
    b = ClientState("b", task_offset_sums={T[0]: LATEST_OFFSET})
    result = assign_high_availability(group([a, b], 2), AssignmentConfigs(num_standby_replicas=1))
    assert active(result, "a") == {"0_1"} and active(result, "b") == {"0_0"}
    assert result.clients["a"].standby == {T[0]} and result.clients["b"].standby == {T[1]}
    assert all(not ca.warmup for ca in result.clients.values())
    assert result.probing_rebalance_needed


def test_a_caught_up_copy_takes_its_dealt_active_without_probing() -> None:
    a = ClientState("a", task_offset_sums={T[0]: LATEST_OFFSET, T[1]: LATEST_OFFSET})
    b = ClientState("b", task_offset_sums={T[1]: END - 3})  # an in-sync copy of 0_1 on 'b'
    g = group([a, b], 2)
    result = assign_high_availability(g, AssignmentConfigs(num_standby_replicas=1))
    # 'b' is caught up on 0_1: it simply becomes its active, no warmup and no probing needed.
    assert active(result, "b") == {"0_1"}
    assert not result.probing_rebalance_needed
    assert result.clients["a"].standby == {T[1]}


def test_warmup_budget_is_shared_and_moves_beyond_it_wait_on_caught_up_clients() -> None:
    a = ClientState("a", task_offset_sums=dict.fromkeys(T[:6], LATEST_OFFSET))
    g = group([a, ClientState("b"), ClientState("c")], 6)
    result = assign_high_availability(g, AssignmentConfigs(max_warmup_replicas=2))
    assert active(result, "a") == {str(t) for t in T[:6]}  # nobody else is caught up: 'a' keeps all
    assert sum(len(ca.warmup) for ca in result.clients.values()) == 2
    assert result.probing_rebalance_needed


def test_tasks_with_the_fewest_caught_up_clients_get_the_warmups_first() -> None:
    # Dealt: 0_1 -> b and 0_3 -> d, neither caught up. 0_1 has two caught-up clients (a runs it, c has an
    # in-sync copy), 0_3 only one: 0_3 gets the single warmup although 0_1 sorts first.
    a = ClientState("a", task_offset_sums=dict.fromkeys(T[:4], LATEST_OFFSET))
    c = ClientState("c", task_offset_sums={T[1]: END, T[2]: END})
    g = group([a, ClientState("b"), c, ClientState("d")], 4)
    result = assign_high_availability(g, AssignmentConfigs(max_warmup_replicas=1))
    warmups = {(p, t) for p, ca in result.clients.items() for t in ca.warmup}
    assert warmups == {("d", T[3])}


def test_without_caught_up_clients_the_most_caught_up_one_gets_the_active() -> None:
    a = ClientState("a", task_offset_sums={T[0]: END - 400_000, T[1]: END - 900_000})
    b = ClientState("b", task_offset_sums={T[0]: END - 800_000, T[1]: END - 100_000})
    result = assign_high_availability(group([a, b], 2), AssignmentConfigs())
    assert active(result, "a") == {"0_0"}
    assert active(result, "b") == {"0_1"}
    assert not result.probing_rebalance_needed


def test_most_caught_up_fallback_moves_off_a_more_lagging_chosen_client() -> None:
    a = ClientState("a", task_offset_sums={T[0]: END - 900_000, T[1]: END - 900_000})
    b = ClientState("b", task_offset_sums={T[1]: END - 50_000})
    result = assign_high_availability(group([a, b], 2), AssignmentConfigs())
    # Round-robin puts 0_1 on 'b' (most caught up: fine) and 0_0 on 'a' (only 'a' has state: fine).
    assert active(result, "a") == {"0_0"} and active(result, "b") == {"0_1"}
    reversed_lags = group(
        [ClientState("a", task_offset_sums={T[1]: END - 10_001}), ClientState("b", task_offset_sums={T[1]: 5})],
        2,
    )
    result = assign_high_availability(reversed_lags, AssignmentConfigs())
    assert T[1] in result.clients["a"].active and result.clients["b"].warmup == {T[1]}


def test_an_unknown_offset_sum_never_keeps_an_active_while_another_client_is_caught_up() -> None:
    # Kafka would leave 0_1 on 'b' (lag -3 ranks first); we move it to the caught-up 'a'.
    a = ClientState("a", task_offset_sums={T[0]: LATEST_OFFSET, T[1]: END})
    b = ClientState("b", task_offset_sums={T[1]: UNKNOWN_OFFSET_SUM})
    result = assign_high_availability(group([a, b], 2), AssignmentConfigs())
    assert active(result, "a") == {"0_0", "0_1"}
    assert result.clients["b"].warmup == {T[1]}


def test_an_unknown_offset_sum_ranks_first_when_nobody_is_caught_up() -> None:
    a = ClientState("a", task_offset_sums={T[1]: END - 500_000})
    b = ClientState("b", task_offset_sums={T[1]: UNKNOWN_OFFSET_SUM})
    result = assign_high_availability(group([a, b], 2), AssignmentConfigs())
    assert active(result, "b") == {"0_1"}


def test_stateless_tasks_go_last_to_the_least_loaded_clients_by_capacity() -> None:
    a = ClientState("a", capacity=1, task_offset_sums=dict.fromkeys(T[:4], LATEST_OFFSET))
    b = ClientState("b", capacity=3)
    result = assign_high_availability(group([a, b], 4, stateless=4), AssignmentConfigs(max_warmup_replicas=5))
    # 'a' keeps its 4 stateful actives for now (b must warm up); all stateless tasks go to 'b'.
    assert len(result.clients["a"].active) == 4
    assert {t.subtopology for t in result.clients["b"].active} == {9}
    assert len(result.clients["b"].active) == 4


def test_capacity_weights_the_balanced_target() -> None:
    clients = [ClientState("a", capacity=1), ClientState("b", capacity=3)]
    result = assign_high_availability(group(clients, 8), AssignmentConfigs())
    assert (len(result.clients["a"].active), len(result.clients["b"].active)) == (2, 6)


def test_standbys_spread_over_distinct_zones_when_tags_are_configured() -> None:
    zones = {"a": "z1", "b": "z1", "c": "z2", "d": "z2", "e": "z3", "f": "z3"}
    clients = [ClientState(p, client_tags={"zone": z}) for p, z in zones.items()]
    configs = AssignmentConfigs(num_standby_replicas=2, rack_aware_assignment_tags=("zone",))
    result = assign_high_availability(group(clients, 6), configs)
    for task in T[:6]:
        holders = [p for p, ca in result.clients.items() if task in ca.active or task in ca.standby]
        assert len(holders) == 3
        assert {zones[p] for p in holders} == {"z1", "z2", "z3"}, f"{task} replicas share a zone: {holders}"


def test_without_tags_standbys_ignore_zones_and_only_balance() -> None:
    clients = [ClientState(p, client_tags={"zone": "same"}) for p in "abc"]
    result = assign_high_availability(group(clients, 3), AssignmentConfigs(num_standby_replicas=1))
    assert all(len(ca.standby) == 1 for ca in result.clients.values())
