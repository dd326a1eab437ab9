"""Stage 7, observe: the live assignment from the latest reports → observed history rows; plans now REALIZED,
EXPIRED, WITHDRAWN (a signed withdrawal is the group's newest plans record), or PUBLISHED with the group's fallback
reason (plan_reality.py).

A drain plan is REALIZED only while every instance it drains is still a member of its group (the broker lists the
member its newest report names) and holds nothing: that is what makes the instance safe to stop. If a drained
instance has left first, nobody saw the drain come true and nobody can any more: the plan is EXPIRED with the
reason, at once rather than at valid_until (its leaders may go on honoring it for the others, which it still
fits: assignor.protocol.plans.target_for)."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as sf

from assignor import ClientAssignment, GroupAssignment, TaskId
from assignor.protocol.restored_offsets import RestoredOffsetsReport
from assignor.protocol.state_report import GROUP_GENERATION_ORIGINS, StateReport
from assignor.runtime.kafka_io import read_latest_by_key
from jobs.lakehouse.lake import Lake
from jobs.pipeline.broker_reads import read_membership
from jobs.pipeline.intake import BrokerGroup, Report, parse_records, restored_only
from jobs.pipeline.observe_streams import (
    follow_steps,
    group_reports,
    read_streams_groups,
    release_finished,
    release_left_drains,
    streams_membership,
    streams_protocol_groups,
)
from jobs.pipeline.plan_reality import FALLBACK_PREFIX, notice_withdrawals_and_fallbacks
from jobs.pipeline.restored import RESTORED_COLUMNS, RestoredDuring, groups_restored
from jobs.pipeline.stage import StageResult
from jobs.pipeline.status import PlanStatus
from jobs.pipeline.targets import HISTORY_DDL, plan_targets
from jobs.settings import Settings

log = logging.getLogger(__name__)


def observed_rows(reports: Iterable[Report]) -> list[tuple[Any, ...]]:
    """assignment_history rows (source observed) of what each report says its instance holds, at reported_at."""
    rows = []
    for report in reports:
        f = report.fields
        for role, column in (("ACTIVE", "active_tasks"), ("STANDBY", "standby_tasks"), ("WARMUP", "warmup_tasks")):
            for task in f[column]:
                rows.append(
                    (f["reported_at"], f["group_id"], f["plan_id"], None, f["process_id"], task, role, "observed")
                )
    return rows


def group_generations(reports: Iterable[Report]) -> dict[str, int]:
    """group_id -> the highest generation its members' own (classic-protocol) reports name; a report from before
    the origin field was an instance's own."""
    generations: dict[str, int] = {}
    for report in reports:
        r = report.record  # decoded and bounded by intake
        if (r.origin is None or r.origin in GROUP_GENERATION_ORIGINS) and r.generation >= 0:
            generations[r.group_id] = max(generations.get(r.group_id, -1), r.generation)
    return generations


def live_assignments(reports: Iterable[Report]) -> dict[str, GroupAssignment]:
    """group_id -> what its instances report they hold (warmups included)."""
    groups: dict[str, dict[str, ClientAssignment]] = {}
    for report in reports:
        f = report.fields
        groups.setdefault(report.group_id, {})[report.process_id] = ClientAssignment(
            active=frozenset(TaskId.parse(t) for t in f["active_tasks"]),
            standby=frozenset(TaskId.parse(t) for t in f["standby_tasks"]),
            warmup=frozenset(TaskId.parse(t) for t in f["warmup_tasks"]),
        )
    return {group: GroupAssignment(clients) for group, clients in groups.items()}


def is_realized(target: GroupAssignment, live: GroupAssignment | None) -> bool:
    """The group runs exactly the target: same instances, same actives and standbys, no warmups left."""
    if live is None or set(target.clients) != set(live.clients):
        return False
    return all(
        live.clients[pid].active == ca.active
        and live.clients[pid].standby == ca.standby
        and not live.clients[pid].warmup
        for pid, ca in target.clients.items()
    )


def realized_plans(
    published: Mapping[str, str], targets: Mapping[str, GroupAssignment], live: Mapping[str, GroupAssignment]
) -> list[str]:
    """The published plans (plan_id -> group_id) whose group now runs their target."""
    return sorted(p for p, g in published.items() if p in targets and is_realized(targets[p], live.get(g)))


def _generation_frame(lake: Lake, generations: Mapping[str, int], groups: Sequence[str]) -> DataFrame:
    """(group_id, realized_generation) of the given groups whose reports name a generation."""
    rows = [(g, generations[g]) for g in sorted(set(groups)) if g in generations]
    return lake.spark.createDataFrame(rows, "group_id string, realized_generation bigint")


def _restored_frame(lake: Lake, restored: Mapping[str, RestoredDuring]) -> DataFrame:
    """(plan_id, restored_offsets, restored_reporting, restored_members); offsets null when no member reported."""
    rows = [(p, r.offsets if r.reporting else None, r.reporting, r.members) for p, r in sorted(restored.items())]
    ddl = "plan_id string, restored_offsets bigint, restored_reporting int, restored_members int"
    return lake.spark.createDataFrame(rows, ddl)


def group_members(own: Iterable[Report], streams_reports: Iterable[Report], streams: set[str]) -> list[StateReport]:
    """The reports whose processes are the groups' members: a group's fresh state reports, or for a streams-protocol
    group (``streams``) the broker's description only (old plugin reports of a group that switched protocol name no
    member). Restores join them by process id from the members' own restored-offsets reports, which the restore
    listener publishes under either protocol."""
    return [r.record for r in own if r.group_id not in streams] + [r.record for r in streams_reports]


def restored_after(settings: Settings, bootstrap: str) -> list[RestoredOffsetsReport]:
    """The restored-offsets reports, read again once the targets were seen: a member publishes a warmup's restore
    when the warmup is promoted, which the broker's description of a streams group can show after this run's first
    read of the reports topic."""
    records = read_latest_by_key(bootstrap, settings.reports_topic, settings.kafka_config, settings.kafka_timeout_s)
    return restored_only(records)


def drained_departures(
    draining: Mapping[str, Sequence[str]],
    published: Mapping[str, str],
    reports: Iterable[Report],
    membership: Mapping[str, BrokerGroup],
) -> dict[str, list[str] | None]:
    """Per drain plan (plan_id -> the processes it drains): those no longer members of the group ([] while all
    are), or None when the broker did not describe the group. A process is a member while the broker lists the
    member id of its newest report; a group the broker does not list has no members."""
    member_of: dict[tuple[str, str], str] = {(r.group_id, r.process_id): r.record.member_id for r in reports}
    out: dict[str, list[str] | None] = {}
    for plan_id, pids in draining.items():
        group_id = published[plan_id]
        group = membership.get(group_id)
        if group is not None and group.error is not None:
            out[plan_id] = None
            continue
        listed = {m.member_id for m in group.members} if group is not None else set()
        out[plan_id] = sorted(p for p in pids if member_of.get((group_id, p)) not in listed)
    return out


def drain_left_reason(left: Sequence[str]) -> str:
    """Why a drain plan is EXPIRED when an instance it drains left the group before observe saw it hold nothing."""
    return (
        f"drained {', '.join(left)} left the group before the drain was observed realized: "
        "not known to have stopped with nothing to restore"
    )


def run_observe(lake: Lake, settings: Settings, bootstrap: str) -> StageResult:
    """Read the reports topic to its end; record what every instance holds; mark realized plans REALIZED."""
    records = read_latest_by_key(bootstrap, settings.reports_topic, settings.kafka_config, settings.kafka_timeout_s)
    reports, intake = parse_records(records)
    now = int(time.time() * 1000)
    fresh = [r for r in reports if int(r.fields["reported_at"]) >= now - settings.stale_report_age_ms]
    log.info("observe: %d reports (%d fresh, %d unreadable)", len(reports), len(fresh), len(intake.quarantine))
    rows = observed_rows(reports)
    if rows:
        outcomes = [lake.merge("assignment_history", lake.spark.createDataFrame(rows, HISTORY_DDL))]
    else:  # no report: nothing observed, and no Spark job to find that out
        outcomes = [lake.merge_nothing("assignment_history")]
    # Withdrawals and fallbacks first: a withdrawn plan is neither realized nor expired, a fallen-back one not realized.
    plans_topic = read_latest_by_key(bootstrap, settings.plans_topic, settings.kafka_config, settings.kafka_timeout_s)
    noticed = notice_withdrawals_and_fallbacks(lake, settings, plans_topic, fresh)
    outcomes.extend(noticed.outcomes)
    plans = lake.read("plans").where(sf.col("status") == PlanStatus.PUBLISHED)
    plan_rows = plans.select("plan_id", "group_id", "snapshot_id", "draining", "published_at").collect()
    published = {r["plan_id"]: r["group_id"] for r in plan_rows}
    published_at = {r["plan_id"]: int(r["published_at"] or 0) for r in plan_rows}
    # Streams-protocol groups send no reports: what they hold comes from the broker's description.
    streams = streams_protocol_groups(lake, {r["snapshot_id"] for r in plan_rows}) if plan_rows else set()
    streams_read = read_streams_groups(settings, bootstrap, streams) if streams else []
    streams_reports = group_reports(streams_read)
    generations = group_generations(fresh)  # before the streams groups' member epochs join them
    member_reports = group_members(fresh, streams_reports, streams)
    fresh += streams_reports
    draining = {r["plan_id"]: list(r["draining"]) for r in plan_rows if r["draining"]}
    # Only drain plans need the broker's word on who is still a member; the reports alone cannot tell a
    # stopped instance from a quiet one while its last report is fresh.
    membership = read_membership(settings, bootstrap, {published[p] for p in draining}) if draining else {}
    membership |= streams_membership(streams_read)
    departures = drained_departures(draining, published, [*reports, *streams_reports], membership)
    undecided = sorted(p for p, left in departures.items() if left is None)
    if undecided:
        log.warning("observe: the broker did not describe the groups of drain plans %s: not marked", undecided)
    left = {p: gone for p, gone in departures.items() if gone}
    candidates = {p: g for p, g in published.items() if departures.get(p, []) == [] and p not in noticed.fell_back}
    done = realized_plans(candidates, plan_targets(lake, list(candidates)), live_assignments(fresh))
    if done:
        windows = {p: (published[p], published_at[p]) for p in done}
        restored = groups_restored(windows, member_reports, restored_after(settings, bootstrap), now)
        updates = (
            plans.where(sf.col("plan_id").isin(done))
            .withColumn("status", sf.lit(PlanStatus.REALIZED))
            .withColumn("realized_at", sf.lit(now).cast("bigint"))
            # A fallback the group has since recovered from no longer says why the plan is where it is.
            .withColumn("reason", sf.when(~sf.col("reason").startswith(FALLBACK_PREFIX), sf.col("reason")))
            .drop("realized_generation")
            .join(_generation_frame(lake, generations, [published[p] for p in done]), "group_id", "left")
            .drop(*RESTORED_COLUMNS)
            .join(_restored_frame(lake, restored), "plan_id", "left")
        )
        update = ["status", "realized_at", "reason", "realized_generation", *RESTORED_COLUMNS]
        for plan_id in done:
            r = restored[plan_id]
            log.info("observe: %s restored %d offsets (%d of %d members reported)", plan_id, r.offsets, r.reporting,
                     r.members)  # fmt: skip
        outcomes.append(lake.merge("plans", updates, update=update))
    if left:
        why = lake.spark.createDataFrame(
            [(p, drain_left_reason(gone)) for p, gone in sorted(left.items())], "plan_id string, why string"
        )
        abandoned = plans.join(why, "plan_id").withColumn("status", sf.lit(PlanStatus.EXPIRED))
        outcomes.append(
            lake.merge("plans", abandoned.withColumn("reason", sf.col("why")).drop("why"), ["status", "reason"])
        )
        log.info("observe: drain plan(s) %s expired: a drained instance left first", sorted(left))
    # A published plan not realized within its validity is one the group will no longer honor.
    expired = plans.where(
        ~sf.col("plan_id").isin([*done, *left]) & (sf.col("approved_at") + sf.lit(settings.plan_valid_ms) < sf.lit(now))
    )
    expired = expired.withColumn("status", sf.lit(PlanStatus.EXPIRED)).withColumn(
        "reason", sf.lit("not realized before valid_until")
    )
    finished = {r["plan_id"]: r["group_id"] for r in expired.select("plan_id", "group_id").collect()}
    outcome = lake.merge("plans", expired, update=["status", "reason"])
    finished |= {p: published[p] for p in [*done, *left]}
    # The broker's default assignor serves them again; a realized drain's group only once its drained instances
    # have left (release_left_drains, at a later run): sticky would give them tasks back before they are stopped.
    held = {p for p in done if p in draining and published[p] in streams}
    release_finished(settings, bootstrap, {p: g for p, g in finished.items() if p not in held}, streams)
    release_left_drains(lake, settings, bootstrap, now, busy={g for p, g in published.items() if p not in finished})
    # The broker assigns only at a new epoch: the plans still under way get their next step triggered when due.
    ongoing = {p: g for p, g in published.items() if p not in finished and p not in noticed.withdrawn}
    steps = follow_steps(lake, settings, bootstrap, ongoing, streams_read) if streams_read else []
    if steps:
        outcomes.append(lake.merge("assignment_history", lake.spark.createDataFrame(steps, HISTORY_DDL)))
    if outcome.changed:
        outcomes.append(outcome)
    log.info("observe: %d history rows, %d plan(s) realized, %d expired", len(rows), len(done), outcome.updated)
    counts = {"observed_rows": len(rows), "realized": len(done), "expired": outcome.updated + len(left)}
    counts |= {"withdrawn": len(noticed.withdrawn), "fell_back": len(noticed.fell_back), "steps_triggered": len(steps)}
    counts["streams_ongoing"] = sum(1 for p, g in ongoing.items() if g in streams)
    return StageResult("observe", None, tuple(outcomes), counts)


def follow_observe(lake: Lake, settings: Settings, bootstrap: str, seconds: float) -> StageResult:
    """``observe --follow``: observe again every ``step_min_interval_ms`` (at least 1 s) for ``seconds``, or until no
    streams group's plan is under way; the counts summed, the outcomes of every run."""
    deadline = time.monotonic() + seconds
    pause = max(settings.step_min_interval_ms / 1000, 1.0)
    outcomes: list[Any] = []
    counts: dict[str, int] = {}
    runs = 0
    while True:
        result = run_observe(lake, settings, bootstrap)
        runs += 1
        outcomes.extend(result.outcomes)
        for name, count in result.counts.items():
            counts[name] = count if name == "streams_ongoing" else counts.get(name, 0) + count
        left = deadline - time.monotonic()
        if counts.get("streams_ongoing", 0) == 0 or left <= 0:
            break
        log.info("observe --follow: %d streams plan(s) under way, next look in %.0f s", counts["streams_ongoing"],
                 min(pause, left))  # fmt: skip
        time.sleep(min(pause, left))  # paces the loop: the heartbeats' task offsets change every 15 s at most
    counts["runs"] = runs
    return StageResult("observe", None, tuple(outcomes), counts)
