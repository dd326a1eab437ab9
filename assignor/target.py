"""The planner's balanced target for actives, solved exactly as a mixed-integer program (HiGHS via scipy).

Model: each task goes to one client, either over a *direct* edge (a client whose cost for the task is
its own: the previous owner or a client with state) or over its subtopology's *pool*, whose flow is then
spread over all clients at the cost of a client without state (the true cost there is never higher).
Two solves minimize, in order, offsets to restore and tasks moved; balance is a hard constraint.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse import coo_array

from assignor.lags import LagIndex, lag_is_caught_up
from assignor.task import TaskId


@dataclass(frozen=True)
class ActiveCosts:
    """What placing each task's active on a client costs: offsets to restore, and whether its owner changes."""

    tasks: Sequence[TaskId]  # sorted
    stateful: frozenset[TaskId]
    process_ids: Sequence[str]  # sorted
    capacity: Mapping[str, int]
    previous_owners: Mapping[TaskId, frozenset[str]]
    lags: LagIndex

    def restore(self, task: TaskId, pid: str | None) -> int:
        """Offsets to replay before the task can run on ``pid`` (None: a client without state)."""
        if task not in self.stateful:
            return 0
        end = self.lags.ends.get(task, 0)
        lag = end if pid is None else self.lags.lag(pid, task)
        if lag_is_caught_up(lag, self.lags.acceptable_recovery_lag):
            return 0
        return end if lag < 0 else lag

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


class _Model:
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

    def var(self, lower: float = 0.0, upper: float = np.inf, integer: bool = True) -> int:
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

    def solve(self, objective: np.ndarray) -> np.ndarray:
        n = len(self.lower)
        matrix = coo_array((self.vals, (self.rows, self.cols)), shape=(len(self.row_lower), n)).tocsr()
        result = milp(
            objective,
            constraints=LinearConstraint(matrix, self.row_lower, self.row_upper),
            integrality=np.array(self.integer),
            bounds=Bounds(np.array(self.lower), np.array(self.upper)),
            options={"mip_rel_gap": 0.0, "presolve": True},
        )
        if result.x is None:  # pragma: no cover - the model is always feasible thanks to its slacks
            raise RuntimeError(f"balanced target model failed: {result.message}")
        return np.asarray(result.x)


def _share(total: int, capacity: int, all_capacity: int) -> tuple[int, int]:
    """Floor and ceiling of a client's capacity-proportional share of ``total``."""
    low, rest = divmod(total * capacity, all_capacity)
    return low, low + (1 if rest else 0)


def solve_active_target(costs: ActiveCosts, *, balance_stateful_alone: bool) -> dict[TaskId, str]:
    """Task -> client of a balanced target minimizing restore offsets, then moves.

    Balanced: every client's count of actives, of stateful actives (with ``balance_stateful_alone``) and of
    each subtopology's actives is the floor or ceiling of its capacity-proportional share. That implies B1
    and B2, equals them when capacities are equal, and is always feasible. The model is a flow network
    (task -> client/subtopology -> client/kind -> client), so HiGHS solves it at the root.
    """
    if not costs.tasks:
        return {}
    model = _Model()
    pids = list(costs.process_ids)
    capacity = costs.capacity
    all_capacity = sum(capacity[p] for p in pids)
    restore_cost: dict[int, float] = {}
    move_cost: dict[int, float] = {}
    into: dict[tuple[str, int], list[tuple[int, float]]] = defaultdict(list)  # (client, subtopology) inflow
    direct: list[tuple[int, TaskId, str]] = []
    pooled: dict[tuple[int, bool], list[tuple[int, TaskId]]] = defaultdict(list)
    kind_of_sub: dict[int, set[bool]] = defaultdict(set)
    for task in costs.tasks:
        is_stateful = task in costs.stateful
        kind_of_sub[task.subtopology].add(is_stateful)
        choice: list[tuple[int, float]] = []
        for pid in costs.direct_candidates(task):
            col = model.var(upper=1)
            restore_cost[col] = costs.restore(task, pid)
            move_cost[col] = costs.move(task, pid)
            direct.append((col, task, pid))
            into[(pid, task.subtopology)].append((col, 1))
            choice.append((col, 1))
        pool_col = model.var(upper=1)
        restore_cost[pool_col] = costs.restore(task, None)
        move_cost[pool_col] = costs.move(task, None)
        pooled[(task.subtopology, is_stateful)].append((pool_col, task))
        choice.append((pool_col, 1))
        model.row(choice, 1, 1)
    spread: dict[tuple[int, bool], dict[str, int]] = {}
    for (sub, is_stateful), members in sorted(pooled.items()):
        columns = {pid: model.var() for pid in pids}
        spread[(sub, is_stateful)] = columns
        model.row([(c, 1) for c in columns.values()] + [(col, -1) for col, _ in members], 0, 0)
        for pid, col in columns.items():
            into[(pid, sub)].append((col, 1))
    # A subtopology mixing stateful and stateless tasks breaks the nesting; then only totals are windowed.
    by_kind = balance_stateful_alone and all(len(kinds) == 1 for kinds in kind_of_sub.values())
    sub_size = {sub: sum(len(m) for (s, _), m in pooled.items() if s == sub) for sub in kind_of_sub}
    stateful_count = len([t for t in costs.tasks if t in costs.stateful])
    for pid in pids:
        kind_terms: dict[bool, list[tuple[int, float]]] = defaultdict(list)
        for sub in sorted(kind_of_sub):
            low, high = _share(sub_size[sub], capacity[pid], all_capacity)
            out = model.var(lower=low, upper=high)
            model.row([*into.get((pid, sub), []), (out, -1)], 0, 0)
            kind_terms[by_kind and True in kind_of_sub[sub]].append((out, 1))
        client_terms: list[tuple[int, float]] = []
        for is_stateful, terms in sorted(kind_terms.items()):
            low, high = _share(stateful_count, capacity[pid], all_capacity) if is_stateful else (0, len(costs.tasks))
            out = model.var(lower=low, upper=high)
            model.row([*terms, (out, -1)], 0, 0)
            client_terms.append((out, 1))
        low, high = _share(len(costs.tasks), capacity[pid], all_capacity)
        model.row(client_terms, low, high)

    n = len(model.lower)
    solution = np.zeros(n)
    for stage, weights in enumerate((restore_cost, move_cost)):
        objective = np.zeros(n)
        for col, weight in weights.items():
            objective[col] = weight
        solution = model.solve(objective)
        if stage == 0:
            # Lock the restore optimum in before minimizing moves (restore offsets are integral).
            best = float(objective @ solution)
            model.row([(c, w) for c, w in restore_cost.items() if w], -np.inf, best + 0.5)

    owner: dict[TaskId, str] = {}
    for col, task, pid in direct:
        if solution[col] > 0.5:
            owner[task] = pid
    for key, members in sorted(pooled.items()):
        waiting = [task for col, task in members if solution[col] > 0.5]
        slots = [pid for pid, col in spread[key].items() for _ in range(round(solution[col]))]
        for task, pid in zip(waiting, slots, strict=True):
            owner[task] = pid
    return owner
