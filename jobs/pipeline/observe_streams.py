"""Observe's part for streams-protocol groups (KIP-1071): their live assignment comes from the broker's description
(they send no reports), and once their plan is REALIZED or EXPIRED our assignor is deselected."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping

from jobs.lakehouse.lake import Lake
from jobs.pipeline.broker_streams import parse_reader_output
from jobs.pipeline.intake import Report, parse_records
from jobs.pipeline.report_only import STREAMS_PROTOCOL_REASON, report_only_reasons
from jobs.pipeline.streams_assignor import release_assignor
from jobs.pipeline.streams_reader import StreamsGroupsUnreadable, read_streams_groups_lines
from jobs.settings import Settings

log = logging.getLogger(__name__)


def streams_protocol_groups(lake: Lake, snapshot_ids: Iterable[str]) -> set[str]:
    """The groups of those snapshots read from the broker's description of a streams-protocol group."""
    reasons = report_only_reasons(lake, sorted(set(snapshot_ids)))
    return {g for g, why in reasons.items() if why == STREAMS_PROTOCOL_REASON}


def streams_group_reports(settings: Settings, bootstrap: str, group_ids: Iterable[str]) -> list[Report]:
    """What the members of these groups hold now, as reports, from one run of the streams-groups reader; none
    when it cannot run (logged: the next observe tries again)."""
    wanted = set(group_ids)
    try:
        lines = read_streams_groups_lines(
            bootstrap, settings.kafka_config, settings.kafka_timeout_s, jar=settings.streams_reader_jar
        )
    except StreamsGroupsUnreadable as err:
        log.warning("observe: streams groups %s not read: %s", sorted(wanted), err)
        return []
    read = parse_reader_output(lines, int(time.time() * 1000))
    records = {key: value for g in read.groups if g.group_id in wanted for key, value in g.reports}
    reports, intake = parse_records(records)
    if intake.quarantine:
        log.warning("observe: %d streams-group member(s) unreadable", len(intake.quarantine))
    return reports


def release_finished(settings: Settings, bootstrap: str, finished: Mapping[str, str], streams: set[str]) -> list[str]:
    """Deselect our assignor for the streams groups whose plan (plan_id -> group_id) is REALIZED or EXPIRED."""
    groups = {g for g in finished.values() if g in streams}
    return release_assignor(settings, bootstrap, groups) if groups else []
