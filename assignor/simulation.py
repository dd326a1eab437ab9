"""Replay rebalances until an assignor stops asking for probing rebalances, modelling how replicas catch up."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from assignor.assignment import GroupAssignment, Role
from assignor.catch_up import (
    CatchUpModel,
    FullCatchUp,
    RestoreRate,
    catch_up_fully,
    checkpoint,
    restore_replicas,
)
from assignor.configs import AssignmentConfigs
from assignor.high_availability import assign_high_availability
from assignor.state import ClientState, GroupState
from assignor.task import TaskId

__all__ = [
    "Assignor",
    "CatchUpModel",
    "FullCatchUp",
    "MembershipEvent",
    "RestoreRate",
    "Round",
    "Scenario",
    "SimulationResult",
    "catch_up_fully",
    "simulate",
]

Assignor = Callable[[GroupState, AssignmentConfigs], GroupAssignment]
EventKind = Literal["add", "remove", "restart"]


@dataclass(frozen=True)
class MembershipEvent:
    """A change of membership applied just before the rebalance of round ``at_round``."""

    at_round: int
    kind: EventKind
    process_id: str
    capacity: int = 1
    client_tags: Mapping[str, str] = field(default_factory=dict)
    wipe_state: bool = False  # restart only: the instance comes back with an empty state directory

    def __post_init__(self) -> None:
        if self.kind not in ("add", "remove", "restart"):
            raise ValueError(f"MembershipEvent.kind must be add, remove or restart, got {self.kind!r}")
        if self.at_round < 0:
            raise ValueError(f"MembershipEvent.at_round must be >= 0, got {self.at_round}")


@dataclass(frozen=True)
class Scenario:
    """A starting group, settings, membership events and a catch-up model."""

    name: str
    group: GroupState
    configs: AssignmentConfigs
    events: tuple[MembershipEvent, ...] = ()
    catch_up: CatchUpModel = field(default_factory=FullCatchUp)
    changelog_growth_per_round: int = 0
    max_rounds: int = 100
    description: str = ""


@dataclass(frozen=True)
class Round:
    """One rebalance: its input, its output and what it cost."""

    index: int
    group: GroupState
    assignment: GroupAssignment
    moves: int  # actives whose owner changed since the previous assignment
    warmups: int
    restored_offsets: int  # offsets replayed between this rebalance and the next
    events: tuple[MembershipEvent, ...]


@dataclass(frozen=True)
class SimulationResult:
    """Every round of a simulation and whether it ended with no probing rebalance pending."""

    scenario: str
    rounds: tuple[Round, ...]
    converged: bool
    probing_interval_ms: int
    final_group: GroupState  # what the next rebalance would see: the last assignment, caught up per the model

    @property
    def total_moves(self) -> int:
        return sum(r.moves for r in self.rounds)

    @property
    def total_warmups(self) -> int:
        return sum(r.warmups for r in self.rounds)

    @property
    def total_restored_offsets(self) -> int:
        return sum(r.restored_offsets for r in self.rounds)

    def rounds_after(self, at_round: int) -> int:
        """How many rebalances happened from round ``at_round`` on (to measure convergence after an event)."""
        return sum(1 for r in self.rounds if r.index >= at_round)


def _apply_event(clients: dict[str, ClientState], event: MembershipEvent, ends: Mapping[TaskId, int]) -> None:
    pid = event.process_id
    if event.kind == "add":
        if pid in clients:
            raise ValueError(f"event add: process {pid!r} is already in the group")
        clients[pid] = ClientState(pid, capacity=event.capacity, client_tags=event.client_tags)
        return
    if pid not in clients:
        raise ValueError(f"event {event.kind}: process {pid!r} is not in the group")
    if event.kind == "remove":
        del clients[pid]
        return
    old = clients[pid]
    # After a restart nothing runs yet: state on disk reports checkpointed offsets, not LATEST_OFFSET.
    sums = {} if event.wipe_state else {t: checkpoint(s, ends.get(t, 0)) for t, s in old.task_offset_sums.items()}
    clients[pid] = ClientState(pid, capacity=old.capacity, client_tags=old.client_tags, task_offset_sums=sums)


def simulate(scenario: Scenario, assignor: Assignor = assign_high_availability) -> SimulationResult:
    """Run rebalances until no probing rebalance is needed and no event is pending (or max_rounds)."""
    group = scenario.group
    configs = scenario.configs
    clients = {c.process_id: c for c in group.clients}
    ends = dict(group.changelog_end_offset_sums)
    events = sorted(scenario.events, key=lambda e: (e.at_round, e.process_id))
    interval_s = configs.probing_rebalance_interval_ms / 1000
    rounds: list[Round] = []
    index = 0
    converged = False
    while len(rounds) < scenario.max_rounds:
        due = tuple(e for e in events if e.at_round == index)
        for event in due:
            _apply_event(clients, event, ends)
        current = replace(group, clients=tuple(clients[p] for p in sorted(clients)), changelog_end_offset_sums=ends)
        assignment = assignor(current, configs)
        before = {t: c.process_id for c in current.clients for t in c.previous_active}
        moves = sum(1 for t, p in assignment.active_owners().items() if t in before and before[t] != p)
        stopped_at = ends
        ends = {t: e + scenario.changelog_growth_per_round for t, e in ends.items()}
        budget = None if isinstance(scenario.catch_up, FullCatchUp) else scenario.catch_up.offsets_per_second
        restored_total = 0
        for pid, ca in assignment.clients.items():
            held = [(t, role) for role in (Role.ACTIVE, Role.WARMUP, Role.STANDBY) for t in sorted(ca.tasks(role))]
            sums, restored = restore_replicas(
                clients[pid],
                held,
                stopped_at,
                ends,
                current.stateful_tasks,
                None if budget is None else budget * interval_s,
            )
            restored_total += restored
            clients[pid] = replace(
                clients[pid],
                previous_active=ca.active,
                previous_standby=ca.standby | ca.warmup,
                task_offset_sums=sums,
            )
        rounds.append(Round(index, current, assignment, moves, assignment.count(Role.WARMUP), restored_total, due))
        if not assignment.probing_rebalance_needed:
            pending = [e.at_round for e in events if e.at_round > index]
            if not pending:
                converged = True
                break
            index = min(pending)
        else:
            index += 1
    final = replace(group, clients=tuple(clients[p] for p in sorted(clients)), changelog_end_offset_sums=ends)
    return SimulationResult(scenario.name, tuple(rounds), converged, configs.probing_rebalance_interval_ms, final)
