"""State reports of Kafka Streams groups that run neither our runtime nor our plugin, made from the broker's group
metadata: each member's subscription and assignment user data (pure Python; the reading is in group_metadata.py).

What the metadata says for certain: process ids, threads per process (members sharing a process id), offset sums
(only stateful tasks have them: Kafka Streams leaves stateless tasks out), active tasks and their source
partitions (the assignment's active list is parallel to the sorted assigned partitions), standby tasks and their
changelog partitions. What it does not say, and is derived here with less certainty: which changelog topics
belong to a subtopology that has no standby anywhere (matched by Kafka Streams' naming,
``<application.id>-<store>-changelog``, and by partition count), and warmups (Kafka sends them as standbys).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from assignor.protocol.reported_settings import GroupProtocol, ReportedSettings
from assignor.protocol.state_report import ReportOrigin, StateReport, SubtopologyReport
from assignor.protocol.streams_assignment import StreamsAssignment, decode_assignment
from assignor.protocol.streams_subscription import StreamsSubscription, StreamsUserDataError, decode_subscription
from assignor.task import LATEST_OFFSET, TaskId
from jobs.pipeline.intake import Quarantined

GROUP_METADATA = str(ReportOrigin.GROUP_METADATA)  # the reports' origin, and the quarantine source of bad members
STREAMS_PROTOCOL = "stream"  # Kafka Streams' assignor protocol name in a classic consumer group
MALFORMED_USER_DATA = "malformed_user_data"


@dataclass(frozen=True)
class StreamsMember:
    """One member of a classic ``stream``-protocol group as the broker describes it; ``error`` when its consumer
    protocol envelope did not decode (then the user data fields are empty)."""

    group_id: str
    member_id: str
    client_id: str
    client_host: str
    subscription_user_data: bytes
    assignment_user_data: bytes  # empty while the group rebalances
    assigned: tuple[tuple[str, int], ...]  # (topic, partition), as listed in the consumer protocol assignment
    generation: int  # the consumer protocol subscription's generation (-1 when it carries none)
    error: str | None = None


@dataclass(frozen=True)
class StreamsGroupRead:
    """What a Streams group's metadata gives: one report per process (JSON, keyed like the reports topic) and the
    members that could not be read, with why."""

    reports: tuple[tuple[bytes, bytes], ...]
    quarantine: tuple[Quarantined, ...]
    processes: Mapping[str, str]  # member id -> the process id it reported, for the members that decoded


@dataclass(frozen=True)
class _Decoded:
    member: StreamsMember
    subscription: StreamsSubscription
    assignment: StreamsAssignment | None
    sources: Mapping[TaskId, frozenset[str]]  # active task -> its assigned source topics


def _quarantine(member: StreamsMember, reason: str) -> Quarantined:
    raw = json.dumps(
        {
            "member_id": member.member_id,
            "client_id": member.client_id,
            "subscription_user_data": member.subscription_user_data.hex(),
            "assignment_user_data": member.assignment_user_data.hex(),
        }
    )
    key = f"{member.group_id}/{member.member_id}"
    return Quarantined(GROUP_METADATA, key, raw, f"{MALFORMED_USER_DATA}: {reason}", member.group_id)


def _decode(member: StreamsMember) -> _Decoded | Quarantined:
    if member.error is not None:
        return _quarantine(member, member.error)
    try:
        subscription = decode_subscription(member.subscription_user_data)
        assignment = decode_assignment(member.assignment_user_data) if member.assignment_user_data else None
    except StreamsUserDataError as err:
        return _quarantine(member, str(err))
    sources: dict[TaskId, set[str]] = defaultdict(set)
    if assignment is not None:
        partitions = sorted(member.assigned)
        if len(partitions) != len(assignment.active_tasks):
            reason = f"{len(assignment.active_tasks)} active task entries for {len(partitions)} assigned partitions"
            return _quarantine(member, reason)
        for task, (topic, _) in zip(assignment.active_tasks, partitions, strict=True):
            sources[task].add(topic)
    return _Decoded(member, subscription, assignment, {t: frozenset(s) for t, s in sources.items()})


def _merged_sums(members: Sequence[_Decoded]) -> dict[TaskId, int]:
    """Offset sums of one process from its threads' subscriptions: a task running active in any thread is -2;
    otherwise the largest sum any thread reports (threads of a process read the same state directory)."""
    sums: dict[TaskId, int] = {}
    for d in members:
        for task, offset_sum in d.subscription.offset_sums().items():
            known = sums.get(task)
            if LATEST_OFFSET in (known, offset_sum):
                sums[task] = LATEST_OFFSET
            else:
                sums[task] = offset_sum if known is None else max(known, offset_sum)
    return sums


def derive_topology(
    group_id: str, members: Sequence[_Decoded], partitions: Mapping[str, int]
) -> dict[int, SubtopologyReport]:
    """The group's topology as a report describes it, from what its members' metadata says.

    Source topics: certain for every subtopology with an active task somewhere (the assignment pairs tasks with
    partitions). Stateful: certain (offset sums or standbys exist only for stateful tasks). Changelog topics:
    certain from standby assignments; otherwise Kafka Streams' naming (``<application.id>-...-changelog`` topics
    on the broker) is matched to the stateful subtopologies still without one: all of them when one is left,
    else by equal partition count when that match is unique. A changelog that cannot be placed is left out (its
    lag is then not computed), never guessed."""
    sources: dict[int, set[str]] = defaultdict(set)
    changelogs: dict[int, set[str]] = defaultdict(set)
    stateful: set[int] = set()
    for d in members:
        for task, topics in d.sources.items():
            sources[task.subtopology].update(topics)
        stateful.update(t.subtopology for t in d.subscription.offset_sums())
        if d.assignment is not None:
            for task, parts in d.assignment.standby_tasks.items():
                stateful.add(task.subtopology)
                changelogs[task.subtopology].update(topic for topic, _ in parts)
    placed = {t for topics in changelogs.values() for t in topics}
    prefix = f"{group_id}-"
    unplaced = sorted(t for t in partitions if t.startswith(prefix) and t.endswith("-changelog") and t not in placed)
    # A changelog-named topic a subtopology reads as its source (another application's table) is not its changelog.
    unplaced = [t for t in unplaced if not any(t in s for s in sources.values())]
    waiting = sorted(s for s in stateful if not changelogs[s])
    if len(waiting) == 1:
        changelogs[waiting[0]].update(unplaced)
    else:
        width = {s: max((partitions.get(t, 0) for t in sources[s]), default=0) for s in waiting}
        for topic in unplaced:
            fits = [s for s in waiting if width[s] == partitions[topic]]
            if len(fits) == 1:
                changelogs[fits[0]].add(topic)
    subtopologies = sorted(set(sources) | stateful)
    return {
        s: SubtopologyReport(tuple(sorted(sources[s])), tuple(sorted(changelogs[s])), s in stateful)
        for s in subtopologies
    }


def inferred_standbys(
    by_process: Mapping[str, Sequence[_Decoded]], topology: Mapping[int, SubtopologyReport]
) -> int | None:
    """``num.standby.replicas`` as far as the held standbys tell it, else None.

    Kafka gives each stateful task min(processes - 1, num.standby.replicas) standbys, and sends warmups as standbys
    too: warmups only add copies, so the fewest standbys any stateful task has is the setting when it is below
    processes - 1. At processes - 1 the setting is at least that, and planning with it gives the same standbys to
    this membership. Unknown while any member has no assignment (a rebalance), with one process, or no stateful
    task assigned."""
    if len(by_process) < 2 or any(d.assignment is None for ds in by_process.values() for d in ds):
        return None
    stateful = {s for s, sub in topology.items() if sub.stateful}
    copies: dict[TaskId, int] = {}
    for threads in by_process.values():
        active = {t for d in threads if d.assignment is not None for t in d.assignment.active_tasks}
        standby = {t for d in threads if d.assignment is not None for t in d.assignment.standby_tasks} - active
        for task in active:
            if task.subtopology in stateful:
                copies.setdefault(task, 0)
        for task in standby:
            copies[task] = copies.get(task, 0) + 1
    counted = [n for task, n in copies.items() if task.subtopology in stateful]
    return min(counted) if counted else None


def _report(
    group_id: str,
    process_id: str,
    members: Sequence[_Decoded],
    topology: Mapping[int, SubtopologyReport],
    captured_at: int,
    standbys: int | None = None,
) -> StateReport:
    first = min(members, key=lambda d: d.member.member_id)
    active: set[TaskId] = set()
    standby: set[TaskId] = set()
    for d in members:
        if d.assignment is not None:
            active.update(d.assignment.active_tasks)
            standby.update(d.assignment.standby_tasks)
    tags: dict[str, str] = {}
    for d in members:
        tags.update(d.subscription.client_tags)
    endpoint = first.subscription.user_endpoint
    return StateReport(
        group_id=group_id,
        process_id=process_id,
        member_id=first.member.member_id,
        client_id=first.member.client_id,
        host=endpoint or first.member.client_host.lstrip("/"),
        capacity=len(members),  # one member per stream thread, as Kafka Streams counts capacity
        client_tags=tags,
        protocol_version=max(d.subscription.version for d in members),
        generation=max(d.member.generation for d in members),
        reported_at=captured_at,
        active_tasks=tuple(sorted(active, key=str)),
        standby_tasks=tuple(sorted(standby - active, key=str)),
        warmup_tasks=(),  # Kafka sends warmups as standbys; only its leader knows which are which
        task_offset_sums=dict(sorted(_merged_sums(members).items())),
        topology=topology,
        plan_id=None,
        fallback_reason=None,
        origin=ReportOrigin.GROUP_METADATA,
        protocol=GroupProtocol.CLASSIC,
        # Only the standbys held say anything about the settings; the rest stays unknown (null).
        settings=ReportedSettings(num_standby_replicas=standbys),
    )


def group_reports(
    members: Iterable[StreamsMember], partitions: Mapping[str, int], captured_at: int
) -> StreamsGroupRead:
    """One state report per process of one group (members sharing a process id are its threads), keyed
    ``<group_id>/<process_id>``; members whose metadata does not decode are quarantined with the reason."""
    decoded: list[_Decoded] = []
    quarantine: list[Quarantined] = []
    group_id = ""
    for member in sorted(members, key=lambda m: m.member_id):
        group_id = member.group_id
        outcome = _decode(member)
        if isinstance(outcome, Quarantined):
            quarantine.append(outcome)
        else:
            decoded.append(outcome)
    topology = derive_topology(group_id, decoded, partitions)
    by_process: dict[str, list[_Decoded]] = defaultdict(list)
    for d in decoded:
        by_process[d.subscription.process_id].append(d)
    reports = []
    standbys = inferred_standbys(by_process, topology)
    for process_id, threads in sorted(by_process.items()):
        report = _report(group_id, process_id, threads, topology, captured_at, standbys)
        reports.append((report.key.encode(), report.encode()))
    processes = {d.member.member_id: d.subscription.process_id for d in decoded}
    return StreamsGroupRead(tuple(reports), tuple(quarantine), processes)
