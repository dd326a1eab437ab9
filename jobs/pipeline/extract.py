"""Stage 1, extract: the reports topic, the broker's group membership, changelog end offsets and committed offsets
→ bronze tables of a snapshot, with the reports cross-checked against the members the broker lists."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame

from assignor.protocol.reported_settings import ReportedSettings
from assignor.runtime.kafka_io import read_latest_by_key
from jobs.lakehouse.lake import Lake, Scope
from jobs.lakehouse.tables import table_schema
from jobs.pipeline.broker_reads import (
    BrokerState,
    ConnectRetry,
    admin_client,
    all_partition_counts,
    await_broker,
    end_offsets,
    read_broker_state,
)
from jobs.pipeline.extract_streams import read_streams_protocol_reports, without_superseded
from jobs.pipeline.group_metadata import read_streams_groups
from jobs.pipeline.intake import (
    Intake,
    MembershipFinding,
    Quarantined,
    Report,
    check_membership,
    parse_records,
    parse_report,
    topics_named,
    triage_groups,
)
from jobs.pipeline.plugin_groups import earlier_plugin_snapshots, reporting_gaps, streams_protocol_gaps
from jobs.pipeline.quarantine import (
    DEFAULT_CAP_PER_SOURCE,
    QuarantineRow,
    bound_quarantine,
    candidate_hashes,
    stored_hashes,
    stored_row,
)
from jobs.pipeline.stage import StageResult
from jobs.pipeline.streams_assignor import broker_assignor
from jobs.pipeline.streams_groups import GROUP_METADATA, group_reports
from jobs.settings import Settings

log = logging.getLogger(__name__)
# Written in this order; ``snapshots`` last, so its row marks a complete snapshot.
BRONZE_TABLES = (
    "member_reports",
    "changelog_offsets",
    "group_tasks",
    "group_offsets",
    "quarantine",
    "group_members",
    "membership_checks",
    "snapshots",
)


def new_snapshot_id(now_ms: int) -> str:
    """A sortable, unique snapshot id: UTC time of capture plus a random suffix."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now_ms / 1000)) + "-" + uuid.uuid4().hex[:6]


def _frame(lake: Lake, name: str, rows: list[tuple[Any, ...]]) -> DataFrame:
    return lake.spark.createDataFrame(rows, schema=table_schema(name).ddl)


def _row(table: str, **values: Any) -> tuple[Any, ...]:
    """One row in the column order of the table's schema file, which must name exactly these columns."""
    names = table_schema(table).column_names
    if set(values) != set(names):
        raise ValueError(f"{table} row: columns {sorted(set(values) ^ set(names))} do not match its schema file")
    return tuple(values[n] for n in names)


# Report fields stored as the typed report gives them back (the topology as canonical JSON text).
_REPORT_FIELDS = (
    "group_id", "process_id", "reported_at", "schema_version", "member_id", "client_id", "host", "capacity",
    "client_tags", "protocol_version", "generation", "active_tasks", "standby_tasks", "warmup_tasks",
    "task_offset_sums", "plan_id", "fallback_reason",
)  # fmt: skip


def _settings_columns(settings: ReportedSettings | None) -> dict[str, Any]:
    """member_reports' columns of the application's own KIP-441 settings (null where unknown)."""
    return (settings or ReportedSettings()).to_json()


def bronze_rows(
    snapshot_id: str,
    captured_at: int,
    intake: Intake,
    state: BrokerState,
    quarantined: Sequence[QuarantineRow] | None = None,
) -> dict[str, list[tuple[Any, ...]]]:
    """The rows of every bronze table for one snapshot, each made by _row from named columns (in table schema column
    order); ``quarantined``: the bounded quarantine rows (default: every entry of the intake, cut to its limits)."""
    reports = []
    for report, stale in intake.reports:
        record = report.record
        f = record.to_json()
        reported = {name: f[name] for name in _REPORT_FIELDS}
        reports.append(
            _row(
                "member_reports",
                **reported,
                snapshot_id=snapshot_id,
                captured_at=captured_at,
                stale=stale,
                report_key=report.key,
                topology=json.dumps(f["topology"], sort_keys=True),
                origin=None if record.origin is None else str(record.origin),
                task_lags=f.get("task_lags"),
                task_offset_sums_error=record.task_offset_sums_error,
                protocol=None if record.protocol is None else str(record.protocol),
                **_settings_columns(record.settings),
            )
        )
    offsets = [
        _row(
            "changelog_offsets",
            snapshot_id=snapshot_id,
            **vars(c),
            task_id=f"{c.subtopology}_{c.partition}",
            end_offset=state.end_offsets.get((c.topic, c.partition), 0),
        )
        for c in intake.changelogs
    ]
    tasks = [_row("group_tasks", snapshot_id=snapshot_id, **vars(task)) for task in intake.tasks]
    committed = [
        _row(
            "group_offsets", snapshot_id=snapshot_id, group_id=group, topic=topic, partition=p, committed_offset=offset
        )
        for group, offsets_by_tp in sorted(state.committed.items())
        for (topic, p), offset in sorted(offsets_by_tp.items())
    ]
    rows = quarantined if quarantined is not None else [stored_row(q) for q in intake.quarantine]
    quarantine = [_row("quarantine", snapshot_id=snapshot_id, captured_at=captured_at, **vars(q)) for q in rows]
    members = [
        _row(
            "group_members",
            snapshot_id=snapshot_id,
            captured_at=captured_at,
            group_id=g.group_id,
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            host=m.host,
            assigned_partitions=list(m.assigned),
            group_state=g.state,
            group_type=g.group_type,
            partition_assignor=g.partition_assignor,
            coordinator=g.coordinator,
            process_id=intake.reporting.get((g.group_id, m.member_id)),
        )
        for g in sorted((state.membership or {}).values(), key=lambda g: g.group_id)
        for m in g.members
    ]
    checks = [
        _row(
            "membership_checks",
            snapshot_id=snapshot_id,
            captured_at=captured_at,
            group_id=f.group_id,
            member_id=f.member_id,
            process_id=f.process_id,
            code=f.reason.split(":", 1)[0],
            reason=f.reason,
            report_key=f.report_key,
            reported_at=f.reported_at,
            client_id=f.client_id,
            host=f.host,
        )
        for f in intake.findings
    ]
    snapshot = [
        _row(
            "snapshots",
            snapshot_id=snapshot_id,
            captured_at=captured_at,
            reports=intake.read,
            accepted_reports=len(reports),
            quarantined=len(quarantine),
            groups=len({report.record.group_id for report, _ in intake.reports}),
            skipped_groups=len(intake.skipped_groups),
            changelog_partitions=len(offsets),
        )
    ]
    return {
        "member_reports": reports,
        "changelog_offsets": offsets,
        "group_tasks": tasks,
        "group_offsets": committed,
        "quarantine": quarantine,
        "group_members": members,
        "membership_checks": checks,
        "snapshots": snapshot,  # last: its row marks the snapshot complete
    }


def write_snapshot(
    lake: Lake,
    snapshot_id: str,
    captured_at: int,
    intake: Intake,
    state: BrokerState,
    quarantine_cap: int = DEFAULT_CAP_PER_SOURCE,
) -> StageResult:
    """MERGE one snapshot's bronze rows (insert-only: a snapshot never changes once written). The quarantine is
    bounded: at most ``quarantine_cap`` rows a source, records an earlier snapshot holds not stored again."""
    outcomes = []
    seen = stored_hashes(lake, snapshot_id, candidate_hashes(intake.quarantine))
    bounded = bound_quarantine(intake.quarantine, quarantine_cap, seen)
    bronze = bronze_rows(snapshot_id, captured_at, intake, state, bounded.rows)
    for name in BRONZE_TABLES:
        if not bronze[name]:  # most nights most of the membership and quarantine tables get no rows
            outcomes.append(lake.merge_nothing(name))
            continue
        # Every bronze key holds the snapshot: the MERGE reads this snapshot's rows only, not every night's.
        outcomes.append(lake.merge(name, _frame(lake, name, bronze[name]), within=Scope(snapshot_id)))
    reasons = Counter(q.reason.split(":", 1)[0] for q in intake.quarantine if q.source == "reports")
    counts = {"reports_read": intake.read, "tombstones": intake.tombstones}
    counts["restored_reports_read"] = intake.restored_read  # not state reports: reports_read leaves them out
    counts["skipped_groups"] = len(intake.skipped_groups)
    counts.update({f"quarantined[{reason}]": n for reason, n in sorted(reasons.items())})
    counts.update({f"quarantine_not_stored[{source}]": n for source, n in sorted(bounded.dropped.items())})
    counts.update({f"quarantine_seen_before[{source}]": n for source, n in sorted(bounded.repeated.items())})
    if bounded.dropped or bounded.repeated:
        log.warning(
            "snapshot %s: quarantine bounded: %d entries over the cap of %d a source not stored, %d stored before",
            *(snapshot_id, sum(bounded.dropped.values()), quarantine_cap, sum(bounded.repeated.values())),
        )
    if state.membership is not None:
        counts["broker_members"] = sum(len(g.members) for g in state.membership.values())
        checks = Counter(f.reason.split(":", 1)[0] for f in intake.findings)
        counts.update({f"membership[{code}]": n for code, n in sorted(checks.items())})
    return StageResult("extract", snapshot_id, tuple(outcomes), counts)


def read_metadata_reports(
    settings: Settings, bootstrap: str, report_groups: set[str], captured_at: int, intake: Intake
) -> list[Report]:
    """Reports made from the group metadata of Kafka Streams groups that publish none (``report_groups`` are read
    from their reports), checked like any report; members and reports that fail go to ``intake.quarantine``, and
    which process each member is goes to ``intake.reporting``."""
    retry = ConnectRetry.from_settings(settings)
    listing = read_streams_groups(
        bootstrap, settings.kafka_config, report_groups, retry.timeout_s, retry.attempts, retry.backoff_s
    )
    for group_id, why in sorted(listing.passed_over.items()):
        log.info("group metadata: %s not read: %s", group_id, why)
    if not listing.groups:
        return []
    partitions = all_partition_counts(admin_client(settings, bootstrap), retry)
    reports: list[Report] = []
    for group_id, members in sorted(listing.groups.items()):
        read = group_reports(members, partitions, captured_at)
        intake.quarantine.extend(read.quarantine)
        for key, value in read.reports:
            outcome = parse_report(key, value)
            if isinstance(outcome, Quarantined):
                intake.quarantine.append(
                    Quarantined(GROUP_METADATA, outcome.key, outcome.raw, outcome.reason, group_id)
                )
            else:
                reports.append(outcome)
        intake.reporting.update({(group_id, m): p for m, p in read.processes.items()})
        log.info(
            "group metadata: %s: %d member(s), %d report(s), %d quarantined",
            *(group_id, len(members), len(read.reports), len(read.quarantine)),
        )
    return reports


def _reporting_gaps(
    lake: Lake, settings: Settings, bootstrap: str, metadata_groups: set[str]
) -> list[MembershipFinding]:
    """Groups planned from their metadata that should have reported (jobs.pipeline.plugin_groups), logged."""
    if not metadata_groups:
        return []
    topics = admin_client(settings, bootstrap).list_topics(timeout=settings.kafka_timeout_s).topics
    exists = settings.reports_topic in topics
    if not exists:
        log.error("the reports topic %s does not exist: run `rebalance-planner setup`", settings.reports_topic)
    gaps = reporting_gaps(
        metadata_groups, earlier_plugin_snapshots(lake, metadata_groups), settings.reports_topic, exists
    )
    for gap in gaps:
        log.warning("%s: %s", gap.group_id, gap.reason)
    return gaps


def _streams_gaps(
    lake: Lake, settings: Settings, bootstrap: str, streams_groups: frozenset[str], superseded: Mapping[str, str]
) -> list[MembershipFinding]:
    """Streams-protocol groups no plan can reach or that had our plugin (jobs.pipeline.plugin_groups), logged."""
    if not streams_groups:
        return []
    plugin_before = {**superseded, **earlier_plugin_snapshots(lake, streams_groups)}
    gaps = streams_protocol_gaps(streams_groups, plugin_before, broker_assignor(settings, bootstrap))
    for gap in gaps:
        log.warning("%s: %s", gap.group_id, gap.reason)
    return gaps


def discard_partial_snapshot(lake: Lake, snapshot_id: str) -> None:
    """Delete the rows a run cut short left for a snapshot it never completed (its ``snapshots`` row, written last,
    is missing): a re-run reads Kafka afresh, and two reads must never mix in one snapshot."""
    for name in BRONZE_TABLES:
        if lake.delete(name, "snapshot_id", [snapshot_id]):
            log.warning("snapshot %s: discarded the %s rows of an interrupted extract", snapshot_id, name)


def snapshot_exists(lake: Lake, snapshot_id: str) -> bool:
    return lake.read("snapshots", snapshot_id).limit(1).count() > 0


def run_extract(lake: Lake, settings: Settings, bootstrap: str, snapshot_id: str | None = None) -> StageResult:
    """Read the reports topic to its end and what the broker says about the report groups (members, offsets);
    cross-check the two and write everything as a new (or the given) snapshot. BrokerUnreachable when no broker
    answers at ``bootstrap`` within the bounded retries (nothing is written then)."""
    if snapshot_id is not None and snapshot_exists(lake, snapshot_id):
        log.info("snapshot %s already extracted; nothing to do", snapshot_id)
        return StageResult("extract", snapshot_id, counts={"already_extracted": 1})
    if snapshot_id is not None:
        discard_partial_snapshot(lake, snapshot_id)
    await_broker(settings, bootstrap)
    captured_at = int(time.time() * 1000)
    snapshot_id = snapshot_id or new_snapshot_id(captured_at)
    properties = dict(settings.kafka_config)
    records = read_latest_by_key(bootstrap, settings.reports_topic, properties, settings.kafka_timeout_s)
    log.info("snapshot %s: %d report keys read from %s", snapshot_id, len(records), settings.reports_topic)
    parsed, intake = parse_records(records)
    streams = read_streams_protocol_reports(settings, bootstrap, captured_at, intake)  # KIP-1071 groups
    superseded = {r.group_id: snapshot_id for r in parsed if r.group_id in streams.groups}  # plugin reports, now
    parsed = without_superseded(parsed, streams.groups, intake)
    groups = {r.group_id for r in parsed} | {
        q.group_id for q in intake.quarantine if q.group_id is not None and q.group_id not in streams.groups
    }
    from_metadata = read_metadata_reports(settings, bootstrap, groups, captured_at, intake)
    parsed.extend(from_metadata)
    parsed.extend(streams.reports)
    metadata_groups = {r.group_id for r in from_metadata} | {
        q.group_id for q in intake.quarantine if q.source == GROUP_METADATA and q.group_id is not None
    }
    state = read_broker_state(settings, bootstrap, topics_named(parsed), groups | metadata_groups)
    intake = triage_groups(parsed, state.partitions, captured_at, settings.stale_report_age_ms, intake)
    # A group read from its own metadata needs no cross-check against that same metadata.
    intake = check_membership([r for r in parsed if r.group_id in groups], state.membership or {}, groups, intake)
    intake.findings.extend(_reporting_gaps(lake, settings, bootstrap, metadata_groups))
    intake.findings.extend(_streams_gaps(lake, settings, bootstrap, streams.groups, superseded))
    ends = end_offsets(
        admin_client(settings, bootstrap),
        sorted({(c.topic, c.partition) for c in intake.changelogs}),
        ConnectRetry.from_settings(settings),
    )
    state = BrokerState(state.partitions, ends, state.committed, state.membership)
    log.info(
        "snapshot %s: %d reports kept, %d quarantined, %d groups skipped, %d changelog partitions, "
        "%d membership findings",
        snapshot_id,
        len(intake.reports),
        len(intake.quarantine),
        len(intake.skipped_groups),
        len(ends),
        len(intake.findings),
    )
    return write_snapshot(lake, snapshot_id, captured_at, intake, state, settings.quarantine_cap_per_source)
