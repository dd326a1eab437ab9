"""The planner's balanced target for actives, solved exactly as a mixed-integer program (HiGHS via scipy).

Model: each task goes to one client, either over a *direct* edge (a client whose cost for the task is
its own: the previous owner or a client with state) or over its subtopology's *pool*, whose flow is then
spread over all clients at the cost of a client without state (the true cost there is never higher).
Two solves minimize, in order, offsets to restore and tasks moved; balance is a hard constraint.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from math import inf, isfinite, isqrt
from typing import TYPE_CHECKING, overload

from assignor.flow import FlowNetwork
from assignor.lags import LagIndex, lag_is_caught_up, restore_owed
from assignor.task import TaskId

if TYPE_CHECKING:
    import numpy as np


def _restore_cost(lag: int, end: int, acceptable_recovery_lag: int) -> int:
    """restore_owed, priced at least 1 when not caught up: that costs a warmup round even when nothing is left to
    replay (-3 on an empty log)."""
    if lag_is_caught_up(lag, acceptable_recovery_lag):
        return 0
    return max(1, restore_owed(lag, end, acceptable_recovery_lag))


@dataclass(frozen=True)
class ActiveCosts:
    """What placing each task's active on a client costs: offsets to restore, and whether its owner changes."""

    tasks: Sequence[TaskId]  # sorted
    stateful: frozenset[TaskId]
    process_ids: Sequence[str]  # sorted
    capacity: Mapping[str, int]
    previous_owners: Mapping[TaskId, frozenset[str]]
    lags: LagIndex
    # dicts, not Mappings: compiled, their get() is a native call (asked for every edge of the flow models)
    _default_restore: dict[TaskId, int] = field(init=False, repr=False, compare=False)
    _reported_restore: dict[TaskId, dict[str, int]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # restore() is asked about every (task, client) pair several times per plan: price each once.
        acceptable = self.lags.acceptable_recovery_lag
        default: dict[TaskId, int] = {}
        reported: dict[TaskId, dict[str, int]] = {}
        for task in self.stateful:
            end = self.lags.ends.get(task, 0)
            default[task] = _restore_cost(end, end, acceptable)
            reported[task] = {
                pid: _restore_cost(lag, end, acceptable) for pid, lag in self.lags.reported.get(task, {}).items()
            }
        object.__setattr__(self, "_default_restore", default)
        object.__setattr__(self, "_reported_restore", reported)

    def restore(self, task: TaskId, pid: str | None) -> int:
        """Offsets to replay before the task can run on ``pid`` (None: a client without state)."""
        default = self._default_restore.get(task)
        if default is None:
            return 0
        return default if pid is None else self._reported_restore[task].get(pid, default)

    def restore_prices(self, task: TaskId) -> tuple[int, dict[str, int]]:
        """restore() of every client at once: (a client without state, the clients that reported; not to be
        changed)."""
        default = self._default_restore.get(task)
        return (0, {}) if default is None else (default, self._reported_restore[task])

    def move(self, task: TaskId, pid: str | None) -> int:
        """1 when the task had an owner and ``pid`` (None: someone new) is not it."""
        owners = self.previous_owners.get(task, frozenset())
        return 0 if not owners or (pid is not None and pid in owners) else 1

    def direct_candidates(self, task: TaskId) -> list[str]:
        """Clients whose cost for the task may differ from a stateless client's."""
        found = set(self.previous_owners.get(task, ()))
        if task in self.stateful:
            found.update(self.lags.reported.get(task, {}))
        return sorted(found)


class MilpModel:
    """Column and row bookkeeping for one milp() problem."""

    def __init__(self) -> None:
        self.lower: list[float] = []
        self.upper: list[float] = []
        self.integer: list[int] = []
        self.rows: list[int] = []
        self.cols: list[int] = []
        self.vals: list[float] = []
        self.row_lower: list[float] = []
        self.row_upper: list[float] = []

    def var(self, lower: float = 0.0, upper: float = inf, integer: bool = True) -> int:
        self.lower.append(lower)
        self.upper.append(upper)
        self.integer.append(1 if integer else 0)
        return len(self.lower) - 1

    def row(self, terms: Sequence[tuple[int, float]], lower: float, upper: float) -> None:
        index = len(self.row_lower)
        for col, value in terms:
            self.rows.append(index)
            self.cols.append(col)
            self.vals.append(value)
        self.row_lower.append(lower)
        self.row_upper.append(upper)

    @overload
    def solve(self, objective: np.ndarray, node_limit: int | None = None) -> np.ndarray: ...

    @overload
    def solve(
        self, objective: np.ndarray, node_limit: int | None = None, *, allow_infeasible: bool
    ) -> np.ndarray | None: ...

    def solve(
        self, objective: np.ndarray, node_limit: int | None = None, *, allow_infeasible: bool = False
    ) -> np.ndarray | None:
        # Loaded here, not at import: most targets are solved by the flow network, and light users of the
        # package (the wire formats, the runtime) should not pay for scipy.
        import numpy as np  # noqa: PLC0415
        from scipy.optimize import Bounds, LinearConstraint, milp  # noqa: PLC0415
        from scipy.sparse import coo_array  # noqa: PLC0415

        n = len(self.lower)
        matrix = coo_array((self.vals, (self.rows, self.cols)), shape=(len(self.row_lower), n)).tocsr()
        result = milp(
            objective,
            constraints=LinearConstraint(matrix, self.row_lower, self.row_upper),
            integrality=np.array(self.integer),
            bounds=Bounds(np.array(self.lower), np.array(self.upper)),
            options={"mip_rel_gap": 0.0, "presolve": True, **({"node_limit": node_limit} if node_limit else {})},
        )
        if result.x is None and allow_infeasible:
            return None
        if result.x is None:  # pragma: no cover - balanced targets always exist
            raise RuntimeError(f"balanced target model failed: {result.message}")
        return np.asarray(result.x)

    def minimum(self, objective: Sequence[float], node_limit: int) -> MilpOutcome:
        """Minimise ``objective`` within ``node_limit`` search nodes: the best solution found (if any), a proven
        lower bound on the optimum, and whether that solution is optimal."""
        import numpy as np  # noqa: PLC0415
        from scipy.optimize import Bounds, LinearConstraint, milp  # noqa: PLC0415
        from scipy.sparse import coo_array  # noqa: PLC0415

        n = len(self.lower)
        matrix = coo_array((self.vals, (self.rows, self.cols)), shape=(len(self.row_lower), n)).tocsr()
        result = milp(
            np.array(objective, dtype=float),
            constraints=LinearConstraint(matrix, self.row_lower, self.row_upper),
            integrality=np.array(self.integer),
            bounds=Bounds(np.array(self.lower), np.array(self.upper)),
            options={"mip_rel_gap": 0.0, "presolve": True, "node_limit": node_limit},
        )
        solution = None if result.x is None else [float(v) for v in result.x]
        dual = getattr(result, "mip_dual_bound", None)
        lower = float(result.fun) if result.status == 0 else (float(dual) if dual is not None else None)
        if lower is not None and not isfinite(lower):  # infeasible or unbounded: nothing proven
            lower = None
        return MilpOutcome(solution, lower, result.status == 0)


@dataclass(frozen=True)
class MilpOutcome:
    """What one bounded milp() search found: a solution (None if none), a lower bound on the optimum (None if
    none was proven) and whether the solution is optimal."""

    solution: list[float] | None
    lower_bound: float | None
    optimal: bool


def _share(total: int, capacity: int, all_capacity: int) -> tuple[int, int]:
    """Floor and ceiling of a client's capacity-proportional share of ``total``."""
    low, rest = divmod(total * capacity, all_capacity)
    return low, low + (1 if rest else 0)


Part = tuple[int, bool]  # (subtopology, stateful): the tasks of one kind in one subtopology


@dataclass(frozen=True)
class _Parts:
    """Tasks grouped by subtopology and kind, and which groups B2 bounds.

    A subtopology of one kind is bounded whole. One that mixes stateful and stateless tasks (the API allows it)
    has only its stateful part bounded: the contract's B2 is met when the stateful actives alone are spread
    within one, and bounding them is what lets B1's stateful load (actives plus standbys) stay even.
    """

    size: Mapping[Part, int]
    bounded: frozenset[Part]

    @classmethod
    def of(cls, costs: ActiveCosts) -> _Parts:
        size: dict[Part, int] = defaultdict(int)
        for task in costs.tasks:
            size[(task.subtopology, task in costs.stateful)] += 1
        mixed = {sub for sub, _ in size if (sub, True) in size and (sub, False) in size}
        return cls(dict(sorted(size.items())), frozenset(p for p in size if p[1] or p[0] not in mixed))


EXACT_MODEL_MAX_TASKS = 250
EXACT_MODEL_NODE_LIMIT = 2_000


def solve_active_target(costs: ActiveCosts) -> dict[TaskId, str]:
    """Task -> client of a balanced target minimizing restore offsets, then moves.

    First with proportional bounds: every client's count of actives, of stateful actives (so that standbys
    can always even out the stateful load) and of each subtopology's actives is the floor or ceiling of its
    capacity-proportional share. That implies B1 and B2, equals them when every capacity is 1, is always
    feasible, and is a flow network (task -> client/subtopology -> client/kind -> client) that HiGHS solves
    at the root. With larger capacities the contract allows more (B1: any window [L, L+1] of actives per
    capacity; B2: only equal-capacity clients within one), so groups up to EXACT_MODEL_MAX_TASKS tasks are
    solved again with those exact windows as free levels, and the better target wins.
    """
    if not costs.tasks:
        return {}
    flow = _solve_by_flow(costs)
    owners, score = flow if flow is not None else _solve(costs, exact=False)
    if max(costs.capacity.values()) > 1 and len(costs.tasks) <= EXACT_MODEL_MAX_TASKS:
        try:
            exact_owners, exact_score = _solve(costs, exact=True)
        except RuntimeError:  # HiGHS can misreport the locked model; the flow solution stands
            return owners
        if exact_score < score:
            return exact_owners
    return owners


def solve_active_targets_within(costs: ActiveCosts, max_moves: int) -> list[dict[TaskId, str]]:
    """Balanced targets moving at most ``max_moves`` tasks, least restore first: [] when none is found.

    The fewest moves, then least restore (a min-cost flow); when that leaves room under the bound, also the least
    restore among targets within it (the MILP with the bound as one more row). Used when the restore-first target
    moves more than a baseline does: trading restore for moves may then still beat the baseline everywhere.
    """
    if not costs.tasks:
        return [{}]
    found: list[tuple[tuple[int, int], dict[TaskId, str]]] = []
    fewest = _solve_by_flow(costs, moves_first=True)
    if fewest is not None and fewest[1][1] <= max_moves:
        found.append((fewest[1], fewest[0]))
    if fewest is None or fewest[1][1] < max_moves or max(costs.capacity.values()) > 1:
        for exact in (False, True) if max(costs.capacity.values()) > 1 else (False,):
            try:
                solved = _solve(costs, exact=exact, max_moves=max_moves)
            except RuntimeError:  # pragma: no cover - HiGHS can misreport a locked model; the flow's answer stands
                continue
            if solved is not None and solved[1][1] <= max_moves:
                found.append((solved[1], solved[0]))
    found.sort(key=lambda f: f[0])
    unique: list[dict[TaskId, str]] = []
    for _, owners in found:
        if owners not in unique:
            unique.append(owners)
    return unique


def _solve_by_flow(
    costs: ActiveCosts, *, moves_first: bool = False
) -> tuple[dict[TaskId, str], tuple[int, int]] | None:
    """The proportional-bounds model of _solve as a min-cost flow, solved exactly without HiGHS.

    One cost, restore * (tasks + 1) + move, orders restore before moves as _solve's two stages do (with
    ``moves_first``, move * (every task's dearest restore, summed, + 1) + restore: fewest moves, then least
    restore). Every task starts on its cheapest edge; the flow then moves only the tasks the bounds do not let
    stay there. None if the network finds no feasible flow (then HiGHS decides).
    """
    pids = list(costs.process_ids)
    capacity = costs.capacity
    all_capacity = sum(capacity[p] for p in pids)
    n_tasks = len(costs.tasks)
    scale, move_weight = n_tasks + 1, 1
    if moves_first:  # Python ints: the flow's costs and distances stay exact however large this gets
        scale = 1
        move_weight = 1 + sum(max(d, max(r.values(), default=d)) for d, r in map(costs.restore_prices, costs.tasks))
    net = FlowNetwork()
    parts = _Parts.of(costs)
    stateful_count = sum(1 for t in costs.tasks if t in costs.stateful)
    entry: dict[Part, dict[str, int]] = {part: {} for part in parts.size}  # (part, client) -> node
    for pid in pids:
        for part in parts.size:
            entry[part][pid] = net.node()
    inflow = {part: dict.fromkeys(pids, 0) for part in parts.size}
    # Per task (costs.tasks' order): its direct candidates, and the arc to the first (the others' arcs follow it).
    direct_clients: list[list[str]] = []
    direct_first: list[int] = []
    pooled: dict[Part, list[tuple[int, TaskId]]] = defaultdict(list)
    pool_node: dict[Part, int] = {}
    no_owners: frozenset[str] = frozenset()
    for task in costs.tasks:
        part = (task.subtopology, task in costs.stateful)
        candidates = costs.direct_candidates(task)
        # restore() and move() of every candidate, priced from the task's tables (asked for every edge)
        pool_restore, restores = costs.restore_prices(task)
        offsets = [restores.get(pid, pool_restore) for pid in candidates]
        if any(r > pool_restore for r in offsets):
            candidates = pids
            offsets = [restores.get(pid, pool_restore) for pid in candidates]
        owners = costs.previous_owners.get(task, no_owners)
        moved = move_weight if owners else 0
        edges = [offsets[i] * scale + (0 if candidates[i] in owners else moved) for i in range(len(candidates))]
        pool_cost = pool_restore * scale + moved
        best_direct = min(edges) if edges else pool_cost
        use_pool = candidates is not pids and (not edges or pool_cost < best_direct)
        cheapest = pool_cost if use_pool else best_direct
        node = net.node(supply=1, potential=-cheapest)
        taken = use_pool
        part_entry, part_inflow = entry[part], inflow[part]
        first = -1
        for i in range(len(edges)):
            cost, pid = edges[i], candidates[i]
            flow = 1 if not taken and cost == cheapest else 0
            arc = net.arc(node, part_entry[pid], 0, 1, cost, flow)
            first = arc if i == 0 else first
            if flow:
                taken = True
                part_inflow[pid] += 1
        direct_clients.append(candidates)
        direct_first.append(first)
        if candidates is not pids:
            if part not in pool_node:
                pool_node[part] = net.node()
            flow = 1 if not taken else 0
            pooled[part].append((net.arc(node, pool_node[part], 0, 1, pool_cost, flow), task))
    spread: dict[Part, dict[str, int]] = {}
    for part, pool in sorted(pool_node.items()):
        spread[part] = {pid: net.arc(pool, entry[part][pid], 0, n_tasks, 0, 0) for pid in pids}
    sink = net.node(supply=-n_tasks)

    def forward(tail: int, head: int, arriving: int, share: tuple[int, int]) -> int:
        """An arc within the share's bounds, carrying what arrives as far as they allow."""
        flow = min(max(arriving, share[0]), share[1])
        net.arc(tail, head, share[0], share[1], 0, flow)
        return flow

    for pid in pids:
        cap = capacity[pid]
        client = net.node()
        kinds: dict[bool, tuple[int, int]] = {}
        for part, size in parts.size.items():
            kind = part[1]
            if kind not in kinds:
                kinds[kind] = (net.node(), 0)
            node, arriving = kinds[kind]
            share = _share(size, cap, all_capacity) if part in parts.bounded else (0, n_tasks)
            sent = forward(entry[part][pid], node, inflow[part][pid], share)
            kinds[kind] = (node, arriving + sent)
        arriving = 0
        for kind, (node, sent) in sorted(kinds.items()):
            share = _share(stateful_count, cap, all_capacity) if kind else (0, n_tasks)
            arriving += forward(node, client, sent, share)
        forward(client, sink, arriving, _share(n_tasks, cap, all_capacity))
    if not net.solve():
        return None
    owner: dict[TaskId, str] = {}
    for task, candidates, first in zip(costs.tasks, direct_clients, direct_first, strict=True):
        for i, pid in enumerate(candidates):
            if net.flow(first + i):
                owner[task] = pid
    for key, members in sorted(pooled.items()):
        waiting = [task for arc, task in members if net.flow(arc)]
        slots = [pid for pid, arc in spread[key].items() for _ in range(net.flow(arc))]
        for task, pid in zip(waiting, slots, strict=True):
            owner[task] = pid
    restore = sum(costs.restore(t, p) for t, p in owner.items())
    return owner, (restore, sum(costs.move(t, p) for t, p in owner.items()))


@overload
def _solve(costs: ActiveCosts, *, exact: bool) -> tuple[dict[TaskId, str], tuple[int, int]]: ...


@overload
def _solve(costs: ActiveCosts, *, exact: bool, max_moves: int) -> tuple[dict[TaskId, str], tuple[int, int]] | None: ...


def _solve(
    costs: ActiveCosts, *, exact: bool, max_moves: int | None = None
) -> tuple[dict[TaskId, str], tuple[int, int]] | None:
    """The MILP: least restore, then fewest moves; with ``max_moves``, only targets moving at most that many
    tasks (None when there is none)."""
    import numpy as np  # noqa: PLC0415 - only the MILP needs it (see _Model.solve)

    model = MilpModel()
    pids = list(costs.process_ids)
    capacity = costs.capacity
    all_capacity = sum(capacity[p] for p in pids)
    restore_cost: dict[int, float] = {}
    move_cost: dict[int, float] = {}
    into: dict[tuple[str, Part], list[tuple[int, float]]] = defaultdict(list)  # (client, part) inflow
    direct: list[tuple[int, TaskId, str]] = []
    pooled: dict[Part, list[tuple[int, TaskId]]] = defaultdict(list)
    parts = _Parts.of(costs)
    for task in costs.tasks:
        part = (task.subtopology, task in costs.stateful)
        choice: list[tuple[int, float]] = []
        candidates = costs.direct_candidates(task)
        # The pool prices a client without state; it is exact only if no client costs more than that
        # (one reporting -3 on a changelog within the acceptable lag does): then list every client.
        pool_restore = costs.restore(task, None)
        if any(costs.restore(task, pid) > pool_restore for pid in candidates):
            candidates = pids
        for pid in candidates:
            col = model.var(upper=1)
            restore_cost[col] = costs.restore(task, pid)
            move_cost[col] = costs.move(task, pid)
            direct.append((col, task, pid))
            into[(pid, part)].append((col, 1))
            choice.append((col, 1))
        if candidates is pids:
            model.row(choice, 1, 1)
            continue
        pool_col = model.var(upper=1)
        restore_cost[pool_col] = pool_restore
        move_cost[pool_col] = costs.move(task, None)
        pooled[part].append((pool_col, task))
        choice.append((pool_col, 1))
        model.row(choice, 1, 1)
    spread: dict[Part, dict[str, int]] = {}
    for part, members in sorted(pooled.items()):
        columns = {pid: model.var() for pid in pids}
        spread[part] = columns
        model.row([(c, 1) for c in columns.values()] + [(col, -1) for col, _ in members], 0, 0)
        for pid, col in columns.items():
            into[(pid, part)].append((col, 1))
    stateful_count = len([t for t in costs.tasks if t in costs.stateful])
    # Exact mode: free levels; (level, scale, width) windows are scale*level <= count <= scale*level + width.
    total_level = model.var(lower=-inf, integer=False)
    stateful_level = model.var(lower=-inf, integer=False)
    bounded_parts = [part for part in parts.size if part in parts.bounded]  # sorted: HiGHS sees a fixed order
    class_level = {(part, cap): model.var() for part in bounded_parts for cap in {capacity[p] for p in pids}}
    n_tasks = len(costs.tasks)

    def bounded(terms: list[tuple[int, float]], share: tuple[int, int], window: tuple[int, float, float]) -> int:
        if exact:
            out = model.var(upper=n_tasks)
            level, scale, width = window
            model.row([(out, 1), (level, -scale)], 0, inf)
            model.row([(out, 1), (level, -scale)], -inf, width)
        else:
            out = model.var(lower=share[0], upper=share[1])
        model.row([*terms, (out, -1)], 0, 0)
        return out

    for pid in pids:
        cap = capacity[pid]
        kind_terms: dict[bool, list[tuple[int, float]]] = defaultdict(list)
        for part, size in parts.size.items():
            terms = into.get((pid, part), [])
            if part in parts.bounded:
                out = bounded(terms, _share(size, cap, all_capacity), (class_level[(part, cap)], 1, 1))
            else:
                out = model.var(upper=n_tasks)
                model.row([*terms, (out, -1)], 0, 0)
            kind_terms[part[1]].append((out, 1))
        client_terms: list[tuple[int, float]] = []
        for is_stateful, terms in sorted(kind_terms.items()):
            if is_stateful:
                out = bounded(terms, _share(stateful_count, cap, all_capacity), (stateful_level, cap, cap))
            else:
                out = model.var(upper=n_tasks)
                model.row([*terms, (out, -1)], 0, 0)
            client_terms.append((out, 1))
        bounded(client_terms, _share(n_tasks, cap, all_capacity), (total_level, cap, cap))

    if max_moves is not None:
        model.row([(c, w) for c, w in move_cost.items() if w], -inf, max_moves + 0.5)
    n = len(model.lower)
    solution = np.zeros(n)
    node_limit = EXACT_MODEL_NODE_LIMIT if exact or max_moves is not None else None
    for stage, weights in enumerate((restore_cost, move_cost)):
        objective = np.zeros(n)
        for col, weight in weights.items():
            objective[col] = weight
        if stage == 0 and max_moves is not None:
            first = model.solve(objective, node_limit, allow_infeasible=True)
            if first is None:
                return None
            solution = first
        elif stage == 0:
            solution = model.solve(objective, node_limit)
        else:
            # Presolve has been seen to call the restore-locked model infeasible; then keep stage 0's answer.
            locked = model.solve(objective, node_limit, allow_infeasible=True)
            solution = solution if locked is None else locked
        if stage == 0:
            # Lock the restore optimum in before minimizing moves (restore offsets are integral).
            best = float(objective @ solution)
            model.row([(c, w) for c, w in restore_cost.items() if w], -inf, best + 0.5)

    owner: dict[TaskId, str] = {}
    for col, task, pid in direct:
        if solution[col] > 0.5:
            owner[task] = pid
    for key, members in sorted(pooled.items()):
        waiting = [task for col, task in members if solution[col] > 0.5]
        slots = [pid for pid, col in spread[key].items() for _ in range(round(solution[col]))]
        for task, pid in zip(waiting, slots, strict=True):
            owner[task] = pid
    restore = sum(costs.restore(t, p) for t, p in owner.items())
    return owner, (restore, sum(costs.move(t, p) for t, p in owner.items()))


EXACT_STANDBY_MAX_EDGES = 60_000  # the model with an edge per (task, client)
POOLED_STANDBY_MAX_EDGES = 60_000  # the model with clients without state pooled (larger groups)


def solve_standby_target(
    costs: ActiveCosts,
    owners: Mapping[TaskId, str],
    replicas: int,
    held_before: Mapping[str, frozenset[TaskId]],
    full_model_max_edges: int = EXACT_STANDBY_MAX_EDGES,
) -> dict[str, frozenset[TaskId]] | None:
    """Standbys minimizing restore offsets, then new copies, with every client's stateful replicas
    (actives + standbys) within the floor/ceiling of its capacity share; None when the model is too big
    or infeasible.

    A transportation problem (task -> client, never its active's client), solved as a min-cost flow. Up to
    ``full_model_max_edges`` edges, one per (task, client); above, the clients without state for a task share one
    pooled edge (_solve_pooled_standbys), whose optimum costs the same.
    """
    stateful = [t for t in costs.tasks if t in costs.stateful]
    pids = list(costs.process_ids)
    if replicas <= 0 or not stateful:
        return None
    if len(stateful) * len(pids) > full_model_max_edges:
        return _solve_pooled_standbys(costs, owners, replicas, held_before, stateful)
    weight = len(stateful) * replicas + 1  # new copies never outweigh one restored offset
    active_count = dict.fromkeys(pids, 0)
    for task in stateful:
        active_count[owners[task]] += 1
    net = FlowNetwork()
    clients = {pid: net.node() for pid in pids}
    inflow = dict.fromkeys(pids, 0)
    edges: list[tuple[int, TaskId, str]] = []
    for task in stateful:
        # Each task starts on its `replicas` cheapest clients; the flow moves only what the windows forbid.
        default, restores = costs.restore_prices(task)
        owner = owners[task]
        ranked = sorted(
            (restores.get(pid, default) * weight + (0 if task in held_before[pid] else 1), i, pid)
            for i, pid in enumerate(pids)
            if owner != pid
        )
        node = net.node(supply=replicas, potential=-ranked[replicas - 1][0])
        for rank, (cost, _, pid) in enumerate(ranked):
            flow = 1 if rank < replicas else 0
            edges.append((net.arc(node, clients[pid], 0, 1, cost, flow), task, pid))
            inflow[pid] += flow
    if not _standby_windows(net, costs, clients, inflow, active_count, len(stateful) * replicas):
        return None
    if not net.solve():
        return None
    chosen: dict[str, set[TaskId]] = {p: set() for p in pids}
    for arc, task, pid in edges:
        if net.flow(arc):
            chosen[pid].add(task)
    return {p: frozenset(t) for p, t in chosen.items()}


def _standby_windows(
    net: FlowNetwork,
    costs: ActiveCosts,
    clients: Mapping[str, int],
    inflow: Mapping[str, int],
    active_count: Mapping[str, int],
    standbys: int,
) -> bool:
    """Every client's arc to the sink, bounded by its share of all stateful copies less its actives; False if a
    window is empty (the proportional window is infeasible for these actives: the greedy placement decides)."""
    copies = standbys + sum(active_count.values())
    all_capacity = sum(costs.capacity[p] for p in clients)
    sink = net.node(supply=-standbys)
    for pid, node in clients.items():
        low, high = _share(copies, costs.capacity[pid], all_capacity)
        low, high = max(0, low - active_count[pid]), high - active_count[pid]
        if high < low:
            return False
        net.arc(node, sink, low, high, 0, min(max(inflow[pid], low), high))
    return True


def _solve_pooled_standbys(
    costs: ActiveCosts,
    owners: Mapping[TaskId, str],
    replicas: int,
    held_before: Mapping[str, frozenset[TaskId]],
    stateful: list[TaskId],
) -> dict[str, frozenset[TaskId]] | None:
    """solve_standby_target's model with, per task, one edge for all clients that neither reported state for it
    nor held it before (they all cost the same: the whole changelog, a new copy) to a pool of the tasks with the
    same active's client, which feeds every other client.

    Every placement of the full model is one of this model at the same cost, so an optimum here whose pooled
    copies can each go to a distinct client that costs no more than the pool is optimal there too; None when this
    model is too big (POOLED_STANDBY_MAX_EDGES), infeasible, or that layout fails.
    """
    pids = list(costs.process_ids)
    owner_of = dict(owners)  # dicts, as held below: compiled, read natively (a Mapping's reads are generic calls)
    prices = [costs.restore_prices(task) for task in stateful]  # each task's, once
    held_by: dict[TaskId, set[str]] = defaultdict(set)
    for pid, tasks in held_before.items():
        for task in tasks:
            held_by[task].add(pid)
    known_clients: dict[TaskId, set[str]] = {}
    for task, (_, restores) in zip(stateful, prices, strict=True):
        known = set(restores)
        known.update(held_by.get(task, ()))
        known.discard(owner_of[task])
        known_clients[task] = known
    owners_used = {owner_of[t] for t in stateful}
    size = sum(len(k) + 1 for k in known_clients.values()) + len(owners_used) * len(pids)
    if size > POOLED_STANDBY_MAX_EDGES:
        return None
    weight = len(stateful) * replicas + 1
    active_count = dict.fromkeys(pids, 0)
    for task in stateful:
        active_count[owner_of[task]] += 1
    # A task's known clients ranked by cost (restore, then a new copy), ties in process id order (pids is sorted):
    # sorted as one int per client, cost * clients + index, which orders as (cost, index) without a tuple each.
    n = len(pids)
    index = {pid: i for i, pid in enumerate(pids)}
    held = dict(held_before)  # a dict: compiled, read natively (a Mapping's reads are generic calls)
    ranked: dict[TaskId, list[int]] = {}  # the costs, cheapest first
    ranked_at: dict[TaskId, list[int]] = {}  # the clients in that order, by index in pids
    for task, (default, restores) in zip(stateful, prices, strict=True):
        keys = sorted(
            (restores.get(pid, default) * weight + (0 if task in held[pid] else 1)) * n + index[pid]
            for pid in known_clients[task]
        )
        ranked[task] = [key // n for key in keys]
        ranked_at[task] = [key % n for key in keys]
    start = _BlankStart.of(costs, owner_of, replicas, stateful, known_clients, ranked, active_count, weight)
    net = FlowNetwork()
    clients = {pid: net.node(potential=start.price if pid in start.room else 0) for pid in pids}
    pools = {owner: net.node(potential=start.price_at(owner)) for owner in sorted(owners_used)}
    client_node = [clients[pid] for pid in pids]
    inflow_at = n * [0]  # by index in pids, as ranked_at
    first_arc: list[int] = []  # per task (stateful's order), the arc to its cheapest known client; the rest follow
    pooled: dict[str, list[tuple[int, TaskId]]] = defaultdict(list)
    pool_cost: dict[TaskId, int] = {}
    to_blank: list[tuple[int, int, TaskId]] = []  # (what the pool costs beyond the task's own place, order, task)
    for task, (default, _) in zip(stateful, prices, strict=True):
        owner = owner_of[task]
        task_ranked, task_at = ranked[task], ranked_at[task]
        free = n - 1 - len(task_ranked)
        pool_cost[task] = default * weight + 1
        priced = pool_cost[task] - start.price_at(owner)  # its reduced cost against the pool's potential
        # The `replicas` cheapest units to start with: one per known client, then the pool's (one per free client),
        # a client first on equal cost; both lists are sorted, so merged rather than sorted together.
        known_units, on_pool, last = 0, 0, 0
        pool_units = min(free, replicas)
        for _ in range(replicas):
            if known_units < len(task_ranked) and (on_pool == pool_units or task_ranked[known_units] <= priced):
                last = task_ranked[known_units]
                known_units += 1
            elif on_pool < pool_units:
                last = priced
                on_pool += 1
            else:  # pragma: no cover - replicas < clients
                return None
        node = net.node(supply=replicas, potential=-last)
        first = -1
        for rank in range(len(task_ranked)):
            flow = 1 if rank < known_units else 0
            i = task_at[rank]
            arc = net.arc(node, client_node[i], 0, 1, task_ranked[rank], flow)
            first = arc if rank == 0 else first
            inflow_at[i] += flow
        first_arc.append(first)  # the arcs of its known clients are numbered on from this one, in rank order
        if free:
            pooled[owner].append((net.arc(node, pools[owner], 0, pool_units, pool_cost[task], on_pool), task))
            if on_pool and start.price_at(owner):
                to_blank.extend([(start.loss(task_ranked, pool_cost[task], replicas), len(to_blank), task)] * on_pool)
    # A pool reaches every client but its owner through blocks of about sqrt(clients) clients: the clients of the
    # owner's block directly, every other block through one node (far fewer arcs than a pool-client pair each).
    side = max(1, isqrt(len(pids)))
    blocks = [pids[i : i + side] for i in range(0, len(pids), side)]
    block_of = {pid: b for b, members in enumerate(blocks) for pid in members}
    unbounded = len(stateful) * replicas
    inflow = {pid: inflow_at[i] for i, pid in enumerate(pids)}
    # The pooled copies the start sends on to blank clients, cheapest first, while their windows' floors have room.
    room = dict(start.room)
    near_flow: dict[tuple[str, str], int] = defaultdict(int)
    far_flow: dict[tuple[str, int], int] = defaultdict(int)
    leaf_flow: dict[str, int] = defaultdict(int)
    for _, _, task in sorted(to_blank):
        owner = owner_of[task]
        blank = next((pid for pid, left in room.items() if left and pid != owner), None)
        if blank is None:
            continue  # stays on the pool: excess the phases route
        room[blank] -= 1
        inflow[blank] += 1
        if block_of[blank] == block_of[owner]:
            near_flow[(owner, blank)] += 1
        else:
            far_flow[(owner, block_of[blank])] += 1
            leaf_flow[blank] += 1
    block_nodes = [net.node(potential=start.price if any(p in start.room for p in b) else 0) for b in blocks]
    leaves = [
        {pid: net.arc(block_nodes[b], clients[pid], 0, unbounded, 0, leaf_flow[pid]) for pid in members}
        for b, members in enumerate(blocks)
    ]
    near: dict[str, dict[str, int]] = {}
    far: dict[str, dict[int, int]] = {}
    for owner, pool in pools.items():
        home = block_of[owner]
        near[owner] = {
            pid: net.arc(pool, clients[pid], 0, unbounded, 0, near_flow[(owner, pid)])
            for pid in blocks[home]
            if pid != owner
        }
        far[owner] = {
            b: net.arc(pool, node, 0, unbounded, 0, far_flow[(owner, b)])
            for b, node in enumerate(block_nodes)
            if b != home
        }
    if not _standby_windows(net, costs, clients, inflow, active_count, len(stateful) * replicas):
        return None
    if not net.solve_in_phases():
        return None
    chosen: dict[str, set[TaskId]] = {p: set() for p in pids}
    for task, first in zip(stateful, first_arc, strict=True):
        for rank, i in enumerate(ranked_at[task]):
            if net.flow(first + rank):
                chosen[pids[i]].add(task)
    sent: list[list[TaskId]] = [[] for _ in blocks]  # pooled copies each block's clients must take
    for owner, members in pooled.items():
        waiting = [task for arc, task in members for _ in range(net.flow(arc))]
        direct = {pid: net.flow(arc) for pid, arc in near[owner].items()}
        onward = {b: net.flow(arc) for b, arc in far[owner].items()}
        layout = _PooledLayout(costs, weight, pool_cost, held_before, chosen)
        rest = layout.place(waiting, direct)
        if any(direct.values()):
            return None  # a client of the owner's block would be left short
        for task in rest:
            block = max(onward, key=onward.__getitem__, default=-1)  # most copies left to take, first on ties
            if block < 0 or not onward[block]:
                return None
            onward[block] -= 1
            sent[block].append(task)
    for b, block_clients in enumerate(blocks):
        slots = {pid: net.flow(leaves[b][pid]) for pid in block_clients}
        if _PooledLayout(costs, weight, pool_cost, held_before, chosen).place(sent[b], slots):
            return None
    return {p: frozenset(t) for p, t in chosen.items()}


@dataclass(frozen=True)
class _BlankStart:
    """Where the pooled standby model starts when some clients are blank (no task reported state there or was held
    there: every copy they take comes through a pool at the whole changelog's price, a new instance above all).

    Starting every task on its cheapest clients leaves the blank clients' window floors to the phases, one shortest
    path each, and each path is long (a chain of exchanges; at 1,000 x 100 ten far phases, each settling nearly every
    node). Instead the blank clients, the pools that reach them and their blocks get the potential ``price``: a pool
    then costs each task ``price`` less, so the tasks that lose least by a new copy start on their pool and are sent
    on to a blank client. Every residual arc keeps a non-negative reduced cost (the blank clients' arcs to the sink
    carry their floor, which has no reverse residual; the others' potential is 0 as before), so the phases still
    route to the same optimum; ``price`` makes about as many tasks start there as the floors have room.
    """

    price: int
    room: Mapping[str, int]  # blank clients: their window's floor (copies the start may send them)

    @classmethod
    def of(
        cls,
        costs: ActiveCosts,
        owners: Mapping[TaskId, str],
        replicas: int,
        stateful: Sequence[TaskId],
        known_clients: Mapping[TaskId, set[str]],
        ranked: Mapping[TaskId, Sequence[int]],
        active_count: Mapping[str, int],
        weight: int,
    ) -> _BlankStart:
        pids = list(costs.process_ids)
        known_anywhere: set[str] = set()
        for known in known_clients.values():
            known_anywhere |= known
        copies = len(stateful) * (1 + replicas)
        all_capacity = sum(costs.capacity[p] for p in pids)
        room = {}
        for pid in pids:
            if pid not in known_anywhere:
                floor = _share(copies, costs.capacity[pid], all_capacity)[0] - active_count[pid]
                if floor > 0:
                    room[pid] = floor
        wanted = sum(room.values())
        if not wanted:
            return cls(0, {})
        losses = sorted(
            cls.loss(ranked[task], costs.restore_prices(task)[0] * weight + 1, replicas)
            for task in stateful
            if len(ranked[task]) >= replicas and (len(room) > 1 or owners[task] not in room)
        )
        if not losses:
            return cls(0, {})
        # Every task losing at most the wanted-th least starts on its pool (ties too: those beyond the room stay
        # there as excess, which is still a valid start).
        return cls(losses[min(wanted, len(losses)) - 1] + 1, room)

    def price_at(self, owner: str) -> int:
        """The potential of ``owner``'s pool: ``price`` when it reaches a blank client (any but its owner)."""
        return self.price if len(self.room) > 1 or (self.room and owner not in self.room) else 0

    @staticmethod
    def loss(ranked: Sequence[int], pool_cost: int, replicas: int) -> int:
        """What a pooled copy costs beyond the task's ``replicas``-th cheapest client (0 with fewer clients): the
        order in which pooled copies go to blank clients."""
        return pool_cost - ranked[replicas - 1] if len(ranked) >= replicas else 0


@dataclass
class _PooledLayout:
    """Puts pooled standby copies on clients: each on a client with a slot left that does not hold the task yet and
    costs no more than the pool, the client with most slots left first (ties by process id order)."""

    costs: ActiveCosts
    weight: int
    pool_cost: Mapping[TaskId, int]
    held_before: Mapping[str, frozenset[TaskId]]
    chosen: dict[str, set[TaskId]]

    def place(self, copies: list[TaskId], slots: dict[str, int]) -> list[TaskId]:
        """The copies that found no client (``slots`` counts down)."""
        rest: list[TaskId] = []
        for task in copies:
            best = None
            for pid, left in slots.items():
                if not left or task in self.chosen[pid] or (best is not None and left <= slots[best]):
                    continue
                price = self.costs.restore(task, pid) * self.weight + (0 if task in self.held_before[pid] else 1)
                if price <= self.pool_cost[task]:
                    best = pid
            if best is None:
                rest.append(task)
                continue
            slots[best] -= 1
            self.chosen[best].add(task)
        return rest
