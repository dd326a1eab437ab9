"""Stage 3, plan: plan_group for every group in parallel (group_runner) → plans and plan_assignments."""

from __future__ import annotations

import logging
import shutil
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as sf

from assignor import AssignmentConfigs
from jobs.lakehouse.columns import arrow_schema
from jobs.lakehouse.engine import embedded
from jobs.lakehouse.lake import Lake, MergeOutcome, staged_copy
from jobs.pipeline.buckets import GroupBucket, group_buckets
from jobs.pipeline.group_runner import (
    GroupWork,
    calls_for,
    group_udf,
    restart_progress,
    run_groups,
)
from jobs.pipeline.group_settings import configs_of, resolve_groups, settings_frame
from jobs.pipeline.plan_frames import explode_assignments, plan_rows
from jobs.pipeline.plan_record import (
    PLANNED_SCHEMA,
    PlanCall,
    died_alone,
    plan_table,
)
from jobs.pipeline.plan_sources import with_source_facts
from jobs.pipeline.planning_input import planning_input
from jobs.pipeline.restore_rates import RestoreRates, restore_rates
from jobs.pipeline.stage import StageInputError, StageResult, resolve_snapshot
from jobs.pipeline.workers import release_pools, worker_pool
from jobs.settings import Settings

log = logging.getLogger(__name__)


def planner_udf(
    configs: AssignmentConfigs,
    rates: RestoreRates,
    created_at: int,
    processes: int,
    schema: pa.Schema,
    drains: Mapping[str, frozenset[str]] | None = None,
    planner: Callable[[pa.Table, PlanCall], pa.Table] = plan_table,
    group_configs: Mapping[str, AssignmentConfigs] | None = None,
) -> Callable[[pa.Table], pa.Table]:
    """The applyInArrow function: several groups' rows in, one PLANNED_SCHEMA row (``schema``) per group out
    (``planner``: plan_table, or a stand-in a test passes; ``group_configs`` as in PlanCall)."""
    own = dict(group_configs or {})

    def call(ids: list[str]) -> PlanCall:
        return PlanCall(
            configs,
            {g: rates.for_group(g) for g in ids},
            created_at,
            schema,
            drains,
            {g: own[g] for g in ids if g in own},
        )

    return group_udf(GroupWork(planner, call, died_alone, "planned"), processes)


def plan_groups(
    inputs: DataFrame,
    configs: AssignmentConfigs,
    rates: RestoreRates,
    created_at: int,
    processes: int = 1,
    drains: Mapping[str, frozenset[str]] | None = None,
    calls: int = 1,
    group_configs: Mapping[str, AssignmentConfigs] | None = None,
) -> DataFrame:
    """PLANNED_SCHEMA rows: plan_group once per group, in parallel over the engine's partitions (``calls`` calls,
    see group_runner.run_groups), each estimated at its group's restore rate (``rates``) and planned with its
    ``group_configs`` entry, else ``configs``."""
    schema = arrow_schema(inputs.sparkSession, PLANNED_SCHEMA)
    udf = planner_udf(configs, rates, created_at, processes, schema, drains, group_configs=group_configs)
    return run_groups(inputs, udf, PLANNED_SCHEMA, calls)


def _check_drains(lake: Lake, snapshot_id: str, drains: Mapping[str, frozenset[str]]) -> None:
    """StageInputError for a drain this run cannot plan: a group the snapshot lacks, or one already planned there
    otherwise (a plan is made once per group per snapshot; drain on a new snapshot). The same drain again (a
    retried run) is fine."""
    if not drains:
        return
    groups = {r["group_id"] for r in lake.read("group_tasks", snapshot_id).select("group_id").distinct().collect()}
    groups |= {r["group_id"] for r in lake.read("member_reports", snapshot_id).select("group_id").distinct().collect()}
    missing = sorted(set(drains) - groups)
    if missing:
        raise StageInputError(f"--drain: no group {missing} in snapshot {snapshot_id}")
    planned = lake.read("plans", snapshot_id).where(sf.col("group_id").isin(sorted(drains)))
    for r in planned.select("group_id", "draining").collect():
        if frozenset(r["draining"] or ()) != drains[r["group_id"]]:
            raise StageInputError(
                f"--drain: group {r['group_id']!r} is already planned in snapshot {snapshot_id} "
                f"(draining {sorted(r['draining'] or ())}); extract a new snapshot to plan the drain"
            )


def run_plan(
    lake: Lake,
    settings: Settings,
    snapshot_id: str | None = None,
    drains: Mapping[str, frozenset[str]] | None = None,
) -> StageResult:
    """Plan every group of the snapshot that has no plan yet, ``settings.stage_bucket_groups`` groups at a time,
    draining the given processes (group_id -> process ids) of groups this run plans; MERGE plans and
    plan_assignments per bucket (a run cut short keeps the buckets it finished)."""
    snapshot_id = resolve_snapshot(lake, snapshot_id)
    drains = dict(drains or {})
    _check_drains(lake, snapshot_id, drains)
    restart_progress()
    reports = lake.read("member_reports", snapshot_id)
    rates = restore_rates(lake, snapshot_id, settings.restore_rate)
    statuses: Counter[str] = Counter()
    plans, assignments = [], []
    try:
        buckets = group_buckets(reports, snapshot_id, settings.stage_bucket_groups)
        if buckets and settings.planner_processes > 1 and embedded(lake.spark):
            # Under Sail the workers plan every group: start them now, to import and warm up while the engine
            # reads the inputs, rather than on the first planner call.
            worker_pool(settings.planner_processes)
        for bucket in buckets:
            planned = _plan_bucket(lake, settings, bucket, rates, drains)
            statuses.update(planned.statuses)
            plans.append(planned.plans)
            assignments.append(planned.assignments)
    finally:
        # Validate's joins come next in the same process when stages run together (the benchmark, one-process
        # runs); idle planners would hold ~0.5 GB through them.
        release_pools()
    log.info("plan %s: %s", snapshot_id, ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())) or "no new groups")
    outcomes = (
        MergeOutcome.total("plans", plans, lake.version("plans")),
        MergeOutcome.total("plan_assignments", assignments, lake.version("plan_assignments")),
    )
    return StageResult("plan", snapshot_id, outcomes, {f"plans[{s}]": n for s, n in sorted(statuses.items())})


@dataclass(frozen=True)
class _PlannedBucket:
    statuses: Mapping[str, int]
    plans: MergeOutcome
    assignments: MergeOutcome


def _plan_bucket(
    lake: Lake, settings: Settings, bucket: GroupBucket, rates: RestoreRates, drains: Mapping[str, frozenset[str]]
) -> _PlannedBucket:
    """Plan one bucket's groups that have no plan yet; MERGE their plan_assignments, then their plans."""
    snapshot_id = bucket.snapshot_id
    done = bucket.rows(lake.read("plans", snapshot_id)).select("group_id")
    inputs = planning_input(
        bucket.rows(lake.read("member_reports", snapshot_id)),
        bucket.rows(lake.read("group_tasks", snapshot_id)),
        bucket.rows(lake.read("task_lags", snapshot_id)),
    ).join(done, "group_id", "left_anti")
    created_at = int(time.time() * 1000)
    # The planner's output feeds two tables: write it once, read it twice (persist() is a no-op on Sail).
    staging = lake.staging("plan")
    try:
        # Each group with its own settings, or an explicit override (never one setting for the whole fleet).
        own = resolve_groups(bucket.rows(lake.read("member_reports", snapshot_id)), settings.kip441_overrides)
        # At most a bucket's groups (fewer when done ones are left out).
        calls = calls_for(settings.stage_bucket_groups)
        planned_groups = plan_groups(
            inputs,
            AssignmentConfigs(),
            rates,
            created_at,
            settings.planner_processes,
            drains,
            calls,
            group_configs=configs_of(own),
        )
        planned = staged_copy(planned_groups, staging, PLANNED_SCHEMA)
        statuses = {r["status"]: int(r["count"]) for r in planned.groupBy("status").count().collect()}
        log.info(
            "plan %s: %s, %s",
            snapshot_id,
            bucket,
            ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())) or "no new groups",
        )
        # Assignments first: a plans row marks its group done, so a run cut short in between re-plans it.
        assignments = lake.merge("plan_assignments", explode_assignments(planned), within=bucket.scope)
        rows = with_source_facts(
            plan_rows(planned, settings_frame(lake.spark, own)),
            explode_assignments(planned),
            bucket.rows(lake.read("member_reports", snapshot_id)),
            bucket.rows(lake.read("task_lags", snapshot_id)),
            bucket.rows(lake.read("member_reports")),
        )
        plans = lake.merge("plans", rows, within=bucket.scope)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return _PlannedBucket(statuses, plans, assignments)
