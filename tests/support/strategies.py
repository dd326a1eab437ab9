"""Random consumer groups for property tests: sizes and a seed come from hypothesis, the bulk from the seed."""

from __future__ import annotations

import random

from hypothesis import strategies as st

from assignor import (
    LATEST_OFFSET,
    UNKNOWN_OFFSET_SUM,
    AssignmentConfigs,
    ClientState,
    GroupState,
    TaskId,
)
from assignor.invariants import replica_balance_feasible
from assignor.simulation import catch_up_fully

__all__ = ["replica_balance_feasible"]  # re-exported for the property tests

ZONES = ("eu-1a", "eu-1b", "eu-1c")
RACKS = ("r1", "r2")


class Case:
    """A generated group with the settings to assign it under; shown by the parameters that rebuild it."""

    def __init__(self, group: GroupState, configs: AssignmentConfigs, params: str) -> None:
        self.group = group
        self.configs = configs
        self.params = params

    def __repr__(self) -> str:
        return f"Case({self.params}, configs={self.configs})"


def _offset_sum(rng: random.Random, end: int) -> int | None:
    kind = rng.random()
    if kind < 0.35:
        return None
    if kind < 0.45:
        return UNKNOWN_OFFSET_SUM
    if kind < 0.50:
        return end + rng.randint(1, 50)  # ahead of the log: treated as corrupt
    return max(0, end - rng.choice((0, 1, 50, 9_999, 10_000, 10_001, 40_000, end)))


def build_group(
    rng: random.Random,
    n_clients: int,
    partitions: list[int],
    stateful_flags: list[bool],
    *,
    equal_capacity: bool = False,
    tagged: bool = False,
    with_history: bool = True,
) -> GroupState:
    """A group with random capacities, tags, previous assignment and offset sums."""
    stateful: set[TaskId] = set()
    stateless: set[TaskId] = set()
    for sub, (count, is_stateful) in enumerate(zip(partitions, stateful_flags, strict=True)):
        (stateful if is_stateful else stateless).update(TaskId(sub, p) for p in range(count))
    ends = {t: rng.choice((0, 5_000, 10_000, 20_000, 1_000_000, rng.randint(0, 2_000_000))) for t in stateful}
    pids = [f"p{i:02d}-{rng.randint(0, 999):03d}" for i in range(n_clients)]
    previous_active: dict[str, set[TaskId]] = {p: set() for p in pids}
    previous_standby: dict[str, set[TaskId]] = {p: set() for p in pids}
    if with_history:
        for task in sorted(stateful | stateless):
            if rng.random() < 0.85:
                previous_active[rng.choice(pids)].add(task)
            if task in stateful and rng.random() < 0.4:
                holder = rng.choice(pids)
                if task not in previous_active[holder]:
                    previous_standby[holder].add(task)
    clients = []
    for pid in pids:
        sums: dict[TaskId, int] = {}
        for task in sorted(stateful):
            if task in previous_active[pid]:
                sums[task] = LATEST_OFFSET if rng.random() < 0.9 else ends[task]
            elif with_history:
                value = _offset_sum(rng, ends[task])
                if value is not None:
                    sums[task] = value
        tags = {"zone": rng.choice(ZONES), "rack": rng.choice(RACKS)} if tagged else {}
        clients.append(
            ClientState(
                process_id=pid,
                capacity=1 if equal_capacity else rng.randint(1, 4),
                previous_active=frozenset(previous_active[pid]),
                previous_standby=frozenset(previous_standby[pid]),
                task_offset_sums=sums,
                client_tags=tags,
            )
        )
    return GroupState(clients, frozenset(stateful), frozenset(stateless), ends)


@st.composite
def cases(
    draw: st.DrawFn,
    max_clients: int = 20,
    max_tasks: int = 200,
    equal_capacity: bool = False,
    tags: bool | None = None,
    with_history: bool = True,
) -> Case:
    """A random group (1..max_clients clients, up to max_tasks tasks over 1..4 subtopologies) and configs."""
    n_clients = draw(st.integers(1, max_clients))
    n_subs = draw(st.integers(1, 4))
    partitions = draw(st.lists(st.integers(0, max_tasks // n_subs), min_size=n_subs, max_size=n_subs))
    stateful_flags = draw(st.lists(st.booleans(), min_size=n_subs, max_size=n_subs))
    tagged = draw(st.booleans()) if tags is None else tags
    seed = draw(st.integers(0, 2**32 - 1))
    configs = AssignmentConfigs(
        acceptable_recovery_lag=draw(st.sampled_from((0, 100, 10_000))),
        max_warmup_replicas=draw(st.integers(1, 5)),
        num_standby_replicas=draw(st.integers(0, 3)),
        rack_aware_assignment_tags=("zone", "rack") if tagged else (),
    )
    group = build_group(
        random.Random(seed),
        n_clients,
        partitions,
        stateful_flags,
        equal_capacity=equal_capacity,
        tagged=tagged,
        with_history=with_history,
    )
    params = (
        f"seed={seed}, n_clients={n_clients}, partitions={partitions}, stateful={stateful_flags}, "
        f"equal_capacity={equal_capacity}, tagged={tagged}, with_history={with_history}"
    )
    return Case(group, configs, params)


caught_up_feedback = catch_up_fully


@st.composite
def small_groups(draw: st.DrawFn, max_tasks: int = 6) -> tuple[GroupState, AssignmentConfigs]:
    """Up to ``max_tasks`` tasks on 2-3 clients of any capacity, with 0-1 standbys and a small warmup budget (so
    rounds differ): small enough to list every end state."""
    n_clients = draw(st.integers(2, 3))
    n_subs = draw(st.integers(1, 2))
    partitions = draw(st.lists(st.integers(1, max_tasks // n_subs), min_size=n_subs, max_size=n_subs))
    stateful = draw(st.lists(st.booleans(), min_size=n_subs, max_size=n_subs).filter(any))
    configs = AssignmentConfigs(
        acceptable_recovery_lag=draw(st.sampled_from((0, 10_000))),
        num_standby_replicas=draw(st.integers(0, 1)),
        max_warmup_replicas=draw(st.integers(1, 2)),
    )
    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    group = build_group(rng, n_clients, partitions, stateful, equal_capacity=draw(st.booleans()))
    return group, configs
