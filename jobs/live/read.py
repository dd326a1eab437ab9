"""The I/O behind ``status``: the reports and plans topics, the broker's metadata of report-only classic groups, its
description of streams-protocol groups with our assignor's decisions, and (when the lake is there) plan steps."""
# ruff: noqa: PLC0415 -- the lake's engine loads only when a plan's steps are asked for

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient

from assignor.protocol.restored_offsets import is_restored_key
from assignor.protocol.state_report import StateReport
from assignor.runtime.kafka_io import read_latest_by_key
from jobs.live.groups import GroupDescription, describe_reports
from jobs.live.status import GroupStatus, PublishedPlan, Step, group_statuses
from jobs.live.streams import describe_streams_group, group_decision
from jobs.pipeline.broker_streams import parse_reader_output
from jobs.pipeline.extract_streams import listed_streams_groups
from jobs.pipeline.group_metadata import read_streams_groups
from jobs.pipeline.intake import Quarantined, parse_report
from jobs.pipeline.streams_assignor import DECISIONS_TOPIC
from jobs.pipeline.streams_groups import group_reports
from jobs.pipeline.streams_reader import StreamsGroupsUnreadable, read_streams_groups_lines
from jobs.settings import Settings

log = logging.getLogger(__name__)
_MAX_RECORD_BYTES = 1024 * 1024  # the contract's bound on a record; larger ones are not parsed
_MAX_SEQUENCE = 2**63 - 1


class MissingTopicError(RuntimeError):
    """A product topic does not exist on the cluster: ``rebalance-planner setup`` creates it."""


@dataclass(frozen=True)
class LiveRead:
    """Everything status shows, plus how many report records could not be read (skipped, counted)."""

    statuses: list[GroupStatus]
    unreadable_reports: int
    lake: str  # "read", "absent" or "skipped": whether steps could be compared
    notes: tuple[str, ...] = ()  # what could not be read (e.g. the streams-groups reader), one line each


def _topics(settings: Settings, bootstrap: str) -> set[str]:
    admin = AdminClient({**settings.kafka_properties(bootstrap)})
    return set(admin.list_topics(timeout=settings.kafka_timeout_s).topics)


def read_reports(settings: Settings, bootstrap: str) -> tuple[list[StateReport], int]:
    """The newest report per key that keeps the contract's rules; how many were not (unreadable, out of bounds)."""
    records = read_latest_by_key(bootstrap, settings.reports_topic, settings.kafka_config, settings.kafka_timeout_s)
    reports, bad = [], 0
    for key, value in records.items():
        if value is None or is_restored_key(key.decode("utf-8", errors="replace")):
            continue  # a restored-offsets report: observe reads it, status shows state reports only
        parsed = parse_report(key, value)
        if isinstance(parsed, Quarantined):
            bad += 1
        else:
            reports.append(parsed.record)
    return reports, bad


def _published(value: bytes) -> PublishedPlan | None:
    if len(value) > _MAX_RECORD_BYTES:
        return None
    try:
        body = json.loads(value)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(body, dict):
        return None
    plan_id, sequence, created = body.get("plan_id"), body.get("sequence"), body.get("created_at")
    return PublishedPlan(
        plan_id=plan_id if isinstance(plan_id, str) else None,
        sequence=sequence if isinstance(sequence, int) and 0 <= sequence <= _MAX_SEQUENCE else None,
        withdrawn=body.get("withdrawn") is True,
        created_at=created if isinstance(created, int) and 0 <= created <= _MAX_SEQUENCE else None,
    )


def read_published(settings: Settings, bootstrap: str) -> dict[str, PublishedPlan]:
    """group_id -> the newest record on the plans topic (not verified: status only names it)."""
    records = read_latest_by_key(bootstrap, settings.plans_topic, settings.kafka_config, settings.kafka_timeout_s)
    out = {}
    for key, value in records.items():
        plan = _published(value) if value is not None else None
        if plan is not None:
            out[key.decode("utf-8", "replace")] = plan
    return out


def read_metadata_groups(settings: Settings, bootstrap: str, exclude: set[str], now_ms: int) -> list[StateReport]:
    """Reports made from the broker's metadata of classic Kafka Streams groups that publish none (extract's reader)."""
    listing = read_streams_groups(bootstrap, settings.kafka_config, exclude, settings.kafka_timeout_s)
    if not listing.groups:
        return []
    admin = AdminClient({**settings.kafka_properties(bootstrap)})
    metadata = admin.list_topics(timeout=settings.kafka_timeout_s).topics
    partitions = {t: len(m.partitions) for t, m in metadata.items() if m.error is None}
    reports = []
    for members in listing.groups.values():
        for key, value in group_reports(members, partitions, now_ms).reports:
            parsed = parse_report(key, value)
            if not isinstance(parsed, Quarantined):
                reports.append(parsed.record)
    return reports


@dataclass(frozen=True)
class StreamsRead:
    """The streams-protocol groups the broker lists, those read (with the reports they supersede), and why not."""

    listed: frozenset[str]
    descriptions: list[GroupDescription]
    note: str | None


def read_streams_status(
    settings: Settings, bootstrap: str, topics: set[str], superseded: Mapping[str, int]
) -> StreamsRead:
    """Every streams-protocol group as the broker describes it (one bounded reader run, only when ListGroups shows
    one), with our assignor's newest decision when its topic exists. ``superseded``: group -> old plugin reports
    of it on the reports topic. Failures come back as a one-line note."""
    try:
        listed = listed_streams_groups(bootstrap, settings.kafka_config, settings.kafka_timeout_s)
    except Exception as err:  # kafka-python raises its own hierarchy; status shows the rest regardless
        return StreamsRead(frozenset(), [], f"streams-protocol groups not listed: {type(err).__name__}: {err}")
    if not listed:
        return StreamsRead(frozenset(), [], None)
    try:
        lines = read_streams_groups_lines(
            bootstrap, settings.kafka_config, settings.kafka_timeout_s, jar=settings.streams_reader_jar
        )
    except (StreamsGroupsUnreadable, OSError) as err:  # OSError: the JVM could not even be started
        return StreamsRead(frozenset(listed), [], f"{len(listed)} streams-protocol group(s) not shown: {err}")
    parsed = parse_reader_output(lines, int(time.time() * 1000))
    decisions: Mapping[bytes, bytes | None] = {}
    note = None
    if DECISIONS_TOPIC in topics:
        try:
            decisions = read_latest_by_key(bootstrap, DECISIONS_TOPIC, settings.kafka_config, settings.kafka_timeout_s)
        except Exception as err:  # the groups still show; only the assignor's plan and reason are unknown
            note = f"{DECISIONS_TOPIC} not read ({err}): plans and fallback reasons of streams groups unknown"
    descriptions = []
    for group in parsed.groups:
        processes = set(group.processes.values())
        decision = group_decision(decisions, group.group_id, processes)
        descriptions.append(describe_streams_group(group, decision, superseded.get(group.group_id, 0)))
    unread = len(listed - {g.group_id for g in parsed.groups})
    if unread and note is None:
        note = f"{unread} streams-protocol group(s) listed but not described (extract quarantines them)"
    return StreamsRead(frozenset(listed) | {g.group_id for g in parsed.groups}, descriptions, note)


def read_plan_steps(lake_root: Path, plan_ids: Sequence[str]) -> dict[str, list[Step]] | None:
    """plan_id -> its steps in order, from the lake's plan_assignments; None when the lake has no such table."""
    if not (lake_root / "plan_assignments" / "_delta_log").is_dir():
        return None
    if not plan_ids:
        return {}
    from pyspark.sql import functions as sf

    from jobs.lakehouse.engine import spark_session
    from jobs.lakehouse.lake import Lake

    with spark_session(None) as spark:
        rows = (
            Lake(spark, lake_root)
            .read("plan_assignments")
            .where(sf.col("plan_id").isin(list(plan_ids)))
            .select("plan_id", "step", "process_id", "task_id", "role")
            .collect()
        )
    by_step: dict[str, dict[int, set[tuple[str, str, str]]]] = {}
    for r in rows:
        by_step.setdefault(r["plan_id"], {}).setdefault(int(r["step"]), set()).add(
            (r["process_id"], r["task_id"], r["role"])
        )
    return {p: [frozenset(s[n]) for n in sorted(s)] for p, s in by_step.items()}


def live_status(
    settings: Settings,
    bootstrap: str,
    group: str | None = None,
    use_lake: bool = True,
    extra: Sequence[GroupDescription] = (),
    read_streams: bool = True,
) -> LiveRead:
    """Every live group's status (or ``group``'s): from reports, classic groups' metadata and (``read_streams``)
    the broker's description of streams-protocol groups; ``extra``: descriptions from other sources.
    MissingTopicError when the reports topic does not exist."""
    topics = _topics(settings, bootstrap)
    if settings.reports_topic not in topics:
        raise MissingTopicError(
            f"the reports topic {settings.reports_topic!r} does not exist: run `rebalance-planner setup`"
        )
    now_ms = int(time.time() * 1000)
    reports, bad = read_reports(settings, bootstrap)
    by_group: dict[str, int] = {}
    for r in reports:
        by_group[r.group_id] = by_group.get(r.group_id, 0) + 1
    no_streams = StreamsRead(frozenset(), [], None)
    streams = read_streams_status(settings, bootstrap, topics, by_group) if read_streams else no_streams
    # A group on the streams protocol now is what the broker says; its old plugin reports are shown once, by it.
    reports = [r for r in reports if r.group_id not in streams.listed]
    reporting = {r.group_id for r in reports} | streams.listed
    reports += read_metadata_groups(settings, bootstrap, reporting, now_ms)
    shown = {d.group_id for d in streams.descriptions}
    descriptions = [*describe_reports(reports), *streams.descriptions, *(e for e in extra if e.group_id not in shown)]
    if group is not None:
        descriptions = [d for d in descriptions if d.group_id == group]
    published = read_published(settings, bootstrap)
    honored = sorted({d.plan_id for d in descriptions if d.plan_id})
    steps: Mapping[str, Sequence[Step]] | None = None
    lake = "skipped"
    if use_lake:
        steps = read_plan_steps(settings.lake_root, honored)
        lake = "absent" if steps is None else "read"
    notes = (streams.note,) if streams.note else ()
    return LiveRead(group_statuses(descriptions, published, steps, now_ms), bad, lake, notes)


def pickup_lines(settings: Settings, bootstrap: str) -> list[str]:
    """After publish: when each group whose newest published plan it does not honor yet will pick it up, as far as
    its reports say (a group looks at the plans topic at its plan checks and at every rebalance)."""
    generic = (
        "groups pick a new plan up at their next plan check (the plugin's rebalance.planner.plan.check.interval.ms, "
        "the Python runtime's --plan-check-interval; 5 min by default) or their next rebalance, whichever comes "
        "first; `rebalance-planner status` shows each group's"
    )
    try:
        # Not the streams groups: publish confirms their first step itself, and a JVM here would only slow it.
        read = live_status(settings, bootstrap, use_lake=False, read_streams=False)
    except Exception as err:  # the plans are out: a failed look at the groups must not fail the publish
        log.info("publish: live groups not read for the pick-up times: %s", err)
        return [generic]
    waiting = [s for s in read.statuses if s.published_plan_id and s.published_plan_id != s.plan_id]
    return [generic, *(f"{s.group_id}: plan {s.published_plan_id}: {s.next_check}" for s in waiting)]
