"""What observe learns beyond realization: a plan taken back by a signed withdrawal, or a group falling back.

The plans topic decides withdrawals (a verified withdrawal as a group's newest record is exactly what its leader
obeys); the groups' own reports decide fallbacks (a report after the plan was published that names no plan and
gives a ``fallback_reason``). A fallback keeps the plan PUBLISHED, records the reason, and keeps it from being
marked REALIZED in that run: the group said it is not following the plan."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import functions as sf

from assignor.protocol.plan_keys import VerifyKeys
from assignor.protocol.plans import PlanRejected, Withdrawal, read_record
from jobs.lakehouse.lake import Lake, MergeOutcome
from jobs.pipeline.intake import Report
from jobs.pipeline.lifecycle import PlanEvent, moved_by
from jobs.pipeline.status import PlanStatus
from jobs.pipeline.withdrawals import HISTORY_WITH_REASON_DDL, record_withdrawal
from jobs.settings import Settings

log = logging.getLogger(__name__)
FALLBACK_SOURCE = "fallback"
FALLBACK_PREFIX = "fallback: "  # how plans.reason starts while it holds a group's fallback


@dataclass(frozen=True)
class PublishedPlan:
    """A plan that went out on the plans topic and is still live in the lake (PUBLISHED or REALIZED)."""

    plan_id: str
    group_id: str
    status: str
    published_at: int


@dataclass(frozen=True)
class Fallback:
    """A group's report that it runs Kafka's own assignment instead of a plan, and why."""

    group_id: str
    process_id: str
    reported_at: int
    reason: str


def newest_withdrawals(records: Mapping[bytes, bytes | None], keys: VerifyKeys) -> dict[str, Withdrawal]:
    """group_id -> its newest plans-topic record, for the groups where that record is a verified withdrawal.
    Unsigned or unverifiable records withdraw nothing, as for the leaders."""
    out: dict[str, Withdrawal] = {}
    for key, value in records.items():
        if value is None:
            continue
        try:
            record = read_record(value, keys)
        except PlanRejected:
            continue
        if isinstance(record, Withdrawal) and key == record.group_id.encode("utf-8"):
            out[record.group_id] = record
    return out


def withdrawn_plans(plans: Iterable[PublishedPlan], withdrawals: Mapping[str, Withdrawal]) -> dict[str, Withdrawal]:
    """plan_id -> the withdrawal that took it back: the plan it names, and its group's newest published plan (the
    one its leader was honoring), when the withdrawal is the group's newest record on the plans topic."""
    newest: dict[str, PublishedPlan] = {}
    for p in plans:
        if p.group_id in withdrawals and (p.group_id not in newest or p.published_at > newest[p.group_id].published_at):
            newest[p.group_id] = p
    out = {p.plan_id: withdrawals[g] for g, p in newest.items()}
    for p in plans:
        w = withdrawals.get(p.group_id)
        if w is not None and w.plan_id == p.plan_id:
            out[p.plan_id] = w
    return out


def group_fallbacks(reports: Iterable[Report]) -> dict[str, Fallback]:
    """group_id -> its newest report that names no plan and gives a fallback reason."""
    out: dict[str, Fallback] = {}
    for r in reports:
        report = r.record
        if report.plan_id is not None or not report.fallback_reason:
            continue
        seen = out.get(r.group_id)
        if seen is None or report.reported_at > seen.reported_at:
            out[r.group_id] = Fallback(r.group_id, r.process_id, report.reported_at, report.fallback_reason)
    return out


def fallen_back(plans: Iterable[PublishedPlan], fallbacks: Mapping[str, Fallback]) -> dict[str, Fallback]:
    """plan_id -> the fallback its group reported after it was published, for PUBLISHED plans."""
    return {
        p.plan_id: fb
        for p in plans
        if p.status == PlanStatus.PUBLISHED
        and (fb := fallbacks.get(p.group_id)) is not None
        and fb.reported_at >= p.published_at
    }


def fallback_reason(fb: Fallback) -> str:
    """The plans.reason of a PUBLISHED plan whose group fell back."""
    return f"{FALLBACK_PREFIX}{fb.reason} (reported by {fb.process_id} at {fb.reported_at})"


def fallback_rows(plan_id: str, fb: Fallback, reports: Iterable[Report]) -> list[tuple[object, ...]]:
    """assignment_history rows (source fallback) of what the falling-back group's instances hold instead."""
    rows: list[tuple[object, ...]] = []
    for r in reports:
        f, report = r.fields, r.record
        if r.group_id != fb.group_id or report.plan_id is not None or not report.fallback_reason:
            continue
        for role, column in (("ACTIVE", "active_tasks"), ("STANDBY", "standby_tasks"), ("WARMUP", "warmup_tasks")):
            for task in f[column]:
                row = (report.reported_at, fb.group_id, plan_id, None, r.process_id, task, role, FALLBACK_SOURCE)
                rows.append((*row, report.fallback_reason))
    return rows


@dataclass(frozen=True)
class Noticed:
    """What observe recorded here: the plans now WITHDRAWN, those whose group fell back, and the writes."""

    withdrawn: tuple[str, ...]
    fell_back: tuple[str, ...]
    outcomes: tuple[MergeOutcome, ...]


def _verify_keys(settings: Settings) -> VerifyKeys | None:
    """The keys withdrawals are checked with: RBP_PLAN_VERIFY_KEYS (observe never opens the signing key)."""
    keys = VerifyKeys.parse(settings.plan_verify_keys)
    return keys if keys.keys else None


def notice_withdrawals_and_fallbacks(
    lake: Lake, settings: Settings, plans_topic: Mapping[bytes, bytes | None], fresh: Sequence[Report]
) -> Noticed:
    """Mark live plans whose group's newest plans record is a verified withdrawal WITHDRAWN; record the reason
    and history rows of PUBLISHED plans whose group reports a fallback."""
    live = lake.read("plans").where(
        sf.col("status").isin(*moved_by(PlanEvent.WITHDRAWN)) & sf.col("published_at").isNotNull()
    )
    plans = [
        PublishedPlan(r["plan_id"], r["group_id"], r["status"], int(r["published_at"]))
        for r in live.select("plan_id", "group_id", "status", "published_at").collect()
    ]
    if not plans:
        return Noticed((), (), ())
    keys = _verify_keys(settings)
    if keys is None:
        log.warning("observe: no signing or verify keys: withdrawals on %s are not checked", settings.plans_topic)
    withdrawals = newest_withdrawals(plans_topic, keys) if keys is not None else {}
    withdrawn = withdrawn_plans(plans, withdrawals)
    outcomes: list[MergeOutcome] = []
    by_group: dict[tuple[str, int, str], list[str]] = {}
    for plan_id, w in withdrawn.items():
        by_group.setdefault((w.group_id, w.created_at, w.plan_id), []).append(plan_id)
    for (group_id, created_at, named), ids in sorted(by_group.items()):
        reason = f"withdrawn: signed withdrawal of plan {named} dated {created_at} seen on {settings.plans_topic}"
        outcomes.extend(record_withdrawal(lake, group_id, ids, created_at, reason))
    fell = fallen_back([p for p in plans if p.plan_id not in withdrawn], group_fallbacks(fresh))
    if fell:
        history = [row for plan_id, fb in sorted(fell.items()) for row in fallback_rows(plan_id, fb, fresh)]
        if history:
            frame = lake.spark.createDataFrame(history, HISTORY_WITH_REASON_DDL)
            outcomes.append(lake.merge("assignment_history", frame))
        reasons = lake.spark.createDataFrame(
            [(p, fallback_reason(fb)) for p, fb in sorted(fell.items())], "plan_id string, why string"
        )
        rows = live.join(reasons, "plan_id").withColumn("reason", sf.col("why")).drop("why")
        outcomes.append(lake.merge("plans", rows, update=["reason"]))
        log.info("observe: the groups of %s fell back: %s", sorted(fell), sorted({f.reason for f in fell.values()}))
    return Noticed(tuple(sorted(withdrawn)), tuple(sorted(fell)), tuple(outcomes))
