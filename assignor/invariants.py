"""The contract's invariants as checks that list every violation, each prefixed by its name."""

from __future__ import annotations

from collections import Counter, defaultdict
from fractions import Fraction
from typing import TYPE_CHECKING

from assignor.configs import AssignmentConfigs
from assignor.errors import AssignmentError
from assignor.lags import LagIndex
from assignor.state import GroupState
from assignor.task import TaskId

if TYPE_CHECKING:
    from assignor.assignment import GroupAssignment

_MAX_SHOWN = 5


def raise_if(violations: list[str]) -> None:
    """Raise AssignmentError with the violations (first few) when there are any."""
    if violations:
        more = f" (+{len(violations) - _MAX_SHOWN} more)" if len(violations) > _MAX_SHOWN else ""
        raise AssignmentError("; ".join(violations[:_MAX_SHOWN]) + more)


def validity_violations(assignment: GroupAssignment, group: GroupState, configs: AssignmentConfigs) -> list[str]:
    """V1..V4: complete, disjoint, stateless without replicas, standbys and warmups within their rules."""
    found: list[str] = []
    pids = {c.process_id for c in group.clients}
    out = set(assignment.clients)
    if pids - out:
        found.append(f"V1: clients missing from the assignment: {sorted(pids - out)}")
    if out - pids:
        found.append(f"V1: unknown clients in the assignment: {sorted(out - pids)}")
    every_task = group.all_tasks
    active_count: Counter[object] = Counter()
    for pid, ca in assignment.clients.items():
        active_count.update(ca.active)
        unknown = (ca.active | ca.standby | ca.warmup) - every_task
        if unknown:
            found.append(f"V1: client {pid!r} holds unknown tasks {sorted(map(str, unknown))[:_MAX_SHOWN]}")
        for a, b, overlap in (
            ("active", "standby", ca.active & ca.standby),
            ("active", "warmup", ca.active & ca.warmup),
            ("standby", "warmup", ca.standby & ca.warmup),
        ):
            if overlap:
                found.append(f"V2: client {pid!r} holds {sorted(map(str, overlap))[:_MAX_SHOWN]} as {a} and {b}")
        replicas = (ca.standby | ca.warmup) & group.stateless_tasks
        if replicas:
            found.append(f"V3: client {pid!r} holds stateless tasks as replicas: {sorted(map(str, replicas))}")
    for task in sorted(every_task):
        if active_count[task] != 1:
            found.append(f"V1: task {task} is active on {active_count[task]} clients, expected exactly 1")
    expected_standbys = min(len(group.clients) - 1, configs.num_standby_replicas)
    standby_count: Counter[object] = Counter(t for ca in assignment.clients.values() for t in ca.standby)
    for task in sorted(group.stateful_tasks):
        if standby_count[task] != expected_standbys:
            found.append(f"V4: task {task} has {standby_count[task]} standbys, expected {expected_standbys}")
    warmups = sum(len(ca.warmup) for ca in assignment.clients.values())
    if warmups > configs.max_warmup_replicas:
        found.append(f"V4: {warmups} warmups exceed max_warmup_replicas={configs.max_warmup_replicas}")
    if not warmups:
        return found
    lags = LagIndex.of(group, configs)
    for pid, ca in assignment.clients.items():
        for task in sorted(ca.warmup & group.stateful_tasks):
            if lags.caught_up(pid, task):
                found.append(f"V4: warmup of {task} on client {pid!r}, which is already caught up")
    return found


def h1_violations(assignment: GroupAssignment, group: GroupState, configs: AssignmentConfigs) -> list[str]:
    """H1: each stateful active is on a caught-up client if one exists, else on a least-lagging one."""
    found: list[str] = []
    lags = LagIndex.of(group, configs)
    for task, pid in sorted(assignment.active_owners().items()):
        if task not in group.stateful_tasks:
            continue
        best = lags.best_rank(task)
        # Any caught-up client will do; without one, only a least-lagging client will.
        if (best[0] == 0 and not lags.caught_up(pid, task)) or (best[0] == 1 and lags.rank(pid, task) > best):
            found.append(
                f"H1: task {task} is active on {pid!r} with lag {lags.lag(pid, task)}, "
                f"but a more caught-up client exists (best rank {lags.best_rank(task)})"
            )
    return found


def _spread_violation(name: str, what: str, loads: dict[str, Fraction]) -> list[str]:
    if len(loads) < 2:
        return []
    high = max(loads, key=lambda p: (loads[p], p))
    low = min(loads, key=lambda p: (loads[p], p))
    if loads[high] - loads[low] > 1:
        return [f"{name}: {what} per capacity is {loads[high]} on {high!r} but {loads[low]} on {low!r}"]
    return []


def balance_violations(
    assignment: GroupAssignment, group: GroupState, *, replicas: bool = True, first_only: bool = False
) -> list[str]:
    """B1 and B2 (meant for assignments that need no probing rebalance); with ``first_only``, only the first rule
    found broken (for a yes/no answer: B2 counts every active of every client per subtopology)."""
    capacity = {c.process_id: c.capacity for c in group.clients}
    found = _spread_violation(
        "B1",
        "active tasks",
        {pid: Fraction(len(ca.active), capacity[pid]) for pid, ca in assignment.clients.items()},
    )
    if found and first_only:
        return found
    if replicas:
        stateful = group.stateful_tasks
        found += _spread_violation(
            "B1",
            "stateful actives and standbys",
            {
                pid: Fraction(len(ca.active & stateful) + len(ca.standby), capacity[pid])
                for pid, ca in assignment.clients.items()
            },
        )
        if found and first_only:
            return found
    found += _b2_violations(assignment, group, capacity)
    return found


def replica_balance_feasible(group: GroupState, configs: AssignmentConfigs) -> bool:
    """Whether B1 over stateful actives plus standbys can hold: no client's capacity share exceeds one copy of every
    stateful task."""
    n = len(group.clients)
    replicas = len(group.stateful_tasks) * (1 + min(n - 1, configs.num_standby_replicas))
    total = sum(c.capacity for c in group.clients)
    return all(-(-replicas * c.capacity // total) <= len(group.stateful_tasks) for c in group.clients)


def target_balance_violations(target: GroupAssignment, group: GroupState, configs: AssignmentConfigs) -> list[str]:
    """B1 and B2 as a plan's target must meet them: B1 over stateful replicas too wherever that can hold."""
    return balance_violations(target, group, replicas=replica_balance_feasible(group, configs))


def _b2_violations(assignment: GroupAssignment, group: GroupState, capacity: dict[str, int]) -> list[str]:
    """B2 per subtopology and capacity class; one that mixes stateful and stateless tasks passes when either its
    stateful actives alone or all its actives are spread within one."""
    subtopologies = sorted({t.subtopology for t in group.all_tasks})
    with_state = {t.subtopology for t in group.stateful_tasks}
    every: dict[tuple[int, int], dict[str, int]] = defaultdict(dict)
    stateful: dict[tuple[int, int], dict[str, int]] = defaultdict(dict)
    for pid, ca in assignment.clients.items():
        for sub in subtopologies:
            every[(sub, capacity[pid])][pid] = 0
            stateful[(sub, capacity[pid])][pid] = 0
        for task in ca.active:
            every[(task.subtopology, capacity[pid])][pid] += 1
            if task in group.stateful_tasks:
                stateful[(task.subtopology, capacity[pid])][pid] += 1
    found = []
    for (sub, cap), counts in sorted(every.items()):
        if max(counts.values()) - min(counts.values()) <= 1:
            continue
        alone = stateful[(sub, cap)].values()
        if sub in with_state and max(alone) - min(alone) <= 1:
            continue
        found.append(f"B2: subtopology {sub} active counts differ by more than 1 among capacity-{cap} clients")
    return found


def k1_violations(assignment: GroupAssignment, group: GroupState, configs: AssignmentConfigs) -> list[str]:
    """K1: each stateful task keeps min(c, 1 + num_standby_replicas) replicas on its c caught-up clients.

    Caught up means caught up in ``group``, the input of the rebalance that returned ``assignment``.
    """
    found: list[str] = []
    lags = LagIndex.of(group, configs)
    holders: dict[TaskId, set[str]] = defaultdict(set)
    for pid, ca in assignment.clients.items():
        for task in (ca.active | ca.standby | ca.warmup) & group.stateful_tasks:
            holders[task].add(pid)
    copies = 1 + configs.num_standby_replicas
    for task in sorted(group.stateful_tasks):
        caught_up = set(lags.caught_up_clients(task))
        wanted = min(len(caught_up), copies)
        kept = len(holders[task] & caught_up)
        if kept < wanted:
            without = sorted(caught_up - holders[task])
            found.append(
                f"K1: task {task} keeps {kept} replicas on caught-up clients, expected {wanted}; "
                f"caught-up clients left without a copy: {without[:_MAX_SHOWN]}"
            )
    return found


def repeated_tag_values(assignment: GroupAssignment, group: GroupState, tag_keys: tuple[str, ...]) -> int:
    """How far the stateful tasks' replicas (active and standbys) fall short of distinct rack tag values: per task and
    tag key, replicas minus the distinct values they sit on (KIP-708's spread; 0 when every copy is on its own)."""
    tags = {c.process_id: c.client_tags for c in group.clients}
    holders: dict[TaskId, list[str]] = defaultdict(list)
    for pid, ca in assignment.clients.items():
        for task in (ca.active | ca.standby) & group.stateful_tasks:
            holders[task].append(pid)
    return sum(len(pids) - len({tags[p].get(key) for p in pids}) for pids in holders.values() for key in tag_keys)
