"""Stage 7, observe: the live assignment from the latest reports → observed history rows; plans now REALIZED."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from pyspark.sql import functions as sf

from assignor import ClientAssignment, GroupAssignment, TaskId
from assignor.runtime.kafka_io import read_latest_by_key
from jobs.lakehouse.lake import Lake
from jobs.pipeline.intake import Report, parse_records
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


def run_observe(lake: Lake, settings: Settings, bootstrap: str) -> StageResult:
    """Read the reports topic to its end; record what every instance holds; mark realized plans REALIZED."""
    records = read_latest_by_key(bootstrap, settings.reports_topic, settings.kafka_config, settings.kafka_timeout_s)
    reports, intake = parse_records(records)
    now = int(time.time() * 1000)
    fresh = [r for r in reports if int(r.fields["reported_at"]) >= now - settings.stale_report_age_ms]
    log.info("observe: %d reports (%d fresh, %d unreadable)", len(reports), len(fresh), len(intake.quarantine))
    rows = observed_rows(reports)
    outcomes = [lake.merge("assignment_history", lake.spark.createDataFrame(rows, HISTORY_DDL))]
    plans = lake.read("plans").where(sf.col("status") == PlanStatus.PUBLISHED)
    published = {r["plan_id"]: r["group_id"] for r in plans.select("plan_id", "group_id").collect()}
    done = realized_plans(published, plan_targets(lake, list(published)), live_assignments(fresh))
    if done:
        updates = (
            plans.where(sf.col("plan_id").isin(done))
            .withColumn("status", sf.lit(PlanStatus.REALIZED))
            .withColumn("realized_at", sf.lit(now).cast("bigint"))
        )
        outcomes.append(lake.merge("plans", updates, update=["status", "realized_at"]))
    # A published plan not realized within its validity is one the group will no longer honor.
    expired = plans.where(
        ~sf.col("plan_id").isin(done) & (sf.col("approved_at") + sf.lit(settings.plan_valid_ms) < sf.lit(now))
    )
    expired = expired.withColumn("status", sf.lit(PlanStatus.EXPIRED)).withColumn(
        "reason", sf.lit("not realized before valid_until")
    )
    outcome = lake.merge("plans", expired, update=["status", "reason"])
    if outcome.changed:
        outcomes.append(outcome)
    log.info("observe: %d history rows, %d plan(s) realized, %d expired", len(rows), len(done), outcome.updated)
    counts = {"observed_rows": len(rows), "realized": len(done), "expired": outcome.updated}
    return StageResult("observe", None, tuple(outcomes), counts)
