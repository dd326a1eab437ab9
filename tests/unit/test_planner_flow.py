"""The planner's min-cost flows find the same optimum as HiGHS on the same models, and as each other."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import Bounds, LinearConstraint, milp

from assignor import GroupState
from assignor.end_state import active_costs as costs_of
from assignor.flow import FlowNetwork
from assignor.lags import LagIndex
from assignor.target import ActiveCosts, _share, _solve, _solve_by_flow, solve_active_target, solve_standby_target
from assignor.task import TaskId
from tests.support.strategies import Case, cases


def active_costs(case: Case) -> ActiveCosts:
    group = case.group
    return costs_of(group, LagIndex.of(group, case.configs))


def shares_hold(owners: dict[TaskId, str], group: GroupState, costs: ActiveCosts) -> bool:
    """Every client's count of actives, and of each subtopology's actives, is a floor or ceiling of its share."""
    total = sum(costs.capacity.values())
    for pid, cap in costs.capacity.items():
        mine = [t for t, p in owners.items() if p == pid]
        low, high = _share(len(owners), cap, total)
        if not low <= len(mine) <= high:
            return False
        for sub in {t.subtopology for t in owners}:
            size = sum(1 for t in owners if t.subtopology == sub)
            low, high = _share(size, cap, total)
            if not low <= sum(1 for t in mine if t.subtopology == sub) <= high:
                return False
    return True


@given(cases(max_clients=12, max_tasks=150))
def test_active_flow_restores_and_moves_as_little_as_the_milp(case: Case) -> None:
    costs = active_costs(case)
    if not costs.tasks:
        return
    solved = _solve_by_flow(costs)
    assert solved is not None, "the proportional bounds are always feasible"
    owners, score = solved
    assert set(owners) == set(costs.tasks)
    assert shares_hold(owners, case.group, costs)
    _, milp_score = _solve(costs, exact=False)
    assert score == milp_score


def standby_objective_by_milp(
    costs: ActiveCosts, owners: dict[TaskId, str], replicas: int, held: dict[str, frozenset[TaskId]]
) -> float | None:
    """The transportation model the planner solves, handed to HiGHS: its optimal objective, or None."""
    stateful = [t for t in costs.tasks if t in costs.stateful]
    pids = list(costs.process_ids)
    weight = len(stateful) * replicas + 1
    edges = [(t, p) for t in stateful for p in pids if owners[t] != p]
    objective = np.array([costs.restore(t, p) * weight + (0 if t in held[p] else 1) for t, p in edges], dtype=float)
    rows, lower, upper = [], [], []
    for task in stateful:
        rows.append([1.0 if t == task else 0.0 for t, _ in edges])
        lower.append(replicas)
        upper.append(replicas)
    total = sum(costs.capacity[p] for p in pids)
    copies = len(stateful) * (1 + replicas)
    for pid in pids:
        actives = sum(1 for t in stateful if owners[t] == pid)
        low, high = _share(copies, costs.capacity[pid], total)
        rows.append([1.0 if p == pid else 0.0 for _, p in edges])
        lower.append(low - actives)
        upper.append(high - actives)
    result = milp(
        objective,
        constraints=LinearConstraint(np.array(rows), lower, upper),
        integrality=np.ones(len(edges)),
        bounds=Bounds(0, 1),
        options={"mip_rel_gap": 0.0},
    )
    return None if result.x is None else float(result.fun)


@pytest.mark.parametrize("pooled", [False, True], ids=["full model", "pooled model"])
@given(case=cases(max_clients=10, max_tasks=80))
def test_standby_flow_restores_as_little_as_the_milp(pooled: bool, case: Case) -> None:
    """The full model, and the one for large groups (clients without state pooled, solved in phases), find the MILP's
    optimum; the pooled one may give up (None) when its pooled copies cannot be laid out, the full one never."""
    costs = active_costs(case)
    owners = solve_active_target(costs)
    replicas = min(len(case.group.clients) - 1, case.configs.num_standby_replicas)
    stateful = [t for t in costs.tasks if t in costs.stateful]
    if replicas <= 0 or not stateful:
        return
    held = {c.process_id: c.previous_standby | c.previous_active for c in case.group.clients}
    extra = {"full_model_max_edges": 0} if pooled else {}
    standbys = solve_standby_target(costs, owners, replicas, held, **extra)
    expected = standby_objective_by_milp(costs, owners, replicas, held)
    if expected is None:
        assert standbys is None
    elif not pooled:
        assert standbys is not None
    if standbys is None or expected is None:
        return
    weight = len(stateful) * replicas + 1
    found = sum(
        costs.restore(t, p) * weight + (0 if t in held[p] else 1) for p, tasks in standbys.items() for t in tasks
    )
    assert found == round(expected)
    for task in stateful:
        holders = [p for p, tasks in standbys.items() if task in tasks]
        assert len(holders) == replicas and owners[task] not in holders


@st.composite
def transport_networks(draw: st.DrawFn) -> tuple[list[int], list[int], list[tuple[int, int, int, int]]]:
    """Supplies, demands and arcs (from, to, capacity, cost) of a small transportation problem with many equal costs
    (zero reduced-cost ties are where the phases' depth-first passes give nodes up)."""
    supplies = draw(st.lists(st.integers(1, 4), min_size=1, max_size=6))
    demands = draw(st.lists(st.integers(1, 4), min_size=1, max_size=6))
    arcs = draw(
        st.lists(
            st.tuples(
                st.integers(0, len(supplies) - 1),
                st.integers(0, len(demands) - 1),
                st.integers(1, 4),
                st.integers(0, 3),
            ),
            max_size=30,
        )
    )
    return supplies, demands, arcs


def _solved(network: tuple[list[int], list[int], list[tuple[int, int, int, int]]], phases: bool) -> int:
    """Total cost of routing every supply to the sink, through the demands or directly at a higher cost."""
    net, ids = _transport(network)
    feasible = net.solve_in_phases() if phases else net.solve()
    assert feasible, "the direct arcs take every supply"
    return sum(net.flow(arc) * cost for arc, cost in ids)


def _transport(
    network: tuple[list[int], list[int], list[tuple[int, int, int, int]]],
) -> tuple[FlowNetwork, list[tuple[int, int]]]:
    """The network of a transportation problem, and its arcs that cost something: (arc id, cost)."""
    supplies, demands, arcs = network
    net = FlowNetwork()
    sources = [net.node(supply=s) for s in supplies]
    targets = [net.node() for _ in demands]
    sink = net.node(supply=-sum(supplies))
    ids = [(net.arc(sources[i], targets[j], 0, cap, cost, 0), cost) for i, j, cap, cost in arcs]
    for j, demand in enumerate(demands):
        net.arc(targets[j], sink, 0, demand, 0, 0)
    for i, supply in enumerate(supplies):  # dearer than any route through a demand: feasible, and still a choice
        ids.append((net.arc(sources[i], sink, 0, supply, 4, 0), 4))
    return net, ids


@given(transport_networks())
def test_phases_route_at_the_same_cost_as_one_path_per_search(
    network: tuple[list[int], list[int], list[tuple[int, int, int, int]]],
) -> None:
    """solve_in_phases, whose passes skip nodes that cannot reach a deficit, finds solve()'s optimum."""
    assert _solved(network, phases=True) == _solved(network, phases=False)


@given(transport_networks())
def test_phases_end_with_potentials_that_prove_the_flow_optimal(
    network: tuple[list[int], list[int], list[tuple[int, int, int, int]]],
) -> None:
    """After solve_in_phases, whose searches settle nodes met at the current distance without the heap, every arc with
    room left has a non-negative reduced cost: the potentials certify that no cheaper routing exists."""
    net, _ = _transport(network)
    assert net.solve_in_phases()
    assert all(supply == 0 for supply in net.supply), "every supply routed"
    for a, room in enumerate(net.residual):
        if room > 0:
            tail, head = net.head[a ^ 1], net.head[a]
            assert net.cost[a] + net.potential[tail] - net.potential[head] >= 0, (
                f"residual arc {a} could lower the cost"
            )
