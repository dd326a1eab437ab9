"""Kafka's broker-side Streams group assignment (KIP-1071): a sticky target, migrations staged behind warmups.

Modelled on apache/kafka trunk (Kafka 4.3/4.4 development line) in the group coordinator:
``streams/assignor/StickyTaskAssignor`` (the target, see assignor.broker_sticky) and
``streams/AssignmentRefinerImpl`` at commit 0955dcbfdc1c45f4e7e9fe8fcd38ec34851c102b (the warmups, here).
"""

# Where the model simplifies, and why:
# * One ClientState is one process; the broker's per-member moves inside a process are invisible here (the broker
#   grants those at once anyway). So a standby on a sibling member ("sibling move") and on the target member
#   ("borrow") look alike, and since simulate() reports warmups back as previous standbys, any restoring copy on
#   the target's process counts as an in-flight warmup: it keeps its slot, where the broker would borrow a real
#   standby for free.
# * The broker grants a move when the target's process holds a caught-up standby or warmup; our clients also report
#   lags for state on disk, which the broker only learns from the next offset report, so that round is collapsed
#   (this also keeps V4: no warmup on a caught-up client).
# * Caught up means the contract's lag rule (LagIndex), also for the current active holder; the broker reads an
#   active that reports no offsets as running.
# * The broker recomputes its sticky target only when the group epoch bumps (membership, topology, configs) and
#   re-refines toward it on every offset report; this pure function recomputes both on every call. Actives and the
#   probing flag are stable under that; standbys may be re-placed when a settled group is fed back.

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from assignor.assignment import ClientAssignment, GroupAssignment
from assignor.broker_sticky import previous_active_holders, sticky_target
from assignor.configs import AssignmentConfigs
from assignor.lags import LagIndex
from assignor.state import GroupState
from assignor.task import LATEST_OFFSET, UNKNOWN_OFFSET_SUM, TaskId


@dataclass(frozen=True)
class _StagedMigration:
    """A task kept on ``current`` (a caught-up holder) although the target wants it on ``target``."""

    task: TaskId
    current: str
    target: str
    in_flight: bool  # the target's process already holds a copy that is still restoring (a warmup to keep)
    restored_something: bool


class _History:
    """What the clients held before this assignment, indexed by task (the refiner's CurrentAssignmentIndex)."""

    def __init__(self, group: GroupState, lags: LagIndex) -> None:
        stateful = group.stateful_tasks
        self.holder = {t: p for t, p in previous_active_holders(group, lags).items() if t in stateful}
        self.copies: dict[TaskId, set[str]] = {}
        self.on_disk: dict[str, frozenset[TaskId]] = {}
        self.reported: dict[str, Mapping[TaskId, int]] = {}
        self.restoring_an_active: set[str] = set()
        held_count: dict[str, int] = {}
        for client in group.clients:
            pid = client.process_id
            held = (client.previous_active | client.previous_standby) & stateful
            for task in held:
                if self.holder.get(task) != pid:
                    self.copies.setdefault(task, set()).add(pid)
            self.on_disk[pid] = frozenset(client.task_offset_sums) & stateful - held
            self.reported[pid] = client.task_offset_sums
            held_count[pid] = len(held)
            # A running active reports LATEST_OFFSET; any other report means it is still restoring.
            if any(client.task_offset_sums.get(t, LATEST_OFFSET) != LATEST_OFFSET for t in client.previous_active):
                self.restoring_an_active.add(pid)
        self.capacity = {c.process_id: c.capacity for c in group.clients}
        self.held_count = held_count

    def has_copy(self, pid: str, task: TaskId) -> bool:
        return pid in self.copies.get(task, ())


def _decide(
    target: GroupAssignment, history: _History, lags: LagIndex, stateful: frozenset[TaskId]
) -> tuple[list[_StagedMigration], list[TaskId]]:
    """Per stateful task off its target owner: grant the move now, or stage it on a caught-up holder."""
    owners = target.active_owners()
    designated = {t: {p for p, ca in target.clients.items() if t in ca.standby} for t in stateful}
    staged: list[_StagedMigration] = []
    granted: list[TaskId] = []
    for task in sorted(stateful):
        owner, holder = owners[task], history.holder.get(task)
        if holder == owner:
            continue
        # The broker grants when the target's process holds a caught-up copy; our clients also report lags for
        # state on disk, which the broker learns one offset report later, so that round is collapsed here.
        if lags.caught_up(owner, task):
            granted.append(task)
            continue
        current: str | None
        if holder is not None and lags.caught_up(holder, task):
            current = holder
        elif holder is None and task in history.on_disk[owner]:
            current = None  # the target reopens its own state directory rather than detour via a copy
        else:
            caught_up_copies = [p for p in history.copies.get(task, ()) if p != owner and lags.caught_up(p, task)]
            current = min(
                caught_up_copies,
                key=lambda p: (p in designated[task], history.held_count[p] / history.capacity[p], p),
                default=None,
            )
        if current is None:
            granted.append(task)  # nothing caught up to keep it running: the target restores it cold
            continue
        reported = history.reported[owner].get(task)
        staged.append(
            _StagedMigration(
                task,
                current,
                owner,
                in_flight=history.has_copy(owner, task),
                restored_something=reported is not None and reported != UNKNOWN_OFFSET_SUM,
            )
        )
    return staged, granted


def _fund_warmups(
    staged: list[_StagedMigration],
    held: Mapping[str, int],
    capacity: Mapping[str, int],
    restoring: set[str],
    budget: int,
) -> dict[TaskId, str]:
    """Spend max_warmup_replicas on staged migrations: in-flight warmups, then new ones, least-loaded targets first."""
    new_warmups: dict[str, int] = {}

    def per_member(pid: str) -> float:
        return (held[pid] + new_warmups.get(pid, 0)) / capacity[pid]

    def tier(m: _StagedMigration) -> int:
        # A warmup on a process that restores an active makes no progress there, so it waits its turn; one that
        # restored something keeps its place, or that work would be thrown away.
        can_progress = m.target not in restoring
        if m.in_flight:
            return 0 if can_progress or m.restored_something else 2
        return 1 if can_progress else 3

    candidates = list(staged)
    funded: dict[TaskId, str] = {}
    while len(funded) < budget and candidates:
        # Relieving the busier current process first (-per_member) batches one process's relief together.
        best = min(candidates, key=lambda m: (tier(m), per_member(m.target), -per_member(m.current), m.task))
        candidates.remove(best)
        funded[best.task] = best.target
        if not best.in_flight:
            new_warmups[best.target] = new_warmups.get(best.target, 0) + 1
    return funded


def _grant_loads(granted: list[TaskId], target: GroupAssignment, history: _History) -> tuple[set[str], dict[str, int]]:
    """Processes a grant makes restore an active, and the held counts once every grant is applied."""
    owners = target.active_owners()
    restoring = set(history.restoring_an_active)
    held = dict(history.held_count)
    for task in granted:
        holder, owner = history.holder.get(task), owners[task]
        if holder is not None:
            held[holder] -= 1
        if not history.has_copy(owner, task):
            held[owner] += 1
            restoring.add(owner)
    return restoring, held


def assign_streams_broker(group: GroupState, configs: AssignmentConfigs) -> GroupAssignment:
    """What a Kafka 4.x group coordinator assigns a streams group: sticky target, moves staged behind warmups.

    One input client is one process (``process_id``) running ``capacity`` members, one per stream thread: the
    broker balances by member, so a process's share grows with its threads. The target is lag-blind (previous
    owners and standbys first, within per-member quotas; see assignor.broker_sticky). A stateful task whose target
    owner is not caught up stays on its caught-up holder (or a caught-up standby is promoted) and the target owner
    gets a warmup, at most ``max_warmup_replicas`` (``group.streams.num.warmup.replicas``, default 2) in the group;
    unfunded moves wait in place. ``probing_rebalance_needed`` is true while any move waits: the broker re-refines on
    every offset report (``group.streams.task.offset.interval.ms``, 60 s) rather than on a probing rebalance.
    Always V1-V3 and V4's warmup rules; V4's standby count only once nothing waits (a standby placed on the process
    that keeps a waiting active is held back). Not guaranteed: H1 (with no caught-up holder or copy the target
    restores cold even if another client has caught-up state on disk), B2 (stickiness keeps skewed subtopologies),
    K1 (a target that drops a caught-up standby drops it at once) and B1 for actives plus standbys (the shrinking
    per-member quotas leave some processes heavier); B1 for actives held in our tests but is not proven.
    """
    lags = LagIndex.of(group, configs)
    target = sticky_target(group, configs, lags)
    history = _History(group, lags)
    staged, granted = _decide(target, history, lags, group.stateful_tasks)
    if not staged:
        return target
    restoring, held = _grant_loads(granted, target, history)
    funded = _fund_warmups(staged, held, history.capacity, restoring, configs.max_warmup_replicas)
    active = {pid: set(ca.active) for pid, ca in target.clients.items()}
    standby = {pid: set(ca.standby) for pid, ca in target.clients.items()}
    for migration in staged:
        active[migration.target].discard(migration.task)
        active[migration.current].add(migration.task)
        standby[migration.current].discard(migration.task)  # one process cannot hold a task twice
    return GroupAssignment(
        clients={
            pid: ClientAssignment(
                active=frozenset(active[pid]),
                standby=frozenset(standby[pid]),
                warmup=frozenset(t for t, p in funded.items() if p == pid),
            )
            for pid in active
        },
        probing_rebalance_needed=True,
    )
