"""Sorting raw state-report records into usable reports and quarantined ones, with the reason, and checking
them against the group membership the broker lists (pure Python)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import jsonschema

from schemas import read_json

# Quarantine reason codes; the text after ": " names the offending value.
MALFORMED_JSON = "malformed_json"
SCHEMA_VIOLATION = "schema_violation"
OFFSET_SUM_BELOW_SENTINEL = "offset_sum_below_-3"
CONFLICTING_REPORT = "conflicting_report"
UNKNOWN_TASK = "unknown_task"
GROUP_SKIPPED = "group_skipped"
REASONS = (MALFORMED_JSON, SCHEMA_VIOLATION, OFFSET_SUM_BELOW_SENTINEL, CONFLICTING_REPORT, UNKNOWN_TASK, GROUP_SKIPPED)

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


@dataclass(frozen=True)
class Report:
    """A report that decoded and matched schemas/state_report.schema.json."""

    key: str
    raw: str
    fields: Mapping[str, Any]

    @property
    def group_id(self) -> str:
        return str(self.fields["group_id"])

    @property
    def process_id(self) -> str:
        return str(self.fields["process_id"])


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


@dataclass
class Intake:
    """What an extract keeps: usable reports with stale flags, the groups' tasks and changelogs, and the rest."""

    reports: list[tuple[Report, bool]] = field(default_factory=list)  # (report, stale)
    quarantine: list[Quarantined] = field(default_factory=list)
    tasks: list[tuple[str, str, int, int, bool]] = field(default_factory=list)  # group, task, sub, partition, stateful
    changelogs: list[tuple[str, int, str, int]] = field(default_factory=list)  # group, sub, topic, partition
    skipped_groups: dict[str, str] = field(default_factory=dict)
    findings: list[MembershipFinding] = field(default_factory=list)  # membership checks, when the broker was asked
    reporting: dict[tuple[str, str], str] = field(default_factory=dict)  # (group, member id) -> process reporting it
    read: int = 0
    tombstones: int = 0


# Bounds of shared/contracts/pipeline.md beyond the JSON Schema: a value outside them would not fit its Delta
# column (or the decoder's stack) and fail the whole extract, so its record is quarantined instead.
MAX_RECORD_BYTES = 1 << 20
MAX_NESTING = 32
MAX_ID_CHARS = 249
_INT = 2**31 - 1
_BIGINT = 2**63 - 1
_INTEGER_BOUNDS = {
    "schema_version": (-_INT - 1, _INT),
    "capacity": (1, 1024),
    "protocol_version": (-_INT - 1, _INT),
    "generation": (-_BIGINT - 1, _BIGINT),
    "reported_at": (0, _BIGINT),
}


def _depth(value: Any) -> int:
    """Levels of nesting of a decoded JSON value (a scalar is 0, ``{}`` is 1), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is not None:
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in children)
    return deepest


def _out_of_bounds(fields: Mapping[str, Any]) -> str | None:
    """Why a schema-valid report is still outside the contract's bounds, or None."""
    for name, (low, high) in _INTEGER_BOUNDS.items():
        if not low <= fields[name] <= high:
            return f"at {name}: {fields[name]} is outside {low}..{high}"
    for name in ("task_offset_sums", "task_lags"):
        values = fields.get(name) or {}
        too_big = sorted(t for t, v in values.items() if v > _BIGINT)
        if too_big:
            return f"at {name}/{too_big[0]}: {values[too_big[0]]} is beyond a 64-bit offset"
    for name in ("group_id", "process_id"):
        if len(fields[name]) > MAX_ID_CHARS:
            return f"at {name}: {len(fields[name])} characters, more than {MAX_ID_CHARS}"
    return None


@cache
def _report_validator() -> jsonschema.Draft202012Validator:
    schema = read_json("state_report.schema.json")
    return jsonschema.Draft202012Validator(schema)


def _text(value: bytes) -> str:
    return value.decode("utf-8", errors="replace")


def parse_report(key: bytes | None, value: bytes) -> Report | Quarantined:
    """Decode and check one record; the Quarantined says which rule it broke."""
    key_text = _text(key) if key is not None else ""
    raw = _text(value)
    if len(value) > MAX_RECORD_BYTES:
        reason = f"{SCHEMA_VIOLATION}: a record of {len(value)} bytes, more than {MAX_RECORD_BYTES}"
        return Quarantined("reports", key_text, raw, reason)
    try:
        fields = json.loads(value.decode("utf-8"))
    except ValueError as err:  # bad UTF-8, bad JSON, or an integer past Python's digit limit
        return Quarantined("reports", key_text, raw, f"{MALFORMED_JSON}: {err}")
    except RecursionError:  # nested deeper than the decoder's stack allows
        return Quarantined("reports", key_text, raw, f"{SCHEMA_VIOLATION}: nested deeper than {MAX_NESTING} levels")
    if not isinstance(fields, dict):
        return Quarantined("reports", key_text, raw, f"{MALFORMED_JSON}: not a JSON object")
    group = fields.get("group_id") if isinstance(fields.get("group_id"), str) else None
    if _depth(fields) > MAX_NESTING:
        reason = f"{SCHEMA_VIOLATION}: nested deeper than {MAX_NESTING} levels"
        return Quarantined("reports", key_text, raw, reason, group)
    sums = fields.get("task_offset_sums")
    if isinstance(sums, dict):
        below = sorted(t for t, s in sums.items() if isinstance(s, int) and not isinstance(s, bool) and s < -3)
        if below:
            detail = ", ".join(f"{t}={sums[t]}" for t in below[:5])
            return Quarantined("reports", key_text, raw, f"{OFFSET_SUM_BELOW_SENTINEL}: {detail}", group)
    error = jsonschema.exceptions.best_match(_report_validator().iter_errors(fields))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        return Quarantined("reports", key_text, raw, f"{SCHEMA_VIOLATION}: at {where}: {error.message}", group)
    beyond = _out_of_bounds(fields)
    if beyond is not None:
        return Quarantined("reports", key_text, raw, f"{SCHEMA_VIOLATION}: {beyond}", group)
    expected_key = f"{fields['group_id']}/{fields['process_id']}"
    if key_text != expected_key:
        reason = f"{CONFLICTING_REPORT}: key {key_text!r} but the report is from {expected_key!r}"
        return Quarantined("reports", key_text, raw, reason, group)
    roles = [set(fields["active_tasks"]), set(fields["standby_tasks"]), set(fields["warmup_tasks"])]
    twice = sorted((roles[0] & roles[1]) | (roles[0] & roles[2]) | (roles[1] & roles[2]))
    if twice:
        reason = f"{CONFLICTING_REPORT}: task(s) {', '.join(twice[:5])} held in two roles by one process"
        return Quarantined("reports", key_text, raw, reason, group)
    return Report(key_text, raw, fields)


def _group_tasks(
    topology: Mapping[str, Any], partitions: Mapping[str, int]
) -> tuple[dict[str, tuple[int, int, bool]], list[tuple[int, str, int]], str | None]:
    """Every task of a topology (from its topics' partition counts), its changelog partitions, or why not."""
    tasks: dict[str, tuple[int, int, bool]] = {}
    changelogs: list[tuple[int, str, int]] = []
    for sub_text, sub in sorted(topology.items(), key=lambda kv: int(kv[0])):
        sub_id = int(sub_text)
        topics = list(sub["source_topics"]) + list(sub["changelog_topics"])
        missing = [t for t in topics if t not in partitions]
        if missing:
            return {}, [], f"topic(s) {', '.join(missing[:3])} of subtopology {sub_id} not found on the broker"
        count = max((partitions[t] for t in topics), default=0)
        for p in range(count):
            tasks[f"{sub_id}_{p}"] = (sub_id, p, bool(sub["stateful"]))
        for topic in sub["changelog_topics"]:
            changelogs.extend((sub_id, topic, p) for p in range(partitions[topic]))
    return tasks, changelogs, None


def _named_tasks(fields: Mapping[str, Any]) -> set[str]:
    named = set(fields["active_tasks"]) | set(fields["standby_tasks"]) | set(fields["warmup_tasks"])
    return named | set(fields["task_offset_sums"]) | set(fields.get("task_lags") or {})


def topics_named(reports: Iterable[Report]) -> set[str]:
    """Every source and changelog topic named by the reports' topologies."""
    topics: set[str] = set()
    for report in reports:
        for sub in report.fields["topology"].values():
            topics.update(sub["source_topics"], sub["changelog_topics"])
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
        topologies = {json.dumps(r.fields["topology"], sort_keys=True) for r in members}
        reason = None
        if len(topologies) > 1:
            reason = f"{len(topologies)} different topologies reported"
        else:
            tasks, changelogs, reason = _group_tasks(members[0].fields["topology"], partitions)
        if reason is not None:
            intake.skipped_groups[group_id] = reason
            intake.quarantine.append(Quarantined("group", group_id, None, f"{GROUP_SKIPPED}: {reason}", group_id))
            intake.quarantine.extend(
                Quarantined("reports", r.key, r.raw, f"{GROUP_SKIPPED}: {reason}", group_id) for r in members
            )
            continue
        kept = []
        for report in members:
            unknown = sorted(_named_tasks(report.fields) - set(tasks))
            if unknown:
                detail = f"{UNKNOWN_TASK}: {', '.join(unknown[:5])} not in the group's topology"
                intake.quarantine.append(Quarantined("reports", report.key, report.raw, detail, group_id))
                continue
            kept.append((report, int(report.fields["reported_at"]) < captured_at - stale_age_ms))
        intake.reports.extend(kept)
        intake.tasks.extend((group_id, t, sub, p, stateful) for t, (sub, p, stateful) in tasks.items())
        intake.changelogs.extend((group_id, sub, topic, p) for sub, topic, p in changelogs)
    return intake


def parse_records(records: Mapping[bytes, bytes | None]) -> tuple[list[Report], Intake]:
    """Decode and check every record of a folded reports topic (key -> value, None for a tombstone)."""
    intake = Intake()
    parsed = []
    for key, value in records.items():
        if value is None:
            intake.tombstones += 1
            continue
        intake.read += 1
        outcome = parse_report(key, value)
        if isinstance(outcome, Quarantined):
            intake.quarantine.append(outcome)
        else:
            parsed.append(outcome)
    return parsed, intake


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
    f = report.fields
    member_id = str(f["member_id"])
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
        int(f["reported_at"]),
        str(f["client_id"]),
        str(f["host"]),
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
        for report in sorted(by_group.get(group_id, []), key=lambda r: int(r.fields["reported_at"])):
            if str(report.fields["member_id"]) in listed:
                intake.reporting[(group_id, str(report.fields["member_id"]))] = report.process_id
            else:
                intake.findings.append(_unbacked_report(group_id, group, report))
        for member in group.members if group is not None else ():
            if (group_id, member.member_id) not in intake.reporting:
                bad_report = quarantined.get((group_id, member.member_id))
                intake.findings.append(_silent_member(group_id, member, bad_report))
    return intake
