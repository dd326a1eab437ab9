"""Stage 1, extract: the reports topic, the broker's group membership, changelog end offsets and committed offsets
→ bronze tables of a snapshot, with the reports cross-checked against the members the broker lists."""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # public, not in __all__
    AdminClient,
    ConsumerGroupDescription,
    OffsetSpec,
)
from pyspark.sql import DataFrame

from assignor.protocol.reported_settings import ReportedSettings
from assignor.runtime.kafka_io import read_latest_by_key
from jobs.lakehouse.lake import Lake, Scope
from jobs.lakehouse.tables import table_schema
from jobs.pipeline.extract_streams import read_streams_protocol_reports, without_superseded
from jobs.pipeline.group_metadata import read_streams_groups
from jobs.pipeline.intake import (
    BrokerGroup,
    BrokerMember,
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
from jobs.pipeline.stage import BrokerUnreachable, StageResult
from jobs.pipeline.streams_assignor import broker_assignor
from jobs.pipeline.streams_groups import GROUP_METADATA, group_reports
from jobs.settings import Settings

log = logging.getLogger(__name__)
T = TypeVar("T")
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
_BROKER_PREFIX = re.compile(r"^\S+/\S+: ")
_CHUNK = 2_000
_DESCRIBE_CHUNK = 200


@dataclass(frozen=True)
class ConnectRetry:
    """How hard a stage tries to reach the broker before giving up: ``attempts`` tries of at most ``timeout_s``
    each, waiting ``backoff_s`` after the first failure and twice as long after each next (at most
    ``backoff_max_s``). Worst case: attempts × timeout_s plus the waits."""

    attempts: int
    backoff_s: float
    backoff_max_s: float
    timeout_s: float

    @staticmethod
    def from_settings(settings: Settings) -> ConnectRetry:
        return ConnectRetry(
            attempts=settings.kafka_connect_attempts,
            backoff_s=settings.kafka_retry_backoff_s,
            backoff_max_s=settings.kafka_retry_backoff_max_s,
            timeout_s=settings.kafka_timeout_s,
        )

    def delay(self, failed_attempts: int) -> float:
        """The wait after the ``failed_attempts``-th failure (1-based)."""
        return float(min(self.backoff_s * 2 ** (failed_attempts - 1), self.backoff_max_s))


def _probe(properties: Mapping[str, str], timeout_s: float) -> str | None:
    """None when a broker at the bootstrap answers a DescribeCluster within ``timeout_s``, else why not. Stops
    early once librdkafka finds every bootstrap broker down (a refused connection takes milliseconds)."""
    errors: list[KafkaError] = []
    config: dict[str, str | int | float | bool | Any] = {"log_level": 0, **properties, "error_cb": errors.append}
    admin = AdminClient(config)
    deadline = time.monotonic() + timeout_s
    future = admin.describe_cluster(request_timeout=timeout_s)
    while not future.done() and time.monotonic() < deadline:
        admin.poll(0.05)  # serves error_cb
        if any(e.code() == KafkaError._ALL_BROKERS_DOWN for e in errors):
            break
    if future.done():
        try:
            future.result()
            return None
        except KafkaException as err:
            errors.append(err.args[0])
    specific = [e for e in errors if e.code() != KafkaError._ALL_BROKERS_DOWN]
    if not errors:
        return f"no answer within {timeout_s:g} s"
    # librdkafka prefixes the broker's name ("127.0.0.1:9092/bootstrap: "); the message names the bootstrap already.
    return _BROKER_PREFIX.sub("", str((specific or errors)[-1].str()))


def await_broker(settings: Settings, bootstrap: str, retry: ConnectRetry | None = None) -> None:
    """Return once a broker at ``bootstrap`` answers; retry with exponential backoff, then BrokerUnreachable."""
    retry = retry or ConnectRetry.from_settings(settings)
    properties = settings.kafka_properties(bootstrap)
    started = time.monotonic()
    reason = "not tried"
    for attempt in range(1, retry.attempts + 1):
        failure = _probe(properties, retry.timeout_s)
        if failure is None:
            if attempt > 1:
                log.info("Kafka at %s answered at attempt %d of %d", bootstrap, attempt, retry.attempts)
            return
        reason = failure
        if attempt < retry.attempts:
            wait = retry.delay(attempt)
            log.warning(
                "Kafka at %s unreachable (attempt %d of %d): %s; retrying in %.1f s",
                *(bootstrap, attempt, retry.attempts, failure, wait),
            )
            time.sleep(wait)  # backoff between attempts, not a wait for another process's state
    raise BrokerUnreachable(bootstrap, retry.attempts, time.monotonic() - started, reason)


def new_snapshot_id(now_ms: int) -> str:
    """A sortable, unique snapshot id: UTC time of capture plus a random suffix."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now_ms / 1000)) + "-" + uuid.uuid4().hex[:6]


@dataclass(frozen=True)
class BrokerState:
    """What the broker says besides the reports: partition counts, end offsets, committed offsets, and the
    membership of the report groups it lists (None: not asked, e.g. a snapshot built without a broker)."""

    partitions: Mapping[str, int]
    end_offsets: Mapping[tuple[str, int], int]
    committed: Mapping[str, Mapping[tuple[str, int], int]]  # group -> (topic, partition) -> offset
    membership: Mapping[str, BrokerGroup] | None = None  # group -> members; groups the broker does not list absent


# Broker answers that mean "not now" (a coordinator still loading after a restart, a leader moving): ask again.
_TRANSIENT = frozenset(
    {
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
    }
)


def _transient(error: Any) -> bool:
    return isinstance(error, KafkaError) and (error.retriable() or error.code() in _TRANSIENT)


def _retrying(call: Callable[[], T], what: str, retry: ConnectRetry) -> T:
    """``call()``, again after a backoff while the broker answers "not now"; its last error once retries run out."""
    for attempt in range(1, retry.attempts + 1):
        try:
            return call()
        except KafkaException as err:
            if attempt == retry.attempts or not _transient(err.args[0]):
                raise
            wait = retry.delay(attempt)
            log.warning(
                "%s: %s; retrying in %.1f s (attempt %d of %d)", what, err.args[0], wait, attempt, retry.attempts
            )
            time.sleep(wait)  # backoff between attempts
    raise AssertionError("unreachable: the last attempt returns or raises")


def _partition_counts(admin: AdminClient, topics: set[str], retry: ConnectRetry) -> dict[str, int]:
    metadata = _retrying(lambda: admin.list_topics(timeout=retry.timeout_s).topics, "topic metadata", retry)
    return {t: len(metadata[t].partitions) for t in topics if t in metadata and metadata[t].error is None}


def _all_partition_counts(admin: AdminClient, retry: ConnectRetry) -> dict[str, int]:
    metadata = _retrying(lambda: admin.list_topics(timeout=retry.timeout_s).topics, "topic metadata", retry)
    return {t: len(m.partitions) for t, m in metadata.items() if m.error is None}


def _end_offsets(
    admin: AdminClient, partitions: list[tuple[str, int]], retry: ConnectRetry
) -> dict[tuple[str, int], int]:
    ends: dict[tuple[str, int], int] = {}

    def chunk_ends(chunk: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        requests = {TopicPartition(t, p): latest for t, p in chunk}
        futures = admin.list_offsets(requests, request_timeout=retry.timeout_s)
        return {(tp.topic, tp.partition): int(future.result().offset) for tp, future in futures.items()}

    for start in range(0, len(partitions), _CHUNK):
        chunk = partitions[start : start + _CHUNK]
        ends.update(_retrying(partial(chunk_ends, chunk), "changelog end offsets", retry))
        log.info("changelog end offsets: %d of %d partitions", len(ends), len(partitions))
    return ends


def _listed_groups(admin: AdminClient, retry: ConnectRetry) -> set[str]:
    def listed() -> set[str]:
        listing = admin.list_consumer_groups(request_timeout=retry.timeout_s).result()
        for error in listing.errors:  # a broker that did not answer: its groups would be missing from the listing
            raise KafkaException(error)
        return {g.group_id for g in listing.valid}

    return _retrying(listed, "listing consumer groups", retry)


def _committed(admin: AdminClient, groups: list[str], retry: ConnectRetry) -> dict[str, dict[tuple[str, int], int]]:
    """Committed offsets of the given (listed) groups."""

    def offsets(group: str) -> dict[tuple[str, int], int]:
        request = [ConsumerGroupTopicPartitions(group)]
        (future,) = admin.list_consumer_group_offsets(request, request_timeout=retry.timeout_s).values()
        tps = future.result().topic_partitions or []
        return {(tp.topic, tp.partition): int(tp.offset) for tp in tps if tp.offset >= 0}

    return {g: _retrying(partial(offsets, g), f"committed offsets of {g}", retry) for g in groups}


def _name(value: Any) -> str:
    """An enum's name as Kafka's tools spell it (PREPARING_REBALANCE → PreparingRebalance), or the text."""
    name = getattr(value, "name", None)
    return name.title().replace("_", "") if isinstance(name, str) else str(value or "")


def broker_group(description: ConsumerGroupDescription) -> BrokerGroup:
    """The members of a described group, their client, host and assigned partitions."""
    members = []
    for m in description.members:
        partitions = (m.assignment.topic_partitions if m.assignment is not None else None) or []
        assigned = tuple(sorted(f"{tp.topic}-{tp.partition}" for tp in partitions))
        members.append(BrokerMember(m.member_id, m.client_id or "", m.host or "", m.group_instance_id, assigned))
    node = description.coordinator
    coordinator = f"{node.host}:{node.port} (id {node.id})" if node is not None else ""
    return BrokerGroup(
        group_id=description.group_id,
        state=_name(description.state),
        group_type=_name(getattr(description, "type", None)),
        partition_assignor=description.partition_assignor or "",
        coordinator=coordinator,
        members=tuple(sorted(members, key=lambda m: m.member_id)),
    )


def _membership(admin: AdminClient, groups: list[str], retry: ConnectRetry) -> dict[str, BrokerGroup]:
    """The described groups. Groups the broker answers "not now" for are asked again after a backoff; a group it
    will not describe (e.g. GROUP_AUTHORIZATION_FAILED) carries the error instead of members."""
    described: dict[str, BrokerGroup] = {}
    pending = list(groups)
    for attempt in range(1, retry.attempts + 1):
        again: dict[str, KafkaError] = {}
        for start in range(0, len(pending), _DESCRIBE_CHUNK):
            chunk = pending[start : start + _DESCRIBE_CHUNK]
            for group_id, future in admin.describe_consumer_groups(chunk, request_timeout=retry.timeout_s).items():
                try:
                    described[group_id] = broker_group(future.result())
                except KafkaException as err:
                    error = err.args[0]
                    if _transient(error) and attempt < retry.attempts:
                        again[group_id] = error
                    else:
                        described[group_id] = BrokerGroup(group_id, "", "", "", "", error=str(error.str()))
        if not again:
            break
        wait = retry.delay(attempt)
        log.warning("describing %d group(s): %s; retrying in %.1f s", len(again), next(iter(again.values())), wait)
        time.sleep(wait)  # backoff between attempts
        pending = sorted(again)
    return described


def read_broker_state(settings: Settings, bootstrap: str, intake_topics: set[str], groups: set[str]) -> BrokerState:
    """Partition counts of the named topics; of the named groups the broker lists, their members (with client,
    host and assignment) and committed offsets. End offsets come later, once the tasks are known."""
    admin = _admin(settings, bootstrap)
    retry = ConnectRetry.from_settings(settings)
    partitions = _partition_counts(admin, intake_topics, retry)
    listed = sorted(_listed_groups(admin, retry) & groups)
    membership = _membership(admin, listed, retry)
    committed = _committed(admin, listed, retry)
    members = sum(len(g.members) for g in membership.values())
    log.info("broker lists %d of %d report groups, %d members", len(listed), len(groups), members)
    return BrokerState(partitions, {}, committed, membership)


def read_membership(settings: Settings, bootstrap: str, groups: set[str]) -> dict[str, BrokerGroup]:
    """The members the broker lists for each of ``groups``; a group the broker does not list is absent."""
    admin = _admin(settings, bootstrap)
    retry = ConnectRetry.from_settings(settings)
    return _membership(admin, sorted(_listed_groups(admin, retry) & groups), retry)


def _admin(settings: Settings, bootstrap: str) -> AdminClient:
    config: dict[str, str | int | float | bool] = {**settings.kafka_properties(bootstrap)}
    return AdminClient(config)


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
        # Every bronze key holds the snapshot: the MERGE reads this snapshot's rows only, not every night's.
        outcomes.append(lake.merge(name, _frame(lake, name, bronze[name]), within=Scope(snapshot_id)))
    reasons = Counter(q.reason.split(":", 1)[0] for q in intake.quarantine if q.source == "reports")
    counts = {"reports_read": intake.read, "tombstones": intake.tombstones}
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
    partitions = _all_partition_counts(_admin(settings, bootstrap), retry)
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
    topics = _admin(settings, bootstrap).list_topics(timeout=settings.kafka_timeout_s).topics
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
    ends = _end_offsets(
        _admin(settings, bootstrap),
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
