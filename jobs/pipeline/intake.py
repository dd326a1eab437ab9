"""Sorting raw state-report records into usable reports and quarantined ones, with the reason, and checking
them against the group membership the broker lists (pure Python)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from assignor.protocol import state_report
from assignor.protocol.restored_offsets import RestoredOffsetsReport, RestoredRejected, is_restored_key
from assignor.protocol.state_report import RejectReason, ReportRejected, StateReport, SubtopologyReport, check_report

# The contract's bounds, enforced by the state report's reader; named here for intake's readers and tests.
MAX_RECORD_BYTES = state_report.MAX_RECORD_BYTES
MAX_NESTING = state_report.MAX_NESTING
MAX_ID_CHARS = state_report.MAX_ID_CHARS

# Quarantine reason codes; the text after ": " names the offending value. The first four are the state report's
# own rules (assignor.protocol.state_report); the rest are about a report among its group's.
MALFORMED_JSON = str(RejectReason.MALFORMED_JSON)
SCHEMA_VIOLATION = str(RejectReason.SCHEMA_VIOLATION)
OFFSET_SUM_BELOW_SENTINEL = str(RejectReason.OFFSET_SUM_BELOW_SENTINEL)
CONFLICTING_REPORT = str(RejectReason.CONFLICTING_REPORT)
UNKNOWN_TASK = "unknown_task"
GROUP_SKIPPED = "group_skipped"
RESTORED_REJECTED = "restored_offsets_rejected"  # a restored-offsets report (key .../restored) that breaks its rules
REASONS = (
    MALFORMED_JSON,
    SCHEMA_VIOLATION,
    OFFSET_SUM_BELOW_SENTINEL,
    CONFLICTING_REPORT,
    UNKNOWN_TASK,
    GROUP_SKIPPED,
    RESTORED_REJECTED,
)

# Membership check codes (table membership_checks); the report stays in the snapshot either way.
MEMBER_NOT_REPORTING = "member_not_reporting"  # the broker lists the member, no report names it
MEMBER_NOT_IN_GROUP = "member_not_in_group"  # a report names a member the broker does not list in the group
GROUP_NOT_ON_BROKER = "group_not_on_broker"  # a report of a group the broker does not list at all
MEMBERSHIP_UNKNOWN = "membership_unknown"  # the broker did not describe the group: nothing to check against
MEMBERSHIP_CHECKS = (MEMBER_NOT_REPORTING, MEMBER_NOT_IN_GROUP, GROUP_NOT_ON_BROKER, MEMBERSHIP_UNKNOWN)


@dataclass(frozen=True)
class Quarantined:
    """A record (or a whole group) left out of the snapshot, and why."""

    source: str  # "reports" or "group"
    key: str
    raw: str | None
    reason: str
    group_id: str | None = None
    raw_bytes: int | None = None  # the value's length as read, when ``raw`` (invalid UTF-8 replaced) differs from it


@dataclass(frozen=True)
class Report:
    """A report that decoded and kept every rule of the contract: the record as read, and typed."""

    key: str
    raw: str
    fields: Mapping[str, Any]  # the JSON object as it arrived
    record: StateReport = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "record", StateReport.from_json(self.fields))

    @property
    def group_id(self) -> str:
        return self.record.group_id

    @property
    def process_id(self) -> str:
        return self.record.process_id


@dataclass(frozen=True)
class BrokerMember:
    """One member of a consumer group as the broker describes it."""

    member_id: str
    client_id: str
    host: str
    group_instance_id: str | None
    assigned: tuple[str, ...]  # "<topic>-<partition>", sorted


@dataclass(frozen=True)
class BrokerGroup:
    """A consumer group the broker lists, with its members; ``error`` when describing it failed."""

    group_id: str
    state: str
    group_type: str
    partition_assignor: str
    coordinator: str
    members: tuple[BrokerMember, ...] = ()
    error: str | None = None


@dataclass(frozen=True)
class MembershipFinding:
    """A disagreement between the broker's membership of a group and the group's reports, and why."""

    group_id: str
    member_id: str | None
    process_id: str | None
    reason: str  # "code: detail", code in MEMBERSHIP_CHECKS
    report_key: str | None = None
    reported_at: int | None = None
    client_id: str | None = None
    host: str | None = None


@dataclass(frozen=True)
class GroupTask:
    """One task of a group's topology, as group_tasks stores it."""

    group_id: str
    task_id: str
    subtopology: int
    partition: int
    stateful: bool


@dataclass(frozen=True)
class Changelog:
    """One changelog partition a group's state stores restore from, as changelog_offsets stores it."""

    group_id: str
    subtopology: int
    topic: str
    partition: int


@dataclass
class Intake:
    """What an extract keeps: usable reports with stale flags, the groups' tasks and changelogs, and the rest."""

    reports: list[tuple[Report, bool]] = field(default_factory=list)  # (report, stale)
    quarantine: list[Quarantined] = field(default_factory=list)
    tasks: list[GroupTask] = field(default_factory=list)
    changelogs: list[Changelog] = field(default_factory=list)
    skipped_groups: dict[str, str] = field(default_factory=dict)
    findings: list[MembershipFinding] = field(default_factory=list)  # membership checks, when the broker was asked
    reporting: dict[tuple[str, str], str] = field(default_factory=dict)  # (group, member id) -> process reporting it
    restored: list[RestoredOffsetsReport] = field(default_factory=list)  # the Kafka Streams members' own records
    read: int = 0  # state-report records: each is kept or quarantined (the snapshot's ``reports``)
    restored_read: int = 0  # restored-offsets records, another record type: not counted in ``read``
    tombstones: int = 0


def _text(value: bytes) -> str:
    return value.decode("utf-8", errors="replace")


def parse_report(key: bytes | None, value: bytes) -> Report | Quarantined:
    """Decode and check one record; the Quarantined says which rule it broke."""
    key_text = _text(key) if key is not None else ""
    raw = _text(value)
    try:
        fields = check_report(key_text, value)
    except ReportRejected as rejected:
        return Quarantined("reports", key_text, raw, str(rejected), rejected.group_id, len(value))
    try:
        return Report(key_text, raw, fields)
    except (ValueError, TypeError, KeyError) as err:
        # The checks above should leave nothing the typed report refuses; if one slips through, it costs this
        # record, never the night's extract of every other group.
        group = fields.get("group_id") if isinstance(fields.get("group_id"), str) else None
        return Quarantined("reports", key_text, raw, f"{SCHEMA_VIOLATION}: not a typed report: {err}", group)


def parse_restored(key: bytes, value: bytes) -> RestoredOffsetsReport | Quarantined:
    """Decode one restored-offsets report (key ``<group>/<process>/restored``); the Quarantined says what is wrong."""
    key_text = _text(key)
    try:
        return RestoredOffsetsReport.decode(key_text, value)
    except RestoredRejected as rejected:
        return Quarantined("reports", key_text, _text(value), f"{RESTORED_REJECTED}: {rejected}", None, len(value))


def _group_tasks(
    topology: Mapping[int, SubtopologyReport], partitions: Mapping[str, int]
) -> tuple[dict[str, tuple[int, int, bool]], list[tuple[int, str, int]], str | None]:
    """Every task of a topology (from its topics' partition counts), its changelog partitions, or why not."""
    tasks: dict[str, tuple[int, int, bool]] = {}
    changelogs: list[tuple[int, str, int]] = []
    for sub_id, sub in sorted(topology.items()):
        topics = list(sub.source_topics) + list(sub.changelog_topics)
        missing = [t for t in topics if t not in partitions]
        if missing:
            return {}, [], f"topic(s) {', '.join(missing[:3])} of subtopology {sub_id} not found on the broker"
        count = max((partitions[t] for t in topics), default=0)
        for p in range(count):
            tasks[f"{sub_id}_{p}"] = (sub_id, p, sub.stateful)
        for topic in sub.changelog_topics:
            changelogs.extend((sub_id, topic, p) for p in range(partitions[topic]))
    return tasks, changelogs, None


def topics_named(reports: Iterable[Report]) -> set[str]:
    """Every source and changelog topic named by the reports' topologies."""
    topics: set[str] = set()
    for report in reports:
        for sub in report.record.topology.values():
            topics.update(sub.source_topics, sub.changelog_topics)
    return topics


def triage_groups(
    reports: Iterable[Report], partitions: Mapping[str, int], captured_at: int, stale_age_ms: int, intake: Intake
) -> Intake:
    """Per group: one topology, tasks known to it, stale reports flagged; else quarantine or skip the group."""
    by_group: dict[str, list[Report]] = defaultdict(list)
    for report in reports:
        by_group[report.group_id].append(report)
    for group_id in sorted(by_group):
        members = sorted(by_group[group_id], key=lambda r: r.process_id)
        topologies = {json.dumps(r.record.topology_json(), sort_keys=True) for r in members}
        reason = None
        if len(topologies) > 1:
            reason = f"{len(topologies)} different topologies reported"
        else:
            tasks, changelogs, reason = _group_tasks(members[0].record.topology, partitions)
        if reason is not None:
            intake.skipped_groups[group_id] = reason
            intake.quarantine.append(Quarantined("group", group_id, None, f"{GROUP_SKIPPED}: {reason}", group_id))
            intake.quarantine.extend(
                Quarantined("reports", r.key, r.raw, f"{GROUP_SKIPPED}: {reason}", group_id) for r in members
            )
            continue
        kept = []
        for report in members:
            unknown = sorted({str(t) for t in report.record.named_tasks()} - set(tasks))
            if unknown:
                detail = f"{UNKNOWN_TASK}: {', '.join(unknown[:5])} not in the group's topology"
                intake.quarantine.append(Quarantined("reports", report.key, report.raw, detail, group_id))
                continue
            kept.append((report, report.record.reported_at < captured_at - stale_age_ms))
        intake.reports.extend(kept)
        intake.tasks.extend(GroupTask(group_id, t, sub, p, stateful) for t, (sub, p, stateful) in tasks.items())
        intake.changelogs.extend(Changelog(group_id, sub, topic, p) for sub, topic, p in changelogs)
    return intake


def parse_records(records: Mapping[bytes, bytes | None]) -> tuple[list[Report], Intake]:
    """Decode and check every record of a folded reports topic (key -> value, None for a tombstone)."""
    intake = Intake()
    parsed = []
    for key, value in records.items():
        if value is None:
            intake.tombstones += 1
            continue
        if key is not None and _is_restored(key):
            intake.restored_read += 1
            restored = parse_restored(key, value)
            if isinstance(restored, Quarantined):
                intake.quarantine.append(restored)
            else:
                intake.restored.append(restored)
            continue
        intake.read += 1
        outcome = parse_report(key, value)
        if isinstance(outcome, Quarantined):
            intake.quarantine.append(outcome)
        else:
            parsed.append(outcome)
    return parsed, intake


def restored_only(records: Mapping[bytes, bytes | None]) -> list[RestoredOffsetsReport]:
    """The well-formed restored-offsets reports of a folded reports topic; state reports are not decoded (a second
    read: what is malformed was quarantined by the first)."""
    restored = (parse_restored(k, v) for k, v in records.items() if k is not None and v is not None and _is_restored(k))
    return [r for r in restored if not isinstance(r, Quarantined)]


def _is_restored(key: bytes) -> bool:
    return is_restored_key(_text(key))


def intake_records(
    records: Mapping[bytes, bytes | None], partitions: Mapping[str, int], captured_at: int, stale_age_ms: int
) -> Intake:
    """Sort a folded reports topic; ``partitions``: topic -> partition count as the broker reports them."""
    parsed, intake = parse_records(records)
    return triage_groups(parsed, partitions, captured_at, stale_age_ms, intake)


def _quarantined_member(q: Quarantined) -> str | None:
    """The member id a quarantined record names, when it decodes that far."""
    try:
        fields = json.loads(q.raw or "")
    except (ValueError, RecursionError):
        return None
    member = fields.get("member_id") if isinstance(fields, dict) else None
    return member if isinstance(member, str) and member else None


def _unbacked_report(group_id: str, group: BrokerGroup | None, report: Report) -> MembershipFinding:
    """The finding for a report whose member the broker does not list in the group."""
    f = report.record
    member_id = f.member_id
    if group is None:
        reason = f"{GROUP_NOT_ON_BROKER}: the broker lists no consumer group {group_id!r}"
    elif not member_id:
        reason = f"{MEMBER_NOT_IN_GROUP}: the report names no member id (sent before the instance joined)"
    else:
        listed = len(group.members)
        reason = f"{MEMBER_NOT_IN_GROUP}: the broker lists {listed} member(s) in {group_id!r} ({group.state}), "
        reason += f"not {member_id}"
    return MembershipFinding(
        group_id,
        member_id or None,
        report.process_id,
        reason,
        report.key,
        f.reported_at,
        f.client_id,
        f.host,
    )


def _silent_member(group_id: str, member: BrokerMember, quarantined: Quarantined | None) -> MembershipFinding:
    """The finding for a member the broker lists that no usable report names."""
    assigned = f"{len(member.assigned)} partition(s)" if member.assigned else "no partitions"
    who = f"member {member.member_id} (client {member.client_id}, host {member.host}, {assigned})"
    why = "no report names it"
    if quarantined is not None:
        why = f"its report {quarantined.key} was quarantined ({quarantined.reason.split(':', 1)[0]})"
    reason = f"{MEMBER_NOT_REPORTING}: the broker lists {who}; {why}"
    return MembershipFinding(group_id, member.member_id, None, reason, None, None, member.client_id, member.host)


def check_membership(
    reports: Iterable[Report], membership: Mapping[str, BrokerGroup], groups: Iterable[str], intake: Intake
) -> Intake:
    """Cross-check each group's reports against the members the broker lists (``membership``: the groups the
    broker lists; a group absent from it is not on the broker). Findings go to ``intake.findings``, and which
    process reports each listed member to ``intake.reporting``. Nothing is removed: the reports stay usable; the
    findings say which of them no live member backs, and which live members do not report."""
    by_group: dict[str, list[Report]] = defaultdict(list)
    for report in reports:
        by_group[report.group_id].append(report)
    quarantined: dict[tuple[str, str], Quarantined] = {}
    for q in intake.quarantine:
        member_id = _quarantined_member(q) if q.source == "reports" else None
        if member_id is not None and q.group_id is not None:
            quarantined.setdefault((q.group_id, member_id), q)
    for group_id in sorted(set(groups) | set(by_group)):
        group = membership.get(group_id)
        if group is not None and group.error is not None:
            reason = f"{MEMBERSHIP_UNKNOWN}: the broker did not describe the group: {group.error}"
            intake.findings.append(MembershipFinding(group_id, None, None, reason))
            continue
        listed = {m.member_id for m in group.members} if group is not None else set()
        # Oldest first: when two reports name one member, the newest says which process it is.
        for report in sorted(by_group.get(group_id, []), key=lambda r: r.record.reported_at):
            if report.record.member_id in listed:
                intake.reporting[(group_id, report.record.member_id)] = report.process_id
            else:
                intake.findings.append(_unbacked_report(group_id, group, report))
        for member in group.members if group is not None else ():
            if (group_id, member.member_id) not in intake.reporting:
                bad_report = quarantined.get((group_id, member.member_id))
                intake.findings.append(_silent_member(group_id, member, bad_report))
    return intake
