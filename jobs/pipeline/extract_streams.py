"""extract's reading of streams-protocol groups (KIP-1071): which groups the broker lists as streams groups, one
run of the Java reader for all of them, and their reports checked like any report. Groups it cannot read are
quarantined by name with the reason, never silently left out."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from kafka import KafkaAdminClient

from assignor.runtime.kafka_io import kafka_python_security
from jobs.pipeline.broker_streams import BROKER_STREAMS, parse_reader_output
from jobs.pipeline.group_metadata import with_retries
from jobs.pipeline.intake import Intake, Quarantined, Report, parse_report
from jobs.pipeline.streams_reader import StreamsGroupsUnreadable, read_streams_groups_lines
from jobs.settings import Settings

log = logging.getLogger(__name__)
UNREAD = "streams_group_unread"  # quarantine reason code of a listed streams group extract could not read


def listed_streams_groups(bootstrap: str, properties: Mapping[str, str], timeout_s: float) -> set[str]:
    """The groups the broker lists with type ``streams`` (one ListGroups; Python's clients list, not describe)."""
    admin = KafkaAdminClient(
        bootstrap_servers=bootstrap,
        request_timeout_ms=int(timeout_s * 1000),
        client_id="rebalance-planner-extract",
        **kafka_python_security(properties),
    )
    try:
        # A broker just started answers "coordinator loading" for a while: ask again rather than fail the night.
        listed = with_retries(admin.list_groups, "listing groups", attempts=5, backoff_s=1.0)
        return {g["group_id"] for g in listed if (g.get("group_type") or "").lower() == "streams"}
    finally:
        admin.close()


@dataclass(frozen=True)
class StreamsProtocolReports:
    """The reports made for streams-protocol groups, and the ids of every streams group the broker listed."""

    reports: list[Report]
    groups: frozenset[str]


def _unread(groups: set[str], why: str) -> list[Quarantined]:
    return [Quarantined(BROKER_STREAMS, g, None, f"{UNREAD}: {why}", g) for g in sorted(groups)]


def read_streams_protocol_reports(
    settings: Settings, bootstrap: str, captured_at: int, intake: Intake
) -> StreamsProtocolReports:
    """Reports of every streams-protocol group, made from the broker's description of it; members, lines and
    groups that fail go to ``intake.quarantine`` with the reason, and which process each member is goes to
    ``intake.reporting``. Java runs only when the broker lists a streams group."""
    listed = listed_streams_groups(bootstrap, settings.kafka_config, settings.kafka_timeout_s)
    if not listed:
        return StreamsProtocolReports([], frozenset())
    try:
        lines = read_streams_groups_lines(
            bootstrap, settings.kafka_config, settings.kafka_timeout_s, jar=settings.streams_reader_jar
        )
    except StreamsGroupsUnreadable as err:
        log.error("streams groups: %d listed, none read: %s", len(listed), err)
        intake.quarantine.extend(_unread(listed, str(err)))
        return StreamsProtocolReports([], frozenset(listed))
    read = parse_reader_output(lines, captured_at)
    intake.quarantine.extend(read.quarantine)
    seen = {g.group_id for g in read.groups} | {q.group_id for q in read.quarantine if q.group_id is not None}
    if not read.complete:
        intake.quarantine.extend(_unread(listed - seen, "the reader's output ended early (no end line)"))
    reports: list[Report] = []
    for group in read.groups:
        intake.quarantine.extend(group.quarantine)
        for key, value in group.reports:
            outcome = parse_report(key, value)
            if isinstance(outcome, Quarantined):
                bad = Quarantined(BROKER_STREAMS, outcome.key, outcome.raw, outcome.reason, group.group_id)
                intake.quarantine.append(bad)
            else:
                reports.append(outcome)
        intake.reporting.update({(group.group_id, m): p for m, p in group.processes.items()})
        log.info(
            "streams group %s (%s, epoch %d, assignor %s, %s standby replica(s)): %d report(s), %d quarantined",
            *(group.group_id, group.state, group.group_epoch, group.assignor_name or "default"),
            *(group.settings.num_standby_replicas, len(group.reports), len(group.quarantine)),
        )
    return StreamsProtocolReports(reports, frozenset(listed | seen))


SUPERSEDED = "superseded_by_streams_protocol"


def without_superseded(parsed: list[Report], streams_groups: frozenset[str], intake: Intake) -> list[Report]:
    """The reports topic's reports, less those of groups that run the streams protocol now (e.g. an application
    that had our plugin and switched ``group.protocol``): the broker's description is what the group is today.
    Each one left out is quarantined, naming the group."""
    kept = []
    for report in parsed:
        if report.group_id in streams_groups:
            why = f"{SUPERSEDED}: group {report.group_id} runs the streams protocol (KIP-1071) now; the plugin does "
            why += "nothing there and the group is read from the broker instead"
            intake.quarantine.append(Quarantined("reports", report.key, report.raw, why, report.group_id))
        else:
            kept.append(report)
    return kept
