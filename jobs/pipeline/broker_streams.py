"""State reports of streams-protocol groups (KIP-1071), made from the broker's description of each group: the JSON
lines of the streams-groups reader (assignor/java/streams-groups-reader; run by streams_reader.py). Pure Python.

What the broker says for certain: members with their process ids, client tags and racks, each member's current
active, standby and warm-up tasks, the offset sums of tasks with local state (``taskOffsets``, never sent for the
member's actives, at most every ``streams.task.offset.interval.ms``), and the topology it holds (source, repartition
and changelog topics per subtopology). The broker's ``taskEndOffsets`` are often unknown (``Long.MAX_VALUE``): lags
are computed from the changelog topics' own end offsets, as for every other group. Every integer is bounded before
it is converted; a line or member that breaks a bound or the expected shape is quarantined with the reason.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from assignor.protocol.reported_settings import GroupProtocol, ReportedSettings
from assignor.protocol.state_report import MAX_CAPACITY, MAX_ID_CHARS, ReportOrigin, StateReport, SubtopologyReport
from assignor.task import LATEST_OFFSET, UNKNOWN_OFFSET_SUM, TaskId
from jobs.pipeline.intake import Quarantined

BROKER_STREAMS = str(ReportOrigin.BROKER_STREAMS)  # the reports' origin, and the quarantine source of bad input
MALFORMED_DESCRIPTION = "malformed_streams_group"
MAX_LINE_BYTES = 64 << 20  # one group's line: thousands of members with their tasks fit
MAX_NESTING = 32
_INT32 = (1 << 31) - 1
_INT64 = (1 << 63) - 1
_MAX_INT_DIGITS = 20  # "-9223372036854775808" has 20 characters: anything longer is out of every bound
_SUBTOPOLOGY = re.compile(r"^(0|[1-9][0-9]{0,9})$")
# The group configs that carry a setting of the contract's ``settings`` (other streams.* configs are kept as read).
NUM_STANDBY_REPLICAS = "streams.num.standby.replicas"
ASSIGNOR_NAME = "streams.assignor.name"


class MalformedLine(ValueError):
    """One reader line, member or value that breaks the expected shape or a bound; the message says which."""


@dataclass(frozen=True)
class StreamsGroupSettings:
    """A streams group's assignment configs as the broker holds them (GROUP resource configs, KIP-1071)."""

    num_standby_replicas: int | None  # None: the configs could not be read
    assignor_name: str | None  # the group's own choice; None: the broker's default (group.streams.assignors[0])
    configs: Mapping[str, str] = field(default_factory=dict)  # every streams.* config, as read
    error: str | None = None  # why the configs could not be read


@dataclass(frozen=True)
class BrokerStreamsGroup:
    """One streams-protocol group: one report per process, the members quarantined, and the group's settings."""

    group_id: str
    state: str
    group_epoch: int
    assignor_name: str | None  # the assignor the broker last assigned with (describeStreamsGroups)
    settings: StreamsGroupSettings
    reports: tuple[tuple[bytes, bytes], ...]  # (key, value) as on the reports topic
    quarantine: tuple[Quarantined, ...]
    processes: Mapping[str, str]  # member id -> process id
    # task -> the largest finite taskEndOffsets any member reported (the broker sends them for assigned standbys)
    end_offset_sums: Mapping[TaskId, int] = field(default_factory=dict)


@dataclass(frozen=True)
class BrokerStreamsRead:
    """Everything one reader run gave: the groups read, and what was quarantined outside any group."""

    groups: tuple[BrokerStreamsGroup, ...]
    quarantine: tuple[Quarantined, ...]
    complete: bool  # the reader's ``end`` line arrived: no group is missing for lack of output
    listed: int  # groups the reader listed (from its ``end`` line; 0 when incomplete)


def _bounded_int(text: str) -> int:
    """``json`` integer hook: refuses digit strings too long for any bound before converting them."""
    if len(text) > _MAX_INT_DIGITS:
        raise MalformedLine(f"an integer of {len(text)} digits")
    return int(text)


def _no_float(text: str) -> float:
    raise MalformedLine(f"a non-integer number {text[:32]!r}")


def _depth(value: Any, limit: int = MAX_NESTING) -> None:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            raise MalformedLine(f"nested deeper than {limit} levels")
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        stack.extend((child, depth + 1) for child in children)


def load_line(line: bytes) -> dict[str, Any]:
    """One reader line as a JSON object, every integer bounded in size and no floats; MalformedLine otherwise."""
    if len(line) > MAX_LINE_BYTES:
        raise MalformedLine(f"a line of {len(line)} bytes (at most {MAX_LINE_BYTES})")
    try:
        text = line.decode("utf-8")
        value = json.loads(text, parse_int=_bounded_int, parse_float=_no_float, parse_constant=_no_float)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as err:
        raise MalformedLine(f"not JSON: {type(err).__name__}: {err}") from None
    if not isinstance(value, dict):
        raise MalformedLine(f"a JSON {type(value).__name__}, not an object")
    _depth(value)
    return value


def _int(value: Any, what: str, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise MalformedLine(f"{what} {str(value)[:40]} is not an integer in {low}..{high}")
    return value


def _str(value: Any, what: str, *, max_chars: int = MAX_ID_CHARS, empty: bool = False) -> str:
    if not isinstance(value, str) or len(value) > max_chars or (not value and not empty):
        raise MalformedLine(f"{what} is not a {'' if empty else 'non-empty '}string of at most {max_chars} chars")
    return value


def _opt_str(value: Any, what: str) -> str | None:
    return None if value is None else _str(value, what, empty=True)


def _dict(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise MalformedLine(f"{what} is not an object")
    return value


def _list(value: Any, what: str) -> list[Any]:
    if not isinstance(value, list):
        raise MalformedLine(f"{what} is not a list")
    return value


def _subtopology(value: Any, what: str) -> int:
    """A KIP-1071 subtopology id (a string) as our integer subtopology; named topologies are not supported."""
    text = _str(value, what)
    if not _SUBTOPOLOGY.match(text) or int(text) > _INT32:  # the pattern bounds it to 10 digits first
        raise MalformedLine(f"{what} {text[:40]!r} is not a subtopology number (0..{_INT32}; named topologies are not)")
    return int(text)


def _tasks(value: Any, what: str) -> set[TaskId]:
    """``{"<subtopology>": [partitions]}`` → task ids."""
    tasks: set[TaskId] = set()
    for sub, partitions in _dict(value, what).items():
        s = _subtopology(sub, f"{what} subtopology")
        tasks.update(TaskId(s, _int(p, f"{what} partition", 0, _INT32)) for p in _list(partitions, what))
    return tasks


def _offsets(value: Any, what: str, high: int = _INT64) -> dict[TaskId, int]:
    """``[[subtopology, partition, offset], ...]`` → task → offset; offsets outside ``-3..high`` are refused."""
    offsets: dict[TaskId, int] = {}
    for entry in _list(value, what):
        triple = _list(entry, what)
        if len(triple) != 3:
            raise MalformedLine(f"{what} entry has {len(triple)} items, not 3")
        task = TaskId(_subtopology(triple[0], f"{what} subtopology"), _int(triple[1], f"{what} partition", 0, _INT32))
        offsets[task] = _int(triple[2], f"{what} offset of {task}", UNKNOWN_OFFSET_SUM, high)
    return offsets


@dataclass(frozen=True)
class _Member:
    member_id: str
    process_id: str
    client_id: str
    host: str
    rack_id: str | None
    client_tags: Mapping[str, str]
    epoch: int
    active: frozenset[TaskId]
    standby: frozenset[TaskId]
    warmup: frozenset[TaskId]
    offsets: Mapping[TaskId, int]
    end_offsets: Mapping[TaskId, int]  # Long.MAX_VALUE (unknown) left out


def _member(raw: Mapping[str, Any]) -> _Member:
    tags = _dict(raw.get("client_tags", {}), "client_tags")
    client_tags = {_str(k, "client tag key"): _str(v, f"client tag {k}", empty=True) for k, v in tags.items()}
    assignment = raw.get("assignment")
    current = _dict(assignment, "assignment") if assignment is not None else {}
    active = _tasks(current.get("active", {}), "active tasks")
    standby = _tasks(current.get("standby", {}), "standby tasks")
    warmup = _tasks(current.get("warmup", {}), "warm-up tasks")
    ends = _offsets(raw.get("task_end_offsets", []), "task_end_offsets")
    endpoint = _opt_str(raw.get("user_endpoint"), "user_endpoint")
    return _Member(
        member_id=_str(raw.get("member_id"), "member_id"),
        process_id=_str(raw.get("process_id"), "process_id"),
        client_id=_str(raw.get("client_id", ""), "client_id", empty=True),
        host=endpoint or _str(raw.get("client_host", ""), "client_host", empty=True).lstrip("/"),
        rack_id=_opt_str(raw.get("rack_id"), "rack_id"),
        client_tags=client_tags,
        epoch=_int(raw.get("member_epoch"), "member_epoch", -(_INT32 + 1), _INT32),
        active=frozenset(active),
        standby=frozenset(standby - active),
        warmup=frozenset(warmup - active - standby),
        offsets=_offsets(raw.get("task_offsets", []), "task_offsets"),
        end_offsets={t: o for t, o in ends.items() if o != _INT64},
    )


def _topology(raw: Any) -> dict[int, SubtopologyReport]:
    """The topology the broker holds: sources are the source and repartition-source topics; a subtopology is
    stateful when it has a changelog (a store without logging is invisible to the broker, and to lags)."""
    topology: dict[int, SubtopologyReport] = {}
    for entry in _list(raw, "subtopologies"):
        sub = _dict(entry, "subtopology")
        sub_id = _subtopology(sub.get("subtopology_id"), "subtopology_id")
        sources = [_str(t, "source topic") for t in _list(sub.get("source_topics", []), "source_topics")]
        repartition = _dict(sub.get("repartition_source_topics", {}), "repartition_source_topics")
        changelogs = _dict(sub.get("state_changelog_topics", {}), "state_changelog_topics")
        for name, partitions in [*repartition.items(), *changelogs.items()]:
            _str(name, "topic name")
            _int(partitions, f"partitions of {name}", -1, _INT32)  # -1: not yet created (the broker says so)
        topology[sub_id] = SubtopologyReport(
            tuple(sorted({*sources, *repartition})), tuple(sorted(changelogs)), bool(changelogs)
        )
    return topology


def _settings(line: Mapping[str, Any]) -> StreamsGroupSettings:
    error = _opt_str(line.get("configs_error"), "configs_error")
    raw = line.get("configs")
    if raw is None:
        return StreamsGroupSettings(None, None, {}, error or "the group's configs were not read")
    configs = {_str(k, "config name"): _str(v, f"config {k}", empty=True) for k, v in _dict(raw, "configs").items()}
    standbys = configs.get(NUM_STANDBY_REPLICAS)
    if standbys is not None and not re.fullmatch(r"[0-9]{1,10}", standbys):
        raise MalformedLine(f"{NUM_STANDBY_REPLICAS} {standbys[:20]!r} is not a count")
    return StreamsGroupSettings(
        num_standby_replicas=None if standbys is None else _int(int(standbys), NUM_STANDBY_REPLICAS, 0, _INT32),
        assignor_name=configs.get(ASSIGNOR_NAME) or None,
        configs=configs,
        error=error,
    )


def _offset_sums(threads: Sequence[_Member], stateful: frozenset[int]) -> dict[TaskId, int]:
    """A process's offset sums of stateful tasks, as Kafka Streams' own subscriptions carry them: its actives are
    caught up by definition (-2; the broker never sends their offsets); otherwise the largest offset any of its
    members reports; assigned copies without one yet (the broker's offsets come every 15 s or more) are -3."""
    sums: dict[TaskId, int] = {}
    for m in threads:
        for task, offset in m.offsets.items():
            sums[task] = max(sums.get(task, offset), offset)
    for m in threads:
        for task in m.standby | m.warmup:
            sums.setdefault(task, UNKNOWN_OFFSET_SUM)
        for task in m.active:
            sums[task] = LATEST_OFFSET
    return {t: s for t, s in sums.items() if t.subtopology in stateful}


def _report(
    group_id: str,
    process_id: str,
    members: Sequence[_Member],
    topology: Mapping[int, SubtopologyReport],
    settings: StreamsGroupSettings,
    captured_at: int,
) -> StateReport:
    first = min(members, key=lambda m: m.member_id)
    active = frozenset().union(*(m.active for m in members))
    standby = frozenset().union(*(m.standby for m in members)) - active
    warmup = frozenset().union(*(m.warmup for m in members)) - active - standby
    tags: dict[str, str] = {}
    for m in members:
        tags.update(m.client_tags)
    racks = sorted({m.rack_id for m in members if m.rack_id})
    stateful = frozenset(s for s, sub in topology.items() if sub.stateful)
    # The contract's settings: what the broker holds for the group; the 4.4 broker has no warm-ups, hence no
    # acceptable lag, warm-up budget or probing interval for these groups (null: the source cannot know them).
    contract_settings = ReportedSettings(num_standby_replicas=settings.num_standby_replicas)
    return StateReport(
        group_id=group_id,
        process_id=process_id,
        member_id=first.member_id,
        client_id=first.client_id,
        host=first.host,
        capacity=min(len(members), MAX_CAPACITY),  # one member per Kafka Streams client under KIP-1071
        client_tags=tags,
        protocol_version=1,  # the streams protocol has no subscription version: its first (KIP-1071) one
        generation=max(m.epoch for m in members),  # the member epoch, the streams protocol's generation
        reported_at=captured_at,
        active_tasks=tuple(sorted(active)),
        standby_tasks=tuple(sorted(standby)),
        warmup_tasks=tuple(sorted(warmup)),
        task_offset_sums=dict(sorted(_offset_sums(members, stateful).items())),
        topology=topology,
        plan_id=None,
        fallback_reason=None,
        origin=ReportOrigin.BROKER_STREAMS,
        protocol=GroupProtocol.STREAMS,
        settings=contract_settings,
        extra={"rack_id": racks[0] if len(racks) == 1 else None},
    )


def _quarantine(group_id: str | None, key: str, raw: Any, reason: str) -> Quarantined:
    text = raw if isinstance(raw, str) else json.dumps(raw, sort_keys=True)
    return Quarantined(BROKER_STREAMS, key, text[:MAX_LINE_BYTES], f"{MALFORMED_DESCRIPTION}: {reason}", group_id)


def group_read(line: Mapping[str, Any], captured_at: int) -> BrokerStreamsGroup:
    """One ``group`` line as reports (one per process id), with the members that break a bound quarantined;
    MalformedLine when the group itself (its id, epoch, topology or configs) does not read."""
    group_id = _str(line.get("group_id"), "group_id")
    state = _str(line.get("state", ""), "state", empty=True)
    epoch = _int(line.get("group_epoch"), "group_epoch", -(_INT32 + 1), _INT32)
    assignor = _opt_str(line.get("assignor_name"), "assignor_name")
    topology = _topology(line.get("subtopologies", []))
    settings = _settings(line)
    members: list[_Member] = []
    quarantine: list[Quarantined] = []
    for raw in _list(line.get("members", []), "members"):
        try:
            members.append(_member(_dict(raw, "member")))
        except MalformedLine as err:
            member_id = raw.get("member_id") if isinstance(raw, dict) else None
            key = f"{group_id}/{member_id if isinstance(member_id, str) else '?'}"[: 2 * MAX_ID_CHARS + 1]
            quarantine.append(_quarantine(group_id, key, raw, str(err)))
    by_process: dict[str, list[_Member]] = defaultdict(list)
    for m in members:
        by_process[m.process_id].append(m)
    reports = []
    for process_id, threads in sorted(by_process.items()):
        report = _report(group_id, process_id, threads, topology, settings, captured_at)
        reports.append((report.key.encode(), report.encode()))
    processes = {m.member_id: m.process_id for m in members}
    ends: dict[TaskId, int] = {}
    for m in members:
        for task, end in m.end_offsets.items():
            ends[task] = max(ends.get(task, end), end)
    return BrokerStreamsGroup(
        group_id, state, epoch, assignor, settings, tuple(reports), tuple(quarantine), processes, ends
    )


def parse_reader_output(lines: Iterable[bytes], captured_at: int) -> BrokerStreamsRead:
    """Every line of one reader run: groups read, groups and lines quarantined (with the reason), and whether the
    run finished (its ``end`` line). A ``fatal`` line is not parsed here: the runner raises on it."""
    groups: list[BrokerStreamsGroup] = []
    quarantine: list[Quarantined] = []
    complete, listed = False, 0
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        group_id: str | None = None
        try:
            line = load_line(raw)
            kind = line.get("kind")
            candidate = line.get("group_id")
            group_id = candidate if isinstance(candidate, str) and 0 < len(candidate) <= MAX_ID_CHARS else None
            if kind == "group":
                groups.append(group_read(line, captured_at))
            elif kind == "group_error":
                reason = f"the broker did not describe it: {_str(line.get('error', ''), 'error', max_chars=4096)}"
                quarantine.append(Quarantined(BROKER_STREAMS, group_id or f"line {number}", None, reason, group_id))
            elif kind == "end":
                complete, listed = True, _int(line.get("listed"), "listed", 0, _INT32)
            else:
                raise MalformedLine(f"unknown line kind {str(kind)[:40]!r}")
        except MalformedLine as err:
            key = group_id or f"line {number}"
            quarantine.append(_quarantine(group_id, key, raw.decode("utf-8", "replace")[:4096], str(err)))
    return BrokerStreamsRead(tuple(groups), tuple(quarantine), complete, listed)
