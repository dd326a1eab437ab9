"""Sorting raw state-report records into usable reports and quarantined ones, with the reason (pure Python)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"

# Quarantine reason codes; the text after ": " names the offending value.
MALFORMED_JSON = "malformed_json"
SCHEMA_VIOLATION = "schema_violation"
OFFSET_SUM_BELOW_SENTINEL = "offset_sum_below_-3"
CONFLICTING_REPORT = "conflicting_report"
UNKNOWN_TASK = "unknown_task"
GROUP_SKIPPED = "group_skipped"
REASONS = (MALFORMED_JSON, SCHEMA_VIOLATION, OFFSET_SUM_BELOW_SENTINEL, CONFLICTING_REPORT, UNKNOWN_TASK, GROUP_SKIPPED)


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


@dataclass
class Intake:
    """What an extract keeps: usable reports with stale flags, the groups' tasks and changelogs, and the rest."""

    reports: list[tuple[Report, bool]] = field(default_factory=list)  # (report, stale)
    quarantine: list[Quarantined] = field(default_factory=list)
    tasks: list[tuple[str, str, int, int, bool]] = field(default_factory=list)  # group, task, sub, partition, stateful
    changelogs: list[tuple[str, int, str, int]] = field(default_factory=list)  # group, sub, topic, partition
    skipped_groups: dict[str, str] = field(default_factory=dict)
    read: int = 0
    tombstones: int = 0


@cache
def _report_validator() -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMAS / "state_report.schema.json").read_text(encoding="utf-8"))
    return jsonschema.Draft202012Validator(schema)


def _text(value: bytes) -> str:
    return value.decode("utf-8", errors="replace")


def parse_report(key: bytes | None, value: bytes) -> Report | Quarantined:
    """Decode and check one record; the Quarantined says which rule it broke."""
    key_text = _text(key) if key is not None else ""
    raw = _text(value)
    try:
        fields = json.loads(value.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        return Quarantined("reports", key_text, raw, f"{MALFORMED_JSON}: {err}")
    if not isinstance(fields, dict):
        return Quarantined("reports", key_text, raw, f"{MALFORMED_JSON}: not a JSON object")
    group = fields.get("group_id") if isinstance(fields.get("group_id"), str) else None
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
    return named | set(fields["task_offset_sums"])


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
