"""Observe's part for streams-protocol groups (KIP-1071): their live assignment comes from the broker's description
(they send no reports), and once their plan is REALIZED or EXPIRED our assignor is deselected."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaException
from pyspark.sql import functions as sf

from assignor.runtime.kafka_io import read_latest_by_key
from jobs.lakehouse.lake import Lake
from jobs.live.streams import group_decision
from jobs.pipeline.broker_streams import BrokerStreamsGroup, parse_reader_output
from jobs.pipeline.intake import BrokerGroup, BrokerMember, Report, parse_records
from jobs.pipeline.report_only import STREAMS_PROTOCOL_REASON, report_only_reasons
from jobs.pipeline.status import PlanStatus
from jobs.pipeline.streams_assignor import (
    DECISIONS_TOPIC,
    SOURCE_SELECTED,
    SOURCE_STEP,
    assignor_admin,
    assignor_history_rows,
    release_assignor,
    selecting_assignor,
    trigger_assignment,
)
from jobs.pipeline.streams_reader import StreamsGroupsUnreadable, read_streams_groups_lines
from jobs.pipeline.streams_steps import GroupNow, StepRule, decide_step, drains_left
from jobs.pipeline.targets import plan_targets
from jobs.settings import Kip441Settings, Settings

log = logging.getLogger(__name__)


def streams_protocol_groups(lake: Lake, snapshot_ids: Iterable[str]) -> set[str]:
    """The groups of those snapshots read from the broker's description of a streams-protocol group."""
    reasons = report_only_reasons(lake, sorted(set(snapshot_ids)))
    return {g for g, why in reasons.items() if why == STREAMS_PROTOCOL_REASON}


def read_streams_groups(settings: Settings, bootstrap: str, group_ids: Iterable[str]) -> list[BrokerStreamsGroup]:
    """These groups as the broker describes them, from one run of the streams-groups reader; none when it cannot
    run (logged: the next observe tries again)."""
    wanted = set(group_ids)
    try:
        lines = read_streams_groups_lines(
            bootstrap, settings.kafka_config, settings.kafka_timeout_s, jar=settings.streams_reader_jar
        )
    except StreamsGroupsUnreadable as err:
        log.warning("observe: streams groups %s not read: %s", sorted(wanted), err)
        return []
    return [g for g in parse_reader_output(lines, int(time.time() * 1000)).groups if g.group_id in wanted]


def group_reports(groups: Iterable[BrokerStreamsGroup]) -> list[Report]:
    """What the members of these groups hold now, as reports."""
    reports, intake = parse_records({key: value for g in groups for key, value in g.reports})
    if intake.quarantine:
        log.warning("observe: %d streams-group member(s) unreadable", len(intake.quarantine))
    return reports


def streams_group_reports(settings: Settings, bootstrap: str, group_ids: Iterable[str]) -> list[Report]:
    """What the members of these groups hold now, as reports, from one run of the streams-groups reader."""
    return group_reports(read_streams_groups(settings, bootstrap, group_ids))


def release_finished(settings: Settings, bootstrap: str, finished: Mapping[str, str], streams: set[str]) -> list[str]:
    """Deselect our assignor for the streams groups whose plan (plan_id -> group_id) is REALIZED or EXPIRED."""
    groups = {g for g in finished.values() if g in streams}
    return release_assignor(settings, bootstrap, groups) if groups else []


def release_left_drains(
    lake: Lake, settings: Settings, bootstrap: str, now: int, busy: Iterable[str] = ()
) -> list[str]:
    """Release the streams groups held for a drain plan REALIZED within the plans' validity once every instance
    it drains has left: released at REALIZED, the broker's sticky would hand tasks back to the drained instance
    before anyone could stop it. Our assignor keeps the target meanwhile. Groups in ``busy`` (a newer plan under
    way) are left alone. The groups released."""
    rows = (
        lake.read("plans")
        .where(
            (sf.col("status") == PlanStatus.REALIZED)
            & (sf.size("draining") > 0)
            & (sf.col("realized_at") >= sf.lit(now - settings.plan_valid_ms))
        )
        .select("group_id", "snapshot_id", "draining")
        .collect()
    )
    streams = streams_protocol_groups(lake, {r["snapshot_id"] for r in rows}) if rows else set()
    candidates = {r["group_id"] for r in rows if r["group_id"] in streams} - set(busy)
    held = selecting_assignor(settings, bootstrap, candidates) if candidates else set()
    if not held:
        return []
    members = {g.group_id: set(g.processes.values()) for g in read_streams_groups(settings, bootstrap, held)}
    drained: dict[str, set[str]] = {}
    for r in rows:
        if r["group_id"] in held:
            drained.setdefault(r["group_id"], set()).update(r["draining"])
    gone = drains_left(drained, members)
    return release_assignor(settings, bootstrap, gone) if gone else []


def last_triggers(lake: Lake, plan_ids: Sequence[str]) -> dict[str, int]:
    """plan_id -> when we last triggered an assignment for it (publish's selection or a step), from the history."""
    rows = (
        lake.read("assignment_history")
        .where(sf.col("plan_id").isin(list(plan_ids)) & sf.col("source").isin(SOURCE_SELECTED, SOURCE_STEP))
        .groupBy("plan_id")
        .agg(sf.max("event_time").alias("at"))
        .collect()
    )
    return {r["plan_id"]: int(r["at"]) for r in rows}


def follow_steps(
    lake: Lake, settings: Settings, bootstrap: str, published: Mapping[str, str], groups: Sequence[BrokerStreamsGroup]
) -> list[tuple[Any, ...]]:
    """Trigger the next step of each streams group whose PUBLISHED plan (plan_id -> group_id) has one due
    (streams_steps.decide_step); the ``assignment_history`` rows of the triggers. Errors are logged, not raised."""
    by_group = {g.group_id: g for g in groups}
    due = {p: g for p, g in published.items() if g in by_group}
    if not due:
        return []
    try:
        latest = read_latest_by_key(bootstrap, DECISIONS_TOPIC, settings.kafka_config, settings.kafka_timeout_s)
    except Exception as err:  # whatever it raises (a missing topic included): no decision, no step this time
        log.warning("observe: %s not readable (%s): no streams step triggered", DECISIONS_TOPIC, err)
        return []
    plans = {r["plan_id"]: r for r in lake.read("plans").where(sf.col("plan_id").isin(list(due))).collect()}
    targets = plan_targets(lake, list(due))
    last = last_triggers(lake, list(due))
    rule = StepRule(settings.step_min_interval_ms, max(settings.step_max_wait_ms, settings.step_min_interval_ms))
    admin = assignor_admin(settings, bootstrap)
    rows = []
    for plan_id, group_id in sorted(due.items()):
        if plan_id not in targets or plan_id not in plans:
            continue
        reports = group_reports([by_group[group_id]])
        now = int(time.time() * 1000)
        state = GroupNow(
            plan_id=plan_id,
            target=targets[plan_id],
            acceptable_recovery_lag=Kip441Settings.from_columns(plans[plan_id].asDict()).acceptable_recovery_lag,
            decision=group_decision(latest, group_id, {r.process_id for r in reports}),
            standbys={r.process_id: frozenset(r.record.standby_tasks) for r in reports},
            offset_sums={r.process_id: dict(r.record.task_offset_sums) for r in reports},
            end_offset_sums=by_group[group_id].end_offset_sums,
            last_trigger_ms=last.get(plan_id),
            now_ms=now,
        )
        verdict = decide_step(state, rule)
        if not verdict.trigger:
            log.info("observe: streams group %s, plan %s: no step now (%s)", group_id, plan_id, verdict.reason)
            continue
        try:
            trigger_assignment(admin, group_id, settings.kafka_timeout_s)
        except KafkaException as err:
            log.warning("observe: streams group %s: step not triggered: %s", group_id, err)
            continue
        log.info("observe: streams group %s, plan %s: next step triggered (%s)", group_id, plan_id, verdict.reason)
        rows += assignor_history_rows({group_id: (plan_id, plans[plan_id]["snapshot_id"])}, SOURCE_STEP, now)
    return rows


def streams_membership(groups: Iterable[BrokerStreamsGroup]) -> dict[str, BrokerGroup]:
    """Streams groups' members as the reader described them: confluent-kafka's ListGroups lists no streams group,
    so a drain check through it would take every member of one for gone."""
    return {
        g.group_id: BrokerGroup(
            g.group_id,
            g.state,
            "streams",
            g.assignor_name or "",
            "",
            tuple(BrokerMember(m, "", "", None, ()) for m in sorted(g.processes)),
        )
        for g in groups
    }
