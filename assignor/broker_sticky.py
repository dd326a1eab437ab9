"""The broker's sticky target (KIP-1071 StickyTaskAssignor): per-member quotas, previous owners first, lag-blind."""

# Modelled on the newest stored StickyTaskAssignor of apache/kafka's group coordinator (stateful and stateless
# actives balanced in separate passes; previous standbys, warmups and on-disk offsets as standby candidates; rack
# diversity before stickiness for standbys). Simplified: Java breaks load ties in hash order, we by process id and
# member index; subtopologies sort numerically (the broker's ids are strings); RackAwareStandbyPicker's tag tree is
# reduced to "add a tag value the task's holders lack, higher-priority keys first".

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from assignor.assignment import GroupAssignment
from assignor.candidates import Candidates, least_loaded
from assignor.configs import AssignmentConfigs
from assignor.lags import LagIndex
from assignor.placement import Placement
from assignor.state import GroupState
from assignor.task import LATEST_OFFSET, UNKNOWN_OFFSET_SUM, TaskId

Member = tuple[str, int]  # (process id, member index): the broker sees one member per stream thread

_PREVIOUS_ACTIVE, _PREVIOUS_STANDBY, _NOT_PREVIOUS = 0, 1, 2


def _ceil_div(tasks: int, members: int) -> int:
    return -(-tasks // members) if members > 0 else 0


def previous_active_holders(group: GroupState, lags: LagIndex) -> dict[TaskId, str]:
    """Task -> the one client that ran it before; if several claim it, a caught-up one first, then by process id."""
    claims: dict[TaskId, list[str]] = {}
    for client in group.clients:
        for task in client.previous_active:
            claims.setdefault(task, []).append(client.process_id)
    return {
        task: min(pids, key=lambda p: (task in group.stateful_tasks and not lags.caught_up(p, task), p))
        for task, pids in claims.items()
    }


class _Quota:
    """A per-member ceiling that is recomputed over the rest whenever a member fills it (tasksPerMember)."""

    def __init__(self, tasks: int, members: int) -> None:
        self.tasks = tasks
        self.members = members
        self.per_member = _ceil_div(tasks, members)

    def filled(self, count: int) -> None:
        """Record that some member now holds ``count`` tasks."""
        if count == self.per_member:
            self.members -= 1
            self.tasks -= count
            self.per_member = _ceil_div(self.tasks, self.members)


def _repeats(tags: Mapping[str, str], tag_keys: Sequence[str], used: Sequence[set[str | None]]) -> tuple[bool, ...]:
    """Per tag key, whether a process with these tags adds no new value for it (missing tags add nothing)."""
    return tuple(tags.get(k) is None or tags[k] in u for k, u in zip(tag_keys, used, strict=True))


class _StickyTarget:
    """Working state of one sticky assignment; never escapes sticky_target()."""

    def __init__(self, group: GroupState, configs: AssignmentConfigs, lags: LagIndex) -> None:
        clients = sorted(group.clients, key=lambda c: c.process_id)
        # A process is the broker's ProcessState: ``capacity`` members; its load is every task it holds per member.
        self.placement = Placement(group)
        self.counts = {c.process_id: [0] * c.capacity for c in clients}  # tasks per member
        self.stateless_active = dict.fromkeys(self.placement.process_ids, 0)
        self.replicas = configs.num_standby_replicas
        stateful, stateless = len(group.stateful_tasks), len(group.stateless_tasks)
        members = sum(c.capacity for c in clients)
        self.stateful_quota = _Quota(stateful, members)
        self.active_quota = _Quota(stateful + stateless, members)
        self.total_quota = _Quota(stateful * (1 + self.replicas) + stateless, members)
        self.previous_active: dict[TaskId, Member] = {}
        self.standby_candidates: dict[TaskId, list[Member]] = {}
        self._index_history(group, lags)

    def _index_history(self, group: GroupState, lags: LagIndex) -> None:
        # The broker knows which member held what; we only know the process, so a process's previous tasks are
        # dealt round-robin over its members, as evenly as the broker's own previous assignment would have been.
        holders = previous_active_holders(group, lags)
        ranked: dict[TaskId, list[tuple[int, int, str, Member]]] = {}
        for client in sorted(group.clients, key=lambda c: c.process_id):
            pid, cycle = client.process_id, 0
            held = client.previous_active | client.previous_standby
            actives = sorted(client.previous_active, key=lambda t: (t not in group.stateful_tasks, t))
            for task in actives:
                member = (pid, cycle % client.capacity)
                cycle += 1
                if holders.get(task) == pid:
                    self.previous_active[task] = member
                elif task in group.stateful_tasks:  # a second claimant still has the state: a standby candidate
                    ranked.setdefault(task, []).append((0, self._staleness(lags, pid, task), pid, member))
            for task in sorted(client.previous_standby & group.stateful_tasks - client.previous_active):
                ranked.setdefault(task, []).append(
                    (0, self._staleness(lags, pid, task), pid, (pid, cycle % client.capacity))
                )
                cycle += 1
            # State left on disk without a role makes a weaker candidate, so stickiness can hand it back.
            for task in sorted(set(client.task_offset_sums) & group.stateful_tasks - held):
                ranked.setdefault(task, []).append(
                    (1, self._staleness(lags, pid, task), pid, (pid, cycle % client.capacity))
                )
                cycle += 1
        self.standby_candidates = {task: [entry[3] for entry in sorted(entries)] for task, entries in ranked.items()}

    @staticmethod
    def _staleness(lags: LagIndex, pid: str, task: TaskId) -> int:
        """Rank key for candidates, most caught-up first; an unknown offset counts as no state (the broker's 0)."""
        lag = lags.lag(pid, task)
        if lag == LATEST_OFFSET:
            return -1
        return lags.ends.get(task, 0) if lag == UNKNOWN_OFFSET_SUM else lag

    def _add(self, member: Member, task: TaskId, *, active: bool, stateful: bool = True) -> None:
        pid, index = member
        if active:
            self.placement.assign_active(pid, task)
            self.stateless_active[pid] += not stateful
        else:
            self.placement.standby[pid].add(task)
        self.counts[pid][index] += 1
        count = self.counts[pid][index]
        if active and stateful:
            self.stateful_quota.filled(count)
        if active:
            self.active_quota.filled(count)
        self.total_quota.filled(count)

    def _count(self, member: Member) -> int:
        return self.counts[member[0]][member[1]]

    def _least_loaded_member(self, pid: str) -> Member:
        """The process's member (stream thread) with the fewest tasks, ties by member index."""
        counts = self.counts[pid]
        return pid, min(range(len(counts)), key=lambda i: (counts[i], i))

    def _least_loaded_previous(self, candidates: Sequence[Member], without: TaskId | None) -> Member | None:
        """The first candidate, replaced only by one whose process and member are both strictly less loaded."""
        best: Member | None = None
        best_loads = (0.0, 0)
        for member in candidates:
            if without is not None and self.placement.holds(member[0], without):
                continue
            loads = (self.placement.assigned_load(member[0]), self._count(member))
            if best is None or (loads[0] < best_loads[0] and loads[1] < best_loads[1]):
                best, best_loads = member, loads
        return best

    def assign_actives(self, tasks: Iterable[TaskId], *, stateful: bool) -> None:
        """Previous owner within quota, then a previous standby within quota, then the least-loaded process."""
        quota = self.stateful_quota if stateful else self.active_quota
        pending = sorted(tasks, key=lambda t: (t.partition, t.subtopology))
        for step in ("previous active", "previous standby"):
            rest = []
            for task in pending:
                if step == "previous active":
                    member = self.previous_active.get(task)
                else:
                    member = self._least_loaded_previous(self.standby_candidates.get(task, ()), None)
                # The quota reads a member's whole task count: during the stateful pass that is its stateful actives.
                if member is not None and self._count(member) < quota.per_member:
                    self._add(member, task, active=True, stateful=stateful)
                else:
                    rest.append(task)
            pending = rest
        placement, capacity = self.placement, self.placement.capacity
        processes = Candidates(
            lambda p: (placement.assigned_load(p), self.stateless_active[p] / capacity[p]), placement.process_ids
        )
        for task in sorted(pending):
            pid = processes.poll(task)
            if pid is None:  # pragma: no cover - every process waits again after taking a task
                break
            self._add(self._least_loaded_member(pid), task, active=True, stateful=stateful)
            processes.offer(pid)

    def assign_standbys(self, tasks: Iterable[TaskId], tag_keys: Sequence[str]) -> None:
        """Rack diversity first (with tags), then previous holders within quota, then the least-loaded process."""
        to_least_loaded: list[tuple[TaskId, int]] = []
        for task in sorted(tasks, key=lambda t: (t.partition, t.subtopology), reverse=True):
            placed = self._rack_aware_standbys(task, tag_keys) if tag_keys else 0
            self._sticky_standbys(task, placed, to_least_loaded)
        placement = self.placement
        processes = Candidates(placement.assigned_load, placement.process_ids, lambda p, t: not placement.holds(p, t))
        for task, remaining in sorted(to_least_loaded, reverse=True):
            for _ in range(remaining):
                pid = processes.poll(task)
                if pid is None:
                    break  # fewer processes than replicas: the broker logs and places fewer
                self._add(self._least_loaded_member(pid), task, active=False)
                processes.offer(pid)

    def _sticky_standbys(self, task: TaskId, first: int, to_least_loaded: list[tuple[TaskId, int]]) -> None:
        for i in range(first, self.replicas):
            member = self.previous_active.get(task)
            if (
                member is not None
                and not self.placement.holds(member[0], task)
                and self._count(member) < self.total_quota.per_member
            ):
                self._add(member, task, active=False)
                continue
            member = self._least_loaded_previous(self.standby_candidates.get(task, ()), task)
            if member is not None and self._count(member) < self.total_quota.per_member:
                self._add(member, task, active=False)
                continue
            to_least_loaded.append((task, self.replicas - i))
            return

    def _rack_aware_standbys(self, task: TaskId, tag_keys: Sequence[str]) -> int:
        """Standbys on processes that add a tag value the task's holders lack, higher-priority keys first."""
        ranks = {m[0]: _PREVIOUS_STANDBY for m in self.standby_candidates.get(task, ())}
        previous = self.previous_active.get(task)
        if previous is not None:
            ranks[previous[0]] = _PREVIOUS_ACTIVE
        placed = 0
        while placed < self.replicas:
            best = self._most_diverse(task, tag_keys, ranks)
            if best is None:
                break  # nobody makes the task more diverse: the sticky pass places the rest
            self._add(self._least_loaded_member(best), task, active=False)
            placed += 1
        return placed

    def _most_diverse(self, task: TaskId, tag_keys: Sequence[str], ranks: Mapping[str, int]) -> str | None:
        """The process within quota that adds the most wanted tag values, then the stickiest, then least loaded;
        None if none adds any."""
        placement, tags = self.placement, self.placement.tags
        holders = [p for p in placement.process_ids if placement.holds(p, task)]
        used = [{tags[h].get(key) for h in holders} for key in tag_keys]
        best = least_loaded(
            lambda p: (_repeats(tags[p], tag_keys, used), ranks.get(p, _NOT_PREVIOUS), placement.assigned_load(p)),
            [
                p
                for p in placement.process_ids
                if not placement.holds(p, task) and min(self.counts[p]) < self.total_quota.per_member
            ],
        )
        if best is None or all(_repeats(tags[best], tag_keys, used)):
            return None
        return best

    def freeze(self) -> GroupAssignment:
        return self.placement.freeze(probing_rebalance_needed=False)


def sticky_target(group: GroupState, configs: AssignmentConfigs, lags: LagIndex) -> GroupAssignment:
    """Stateful actives, then stateless actives, then standbys, each sticky within per-member quotas."""
    target = _StickyTarget(group, configs, lags)
    target.assign_actives(group.stateful_tasks, stateful=True)
    target.assign_actives(group.stateless_tasks, stateful=False)
    if configs.num_standby_replicas > 0:
        target.assign_standbys(group.stateful_tasks, configs.rack_aware_assignment_tags)
    return target.freeze()
