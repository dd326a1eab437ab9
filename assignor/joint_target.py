"""The least-restore balanced end state of actives and standbys placed together, as one mixed-integer program.

plan_target places the actives first and the standbys after them. Placing both at once can restore less with the
same moves: a new client may take a standby while a caught-up standby takes the active it would have restored.
The optimum is also the exact least restore of any balanced end state (B1 for actives and for stateful replicas,
B2, ``1 + num.standby.replicas`` copies of each stateful task on distinct clients), so it tightens
``lags.restore_lower_bound`` where that one leaves a gap. Rack tags are not modelled: the bound stays a bound
there, but the planner does not take the solution as a target.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from math import floor

from assignor.assignment import ClientAssignment, GroupAssignment
from assignor.configs import AssignmentConfigs
from assignor.end_state import previous_owners
from assignor.lags import LagIndex, restore_owed
from assignor.state import GroupState
from assignor.target import EXACT_MODEL_NODE_LIMIT, MilpModel
from assignor.task import TaskId

# Restores above 2**52 lose whole offsets in the solver's doubles, so no optimum found would be exact.
LARGEST_EXACT_COST = 2**52


@dataclass(frozen=True)
class JointTarget:
    """The search's answer: ``least_restore`` is proven (no balanced end state restores less); ``target`` is the
    least-restore end state found (then fewest moves), None if none was found within the node limit."""

    least_restore: int
    target: GroupAssignment | None
    optimal: bool


def joint_target(
    group: GroupState, configs: AssignmentConfigs, lags: LagIndex, *, max_moves: int | None = None
) -> JointTarget | None:
    """Least restore, then fewest moves, over balanced end states moving at most ``max_moves`` actives (any number
    when None); None when no balanced end state exists, the restores are too large to solve exactly, or nothing was
    proven within the node limit."""
    clients = [c.process_id for c in group.clients]
    capacity = {c.process_id: c.capacity for c in group.clients}
    stateful = sorted(group.stateful_tasks)
    tasks = sorted(group.all_tasks)
    standbys = min(len(clients) - 1, configs.num_standby_replicas)
    owed = {task: _owed(task, clients, lags) for task in stateful}
    if any(v > LARGEST_EXACT_COST for costs in owed.values() for v in costs.values()):
        return None
    owners = previous_owners(group)
    # A move is an active leaving every client that owned it; staying is rewarded just below one offset, so
    # restore comes first and moves break its ties.
    stay_reward = Fraction(1, len(owners) + 1)
    model = MilpModel()
    objective: list[float] = []
    active: dict[tuple[TaskId, str], int] = {}
    standby: dict[tuple[TaskId, str], int] = {}
    for task in tasks:
        for pid in clients:
            active[(task, pid)] = model.var(0.0, 1.0)
            cost = owed[task][pid] if task in owed else 0
            objective.append(float(cost - (stay_reward if pid in owners.get(task, ()) else 0)))
    for task in stateful:
        for pid in clients:
            standby[(task, pid)] = model.var(0.0, 1.0)
            objective.append(float(owed[task][pid]))
    for task in tasks:
        model.row([(active[(task, pid)], 1.0) for pid in clients], 1.0, 1.0)
    for task in stateful:
        model.row([(standby[(task, pid)], 1.0) for pid in clients], standbys, standbys)
        for pid in clients:
            model.row([(active[(task, pid)], 1.0), (standby[(task, pid)], 1.0)], 0.0, 1.0)
    _within_one_per_capacity(model, objective, {pid: [active[(t, pid)] for t in tasks] for pid in clients}, capacity)
    replicas = {pid: [active[(t, pid)] for t in stateful] + [standby[(t, pid)] for t in stateful] for pid in clients}
    _within_one_per_capacity(model, objective, replicas, capacity)
    _b2(model, objective, group, tasks, clients, capacity, active)
    if max_moves is not None:
        stays = [(active[(t, pid)], 1.0) for t, held in owners.items() for pid in held]
        model.row(stays, float(len(owners) - max_moves), float(len(owners)))
    outcome = model.minimum(objective, EXACT_MODEL_NODE_LIMIT)
    if outcome.solution is None:
        if outcome.lower_bound is None:
            return None
        # The objective is restore less at most one offset of stay rewards, so restore >= bound; doubles round.
        return JointTarget(max(0, floor(outcome.lower_bound) - 1), None, False)
    solution = outcome.solution
    actives = {key for key, col in active.items() if solution[col] > 0.5}
    standbys_chosen = {key for key, col in standby.items() if solution[col] > 0.5}
    target = GroupAssignment(
        {
            pid: ClientAssignment(
                frozenset(t for t in tasks if (t, pid) in actives),
                frozenset(t for t in stateful if (t, pid) in standbys_chosen),
            )
            for pid in clients
        }
    )
    restore = sum(owed[t][pid] for t, pid in actives | standbys_chosen if t in owed)
    if outcome.optimal:
        return JointTarget(restore, target, True)
    proven = 0 if outcome.lower_bound is None else max(0, floor(outcome.lower_bound) - 1)
    return JointTarget(min(proven, restore), target, False)


def _owed(task: TaskId, clients: list[str], lags: LagIndex) -> dict[str, int]:
    end = lags.ends.get(task, 0)
    reported = lags.reported.get(task, {})
    return {pid: restore_owed(reported.get(pid, end), end, lags.acceptable_recovery_lag) for pid in clients}


def _within_one_per_capacity(
    model: MilpModel, objective: list[float], counts: dict[str, list[int]], capacity: dict[str, int]
) -> None:
    """B1: every client's count per unit of capacity lies in [low, low + 1] for one free ``low``."""
    low = model.var(-float(sum(len(c) for c in counts.values())), float(sum(len(c) for c in counts.values())), False)
    objective.append(0.0)
    for pid, columns in counts.items():
        cap = float(capacity[pid])
        model.row([*((col, 1.0) for col in columns), (low, -cap)], 0.0, cap)


def _b2(
    model: MilpModel,
    objective: list[float],
    group: GroupState,
    tasks: list[TaskId],
    clients: list[str],
    capacity: dict[str, int],
    active: dict[tuple[TaskId, str], int],
) -> None:
    """B2: per subtopology and capacity class, active counts within one. A subtopology mixing stateful and
    stateless tasks passes the contract either way, so it is left free (the bound stays a bound)."""
    subtopologies = sorted({t.subtopology for t in tasks})
    for sub in subtopologies:
        members = [t for t in tasks if t.subtopology == sub]
        kinds = {t in group.stateful_tasks for t in members}
        if len(kinds) > 1:
            continue
        for cap in sorted(set(capacity.values())):
            low = model.var(0.0, float(len(members)), False)
            objective.append(0.0)
            for pid in clients:
                if capacity[pid] == cap:
                    model.row([*((active[(t, pid)], 1.0) for t in members), (low, -1.0)], 0.0, 1.0)
