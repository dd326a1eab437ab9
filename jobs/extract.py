"""Stage 1, extract: the reports topic, changelog end offsets and committed offsets → bronze tables of a snapshot."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]
from pyspark.sql import DataFrame

from assignor.runtime.kafka_io import read_latest_by_key
from jobs.intake import Intake, parse_records, topics_named, triage_groups
from jobs.lake import Lake
from jobs.settings import Settings
from jobs.stage import StageResult
from jobs.tables import table_schema

log = logging.getLogger(__name__)
_CHUNK = 2_000


def new_snapshot_id(now_ms: int) -> str:
    """A sortable, unique snapshot id: UTC time of capture plus a random suffix."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now_ms / 1000)) + "-" + uuid.uuid4().hex[:6]


@dataclass(frozen=True)
class BrokerState:
    """What the broker says besides the reports: partition counts, end offsets, committed offsets."""

    partitions: Mapping[str, int]
    end_offsets: Mapping[tuple[str, int], int]
    committed: Mapping[str, Mapping[tuple[str, int], int]]  # group -> (topic, partition) -> offset


def _partition_counts(admin: AdminClient, topics: set[str], timeout_s: float) -> dict[str, int]:
    metadata = admin.list_topics(timeout=timeout_s).topics
    return {t: len(metadata[t].partitions) for t in topics if t in metadata and metadata[t].error is None}


def _end_offsets(admin: AdminClient, partitions: list[tuple[str, int]], timeout_s: float) -> dict[tuple[str, int], int]:
    ends: dict[tuple[str, int], int] = {}
    for start in range(0, len(partitions), _CHUNK):
        chunk = partitions[start : start + _CHUNK]
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        requests = {TopicPartition(t, p): latest for t, p in chunk}
        for tp, future in admin.list_offsets(requests, request_timeout=timeout_s).items():
            ends[(tp.topic, tp.partition)] = int(future.result().offset)
        log.info("changelog end offsets: %d of %d partitions", len(ends), len(partitions))
    return ends


def _committed(admin: AdminClient, groups: set[str], timeout_s: float) -> dict[str, dict[tuple[str, int], int]]:
    """Committed offsets of the report groups the broker lists (brokers may list only groups that committed)."""
    listed = {g.group_id for g in admin.list_consumer_groups(request_timeout=timeout_s).result().valid}
    committed: dict[str, dict[tuple[str, int], int]] = {}
    for group in sorted(listed & groups):
        request = [ConsumerGroupTopicPartitions(group)]
        for future in admin.list_consumer_group_offsets(request, request_timeout=timeout_s).values():
            offsets = future.result().topic_partitions or []
            committed[group] = {(tp.topic, tp.partition): int(tp.offset) for tp in offsets if tp.offset >= 0}
    return committed


def read_broker_state(settings: Settings, bootstrap: str, intake_topics: set[str], groups: set[str]) -> BrokerState:
    """Partition counts of the named topics, end offsets of their partitions, committed offsets of the groups."""
    admin = _admin(settings, bootstrap)
    timeout = settings.kafka_timeout_s
    partitions = _partition_counts(admin, intake_topics, timeout)
    try:
        committed = _committed(admin, groups, timeout)
    except KafkaException as err:  # listing groups is optional: not every broker or ACL offers it
        log.warning("committed offsets unavailable: %s", err)
        committed = {}
    return BrokerState(partitions, {}, committed)


def _admin(settings: Settings, bootstrap: str) -> AdminClient:
    config: dict[str, str | int | float | bool] = {**settings.kafka_properties(bootstrap)}
    return AdminClient(config)


def _frame(lake: Lake, name: str, rows: list[tuple[Any, ...]]) -> DataFrame:
    return lake.spark.createDataFrame(rows, schema=table_schema(name).ddl)


def bronze_rows(
    snapshot_id: str, captured_at: int, intake: Intake, state: BrokerState
) -> dict[str, list[tuple[Any, ...]]]:
    """The rows of every bronze table for one snapshot, in table schema column order."""
    reports = []
    for report, stale in intake.reports:
        f = report.fields
        reports.append(
            (
                *(snapshot_id, captured_at, f["group_id"], f["process_id"], f["reported_at"], stale, report.key),
                *(f["schema_version"], f["member_id"], f["client_id"], f["host"], f["capacity"], f["client_tags"]),
                *(f["protocol_version"], f["generation"], f["active_tasks"], f["standby_tasks"], f["warmup_tasks"]),
                *(f["task_offset_sums"], json.dumps(f["topology"], sort_keys=True), f["plan_id"]),
                f["fallback_reason"],
            )
        )
    offsets = [
        (snapshot_id, group, sub, topic, p, f"{sub}_{p}", state.end_offsets.get((topic, p), 0))
        for group, sub, topic, p in intake.changelogs
    ]
    tasks = [(snapshot_id, *task) for task in intake.tasks]
    committed = [
        (snapshot_id, group, topic, p, offset)
        for group, offsets_by_tp in sorted(state.committed.items())
        for (topic, p), offset in sorted(offsets_by_tp.items())
    ]
    quarantine = [(snapshot_id, q.source, q.key, q.raw, q.reason, captured_at, q.group_id) for q in intake.quarantine]
    groups = {r[2] for r in reports}
    snapshot = [
        (
            *(snapshot_id, captured_at, intake.read, len(reports), len(quarantine), len(groups)),
            *(len(intake.skipped_groups), len(offsets)),
        )
    ]
    return {
        "member_reports": reports,
        "changelog_offsets": offsets,
        "group_tasks": tasks,
        "group_offsets": committed,
        "quarantine": quarantine,
        "snapshots": snapshot,  # last: its row marks the snapshot complete
    }


def write_snapshot(lake: Lake, snapshot_id: str, captured_at: int, intake: Intake, state: BrokerState) -> StageResult:
    """MERGE one snapshot's bronze rows (insert-only: a snapshot never changes once written)."""
    outcomes = []
    for name, rows in bronze_rows(snapshot_id, captured_at, intake, state).items():
        outcomes.append(lake.merge(name, _frame(lake, name, rows)))
    reasons = Counter(q.reason.split(":", 1)[0] for q in intake.quarantine if q.source == "reports")
    counts = {"reports_read": intake.read, "tombstones": intake.tombstones}
    counts["skipped_groups"] = len(intake.skipped_groups)
    counts.update({f"quarantined[{reason}]": n for reason, n in sorted(reasons.items())})
    return StageResult("extract", snapshot_id, tuple(outcomes), counts)


def snapshot_exists(lake: Lake, snapshot_id: str) -> bool:
    return lake.read("snapshots", snapshot_id).limit(1).count() > 0


def run_extract(lake: Lake, settings: Settings, bootstrap: str, snapshot_id: str | None = None) -> StageResult:
    """Read the reports topic to its end and the broker's offsets; write them as a new (or the given) snapshot."""
    if snapshot_id is not None and snapshot_exists(lake, snapshot_id):
        log.info("snapshot %s already extracted; nothing to do", snapshot_id)
        return StageResult("extract", snapshot_id, counts={"already_extracted": 1})
    captured_at = int(time.time() * 1000)
    snapshot_id = snapshot_id or new_snapshot_id(captured_at)
    properties = dict(settings.kafka_config)
    records = read_latest_by_key(bootstrap, settings.reports_topic, properties, settings.kafka_timeout_s)
    log.info("snapshot %s: %d report keys read from %s", snapshot_id, len(records), settings.reports_topic)
    parsed, intake = parse_records(records)
    state = read_broker_state(settings, bootstrap, topics_named(parsed), {r.group_id for r in parsed})
    intake = triage_groups(parsed, state.partitions, captured_at, settings.stale_report_age_ms, intake)
    ends = _end_offsets(
        _admin(settings, bootstrap),
        sorted({(topic, p) for _, _, topic, p in intake.changelogs}),
        settings.kafka_timeout_s,
    )
    state = BrokerState(state.partitions, ends, state.committed)
    log.info(
        "snapshot %s: %d reports kept, %d quarantined, %d groups skipped, %d changelog partitions",
        snapshot_id,
        len(intake.reports),
        len(intake.quarantine),
        len(intake.skipped_groups),
        len(ends),
    )
    return write_snapshot(lake, snapshot_id, captured_at, intake, state)
