"""Stage 3, plan: plan_group for every group in parallel (applyInArrow) → plans and plan_assignments."""

from __future__ import annotations

import logging
import math
import os
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from itertools import accumulate
from typing import TYPE_CHECKING, Any, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as sf
from pyspark.sql.pandas.types import to_arrow_schema

from assignor import AssignmentConfigs, ClientState, GroupPlan, GroupState, Role, TaskId, plan_group
from jobs.lakehouse.engine import embedded
from jobs.lakehouse.lake import Lake, MergeOutcome
from jobs.lakehouse.tables import table_schema
from jobs.pipeline.buckets import GroupBucket, group_buckets
from jobs.pipeline.group_settings import resolve_groups, settings_frame
from jobs.pipeline.plan_sources import with_source_facts
from jobs.pipeline.restore_rates import RateSource, RestoreRates, restore_rates
from jobs.pipeline.stage import StageInputError, StageResult, resolve_snapshot
from jobs.pipeline.status import PlanStatus
from jobs.pipeline.workers import WorkerDied, release_pools, run_alone, run_on_workers, worker_pool
from jobs.settings import Settings
from schemas.kip441 import KIP441_NAMES

if TYPE_CHECKING:  # planner workers import this module: pandas would add a second to each one's start
    import pandas as pd

log = logging.getLogger(__name__)

# One row per planned group, so one UDF call returns one row: the plans columns the planner fills, plus every
# (step, process, task, role) of its steps as an array of plan_assignments' own columns, which
# explode_assignments turns into plan_assignments rows. Types come from the two tables' schema files.
PLANNED_COLUMNS = (
    "plan_id", "snapshot_id", "group_id", "status", "moves", "warmups", "rounds", "restore_offsets",
    "max_load_skew_before", "max_load_skew_after", "estimated_seconds", "move_order", "draining", "created_at",
    "reason", "restore_rate", "restore_rate_source",
)  # fmt: skip
STEP_COLUMNS = ("step", "process_id", "task_id", "role")
PLANNED_SCHEMA = (
    table_schema("plans").select_ddl(PLANNED_COLUMNS)
    + f", assignments array<{table_schema('plan_assignments').struct_ddl(STEP_COLUMNS)}>"
)
_PROGRESS_EVERY = 1_000
_ACTIVE, _STANDBY, _WARMUP = Role.ACTIVE.name, Role.STANDBY.name, Role.WARMUP.name
GROUPS_PER_CALL = 32  # groups one planner UDF call plans: see plan_groups
_CALL = "planner_call"


def plan_id_of(snapshot_id: str, group_id: str) -> str:
    """A plan's id: one plan per group per snapshot, so re-planning a snapshot finds the same ids."""
    return f"{snapshot_id}/{group_id}"


def planning_input(reports: DataFrame, tasks: DataFrame, lags: DataFrame) -> DataFrame:
    """One long frame per group for the planner UDF: client, held, task and offset rows (primitive columns only).

    ``reports``: member_reports; ``tasks``: group_tasks; ``lags``: task_lags of the same snapshot.
    """
    key = ["snapshot_id", "group_id"]
    fresh = reports.where(~sf.col("stale"))
    nulls = {
        "process_id": "string",
        "capacity": "int",
        "task_id": "string",
        "role": "string",
        "stateful": "boolean",
        "end_offset_sum": "bigint",
        "offset_sum": "bigint",
    }

    def shaped(frame: DataFrame, kind: str) -> DataFrame:
        present = set(frame.columns)
        columns = [sf.col(c).cast(t) if c in present else sf.lit(None).cast(t) for c, t in nulls.items()]
        return frame.select(
            *key, sf.lit(kind).alias("kind"), *[c.alias(n) for c, n in zip(columns, nulls, strict=True)]
        )

    clients = shaped(fresh.select(*key, "process_id", "capacity"), "client")
    held = [
        shaped(
            fresh.select(*key, "process_id", sf.explode(column).alias("task_id"), sf.lit(role).alias("role")), "held"
        )
        for column, role in (("active_tasks", "ACTIVE"), ("standby_tasks", "STANDBY"), ("warmup_tasks", "WARMUP"))
    ]
    ends = lags.groupBy(*key, "task_id").agg(sf.max("end_offset_sum").alias("end_offset_sum"))
    task_rows = shaped(
        tasks.join(ends, [*key, "task_id"], "left").select(*key, "task_id", "stateful", "end_offset_sum"), "task"
    )
    offsets = shaped(
        lags.where(sf.col("offset_sum").isNotNull()).select(*key, "process_id", "task_id", "offset_sum"), "offset"
    )
    frame = clients
    for part in [*held, task_rows, offsets]:
        frame = frame.unionByName(part)
    return frame


# One group's planning_input rows, column by column: a pandas frame, or lists cut from an Arrow table.
PlanningRows: TypeAlias = "pd.DataFrame | Mapping[str, Sequence[Any]]"
PLANNING_COLUMNS = (
    "snapshot_id", "group_id", "kind", "process_id", "capacity", "task_id", "role", "stateful", "end_offset_sum",
    "offset_sum",
)  # fmt: skip


def _missing(value: object) -> bool:
    """A null cell however the rows came: None from Arrow lists, NaN or pandas' NA from a pandas frame."""
    if value is None:
        return True
    try:
        return math.isnan(value)  # type: ignore[arg-type]
    except TypeError:  # pandas.NA has no float value
        return True


def _first(rows: PlanningRows, column: str) -> str:
    return str(next(iter(rows[column])))


def group_state(rows: PlanningRows) -> GroupState:
    """The assignor's input from one group's planning_input rows."""
    stateful: set[TaskId] = set()
    stateless: set[TaskId] = set()
    ends: dict[TaskId, int] = {}
    capacity: dict[str, int] = {}
    held: dict[str, dict[str, set[TaskId]]] = {}
    sums: dict[str, dict[TaskId, int]] = {}
    # A group's few dozen task ids recur in every held and offset row: parse each once.
    ids: dict[str, TaskId] = {}

    def task_id(text: str) -> TaskId:
        task = ids.get(text)
        if task is None:
            task = ids[text] = TaskId.parse(text)
        return task

    for kind, pid, tid, cap, role, is_stateful, end, offset in zip(
        rows["kind"],
        rows["process_id"],
        rows["task_id"],
        rows["capacity"],
        rows["role"],
        rows["stateful"],
        rows["end_offset_sum"],
        rows["offset_sum"],
        strict=True,
    ):
        if kind == "client":
            capacity[pid] = int(cap)
        elif kind == "held":
            held.setdefault(pid, {}).setdefault(role, set()).add(task_id(tid))
        elif kind == "task":
            task = task_id(tid)
            if is_stateful:
                stateful.add(task)
                ends[task] = 0 if _missing(end) else int(end)
            else:
                stateless.add(task)
        else:
            sums.setdefault(pid, {})[task_id(tid)] = int(offset)
    clients = []
    for pid in sorted(capacity):
        roles = held.get(pid, {})
        clients.append(
            ClientState(
                pid,
                capacity=capacity[pid],
                previous_active=frozenset(roles.get("ACTIVE", ())),
                # Streams counts a warmup as a standby in the previous assignment.
                previous_standby=frozenset(roles.get("STANDBY", set()) | roles.get("WARMUP", set())),
                task_offset_sums=sums.get(pid, {}),
            )
        )
    return GroupState(
        clients=clients,
        stateful_tasks=frozenset(stateful),
        stateless_tasks=frozenset(stateless),
        changelog_end_offset_sums=ends,
    )


def is_noop(plan: GroupPlan, group: GroupState) -> bool:
    """Balanced already: the target is what the group runs now and nothing needs a probing rebalance."""
    if len(plan.steps) != 1 or plan.steps[0].probing_rebalance_needed:
        return False
    return all(
        plan.target.clients[c.process_id].active == c.previous_active
        and plan.target.clients[c.process_id].standby == c.previous_standby
        for c in group.clients
    )


def step_assignments(plan: GroupPlan) -> dict[str, list[Any]]:
    """Every (step, process, task, role) of the plan's steps, steps numbered from 1, column by column (STEP_COLUMNS),
    each process's entries ordered by task."""
    # Columns, not a dict per entry: a group has hundreds of entries, and Arrow takes columns without a walk
    # over dicts. Role names are read once, not per entry (an enum's name is a property).
    columns = _no_steps()
    numbers, pids, tasks, roles = (columns[c] for c in STEP_COLUMNS)
    names: dict[TaskId, str] = {}
    for number, step in enumerate(plan.steps, start=1):
        for pid in sorted(step.clients):
            held = step.clients[pid]
            entries = sorted(
                [
                    *((t, _ACTIVE) for t in held.active),
                    *((t, _STANDBY) for t in held.standby),
                    *((t, _WARMUP) for t in held.warmup),
                ]
            )
            numbers.extend([number] * len(entries))
            pids.extend([pid] * len(entries))
            for task, role in entries:
                name = names.get(task)
                if name is None:
                    name = names[task] = str(task)
                tasks.append(name)
                roles.append(role)
    return columns


def _no_steps() -> dict[str, list[Any]]:
    return {c: [] for c in STEP_COLUMNS}


def plan_record(
    rows: PlanningRows,
    configs: AssignmentConfigs,
    restore_rate: float | None,
    created_at: int,
    drains: Mapping[str, frozenset[str]] | None = None,
    rate_source: RateSource | None = None,
) -> dict[str, Any]:
    """One group's PLANNED_SCHEMA row; a group whose input the assignor refuses (or an impossible drain, see
    ``drains``: group_id -> processes to drain) gets a REJECTED row saying why. ``rate_source`` says where
    ``restore_rate`` came from (default: the settings when given, else the assignor's default)."""
    out = _record(rows, created_at, drains)
    snapshot_id, group_id = out["snapshot_id"], out["group_id"]
    if rate_source is None:
        rate_source = RateSource.DEFAULT if restore_rate is None else RateSource.SETTINGS
    try:
        group = group_state(rows)
        plan = plan_group(group, configs, restore_rate=restore_rate, draining=frozenset(out["draining"] or ()))
    except ValueError as err:  # InvalidGroupState and friends: this group's input, not the run, is bad
        return _rejected(out, f"planning failed: {err}")
    except Exception as err:  # a planner fault on one group must not cost the rest of the fleet its plans
        log.exception("planning %s/%s failed", snapshot_id, group_id)
        return _rejected(out, f"planning failed: internal error {type(err).__name__}: {err}")
    metrics = plan.metrics
    out.update(
        status=PlanStatus.NOOP if is_noop(plan, group) else PlanStatus.PENDING,
        moves=int(metrics["moves"]),
        warmups=int(metrics["warmups"]),
        rounds=int(metrics["rounds"]),
        restore_offsets=int(metrics["restore_offsets"]),
        max_load_skew_before=float(metrics["max_load_skew_before"]),
        max_load_skew_after=float(metrics["max_load_skew_after"]),
        estimated_seconds=float(metrics["estimated_seconds"]),
        restore_rate=float(metrics["restore_rate"]),
        restore_rate_source=str(rate_source),
        move_order=[str(t) for t in plan.move_order] or None,
        reason=None,
        assignments=step_assignments(plan),
    )
    return out


def _record(rows: PlanningRows, created_at: int, drains: Mapping[str, frozenset[str]] | None) -> dict[str, Any]:
    """A group's PLANNED_SCHEMA row before planning: its ids, every other column null."""
    snapshot_id, group_id = _first(rows, "snapshot_id"), _first(rows, "group_id")
    # Every column present, null where a rejected group has no value: the engine checks the UDF's column names.
    out: dict[str, Any] = dict.fromkeys(PLANNED_COLUMNS)
    out |= {
        "plan_id": plan_id_of(snapshot_id, group_id),
        "snapshot_id": snapshot_id,
        "group_id": group_id,
        "created_at": created_at,
        "draining": sorted((drains or {}).get(group_id, frozenset())) or None,
    }
    return out


def _rejected(out: dict[str, Any], reason: str) -> dict[str, Any]:
    out.update(status=PlanStatus.REJECTED, reason=reason, assignments=_no_steps(), move_order=None)
    return out


def groups_of(rows: pa.Table) -> Iterator[dict[str, list[Any]]]:
    """Each group's planning rows, by column, from a table holding several groups' rows (in the order they came)."""
    # sort_indices is stable: a group's rows keep the order the engine sent them in.
    rows = rows.take(pc.sort_indices(rows, [("group_id", "ascending")]))
    columns = {name: rows.column(name).to_pylist() for name in PLANNING_COLUMNS}
    ids = columns["group_id"]
    start = 0
    for end in range(1, len(ids) + 1):
        if end == len(ids) or ids[end] != ids[start]:
            yield {name: values[start:end] for name, values in columns.items()}
            start = end


@dataclass(frozen=True)
class PlanCall:
    """What every planner call of a run plans with, beside its rows: ``rates`` is group_id -> restore rate and its
    source for the call's groups; ``schema`` the Arrow form of PLANNED_SCHEMA; ``drains`` as in plan_record;
    ``group_configs`` each group's own settings (group_settings.py), ``configs`` for a group it lacks."""

    configs: AssignmentConfigs
    rates: Mapping[str, tuple[float, RateSource]]
    created_at: int
    schema: pa.Schema
    drains: Mapping[str, frozenset[str]] | None = None
    group_configs: Mapping[str, AssignmentConfigs] = field(default_factory=dict)


def plan_table(rows: pa.Table, call: PlanCall) -> pa.Table:
    """plan_record on Arrow: several groups' rows in, one PLANNED_SCHEMA row per group out, each at its rate.
    Both conversions happen here, in whichever process plans: a group's row holds hundreds of nested assignment
    structs, and converting them where the engine calls the UDF (one GIL for every engine thread under Sail) was
    the stage's bottleneck."""
    records = []
    for group in groups_of(rows):
        group_id = _first(group, "group_id")
        rate, source = call.rates[group_id]
        configs = call.group_configs.get(group_id, call.configs)
        records.append(plan_record(group, configs, rate, call.created_at, call.drains, source))
    return planned_arrow(records, call.schema)


def planned_arrow(records: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    """plan_record rows as an Arrow table of ``schema``, built column by column."""
    arrays = [pa.array([r[name] for r in records], type=schema.field(name).type) for name in PLANNED_COLUMNS]
    steps = [r["assignments"] for r in records]
    offsets = pa.array(list(accumulate((len(s["step"]) for s in steps), initial=0)), type=pa.int32())
    entry: pa.StructType = schema.field("assignments").type.value_type
    values = pa.StructArray.from_arrays(
        [pa.array([v for s in steps for v in s[c]], type=entry.field(c).type) for c in STEP_COLUMNS],
        fields=[entry.field(c) for c in STEP_COLUMNS],
    )
    arrays.append(pa.ListArray.from_arrays(offsets, values, type=schema.field("assignments").type))
    return pa.Table.from_arrays(arrays, schema=schema)


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
    driver = os.getpid()

    def plan_some(rows: pa.Table) -> pa.Table:
        ids = pc.unique(rows.column("group_id")).to_pylist()
        call = PlanCall(
            configs,
            {str(g): rates.for_group(str(g)) for g in ids},
            created_at,
            schema,
            drains,
            {str(g): own[str(g)] for g in ids if str(g) in own},
        )
        if processes > 1 and os.getpid() == driver:
            # An in-process engine (Sail) calls this from several threads under one GIL: planning is
            # CPU-bound Python, so each call hands its groups to a worker process and waits without the GIL.
            try:
                out = run_on_workers(processes, planner, rows, call)
            except BrokenProcessPool:
                out = plan_alone(planner, rows, call)
        else:  # a Python worker process of a JVM engine: already one process per core
            out = planner(rows, call)
        _count_planned(len(ids))
        return out

    return plan_some


def plan_alone(planner: Callable[[pa.Table, PlanCall], pa.Table], rows: pa.Table, call: PlanCall) -> pa.Table:
    """A call whose worker died: each of its groups planned alone in a worker of its own, so only a group that
    kills its worker (memory, a crash) is REJECTED, saying so, and the rest are planned as ever."""
    ids = pc.unique(rows.column("group_id"))
    parts = [rows.filter(pc.equal(rows.column("group_id"), group_id)) for group_id in ids]
    log.warning("a planner worker died during a call of %d groups: planning each of them alone", len(parts))
    outcomes = run_alone([(planner, (part, call)) for part in parts])
    tables = []
    for part, outcome in zip(parts, outcomes, strict=True):
        if isinstance(outcome, WorkerDied):
            record = _record(next(groups_of(part)), call.created_at, call.drains)
            log.error("planning %s/%s killed its worker process", record["snapshot_id"], record["group_id"])
            reason = "planning failed: the worker process planning this group alone died (out of memory, or a crash)"
            tables.append(planned_arrow([_rejected(record, reason)], call.schema))
        else:
            tables.append(outcome)
    return pa.concat_tables(tables)


class _Progress:
    """Groups planned by this run in this process, logged every _PROGRESS_EVERY (engine threads add concurrently)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._planned = 0

    def restart(self) -> None:
        """Count from zero: a process may run the stage more than once (the benchmark, tests)."""
        with self._lock:
            self._planned = 0

    def add(self, groups: int) -> None:
        with self._lock:
            before = self._planned
            self._planned = after = before + groups
        if before // _PROGRESS_EVERY != after // _PROGRESS_EVERY:
            log.info("planned %d groups", after // _PROGRESS_EVERY * _PROGRESS_EVERY)


_progress = _Progress()


def _count_planned(groups: int) -> None:
    # A module function, not the object: the UDF's closure is pickled with the globals it names, a lock can't be.
    _progress.add(groups)


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
    """PLANNED_SCHEMA rows: plan_group once per group, in parallel over the engine's partitions, each estimated
    at its group's restore rate (``rates``). The groups are dealt by a hash of their id into ``calls`` UDF
    calls: a call per group costs more handing the group over (to the UDF, to a worker and back) than planning
    it under Sail, so each call plans about GROUPS_PER_CALL groups. Each group is planned with its
    ``group_configs`` entry, else ``configs``."""
    # The engine parses the DDL (a round trip, once), pyspark maps it to Arrow as applyInArrow expects it.
    schema = to_arrow_schema(inputs.sparkSession.createDataFrame([], PLANNED_SCHEMA).schema)
    udf = planner_udf(configs, rates, created_at, processes, schema, drains, group_configs=group_configs)
    call = sf.pmod(sf.xxhash64("group_id"), sf.lit(max(1, calls))).alias(_CALL)
    return inputs.select("*", call).groupBy(_CALL).applyInArrow(udf, PLANNED_SCHEMA)


def explode_assignments(planned: DataFrame) -> DataFrame:
    """plan_assignments rows from the planner's ``assignments`` column, one per struct."""
    entries = planned.select("plan_id", "snapshot_id", "group_id", sf.explode("assignments").alias("entry"))
    return entries.select("plan_id", "snapshot_id", "group_id", *[sf.col(f"entry.{c}").alias(c) for c in STEP_COLUMNS])


def plan_rows(planned: DataFrame, group_settings: DataFrame) -> DataFrame:
    """plans rows from the planner's output, with each group's KIP-441 settings the plan was made with, where they
    came from and what they change (``group_settings``: group_settings.settings_frame)."""
    return planned.join(group_settings, "group_id", "left").select(
        "plan_id",
        "snapshot_id",
        "group_id",
        "status",
        "moves",
        "warmups",
        "rounds",
        "restore_offsets",
        "max_load_skew_before",
        "max_load_skew_after",
        "estimated_seconds",
        "move_order",
        "draining",
        *KIP441_NAMES,
        "created_at",
        "reason",
        "restore_rate",
        "restore_rate_source",
        "settings_sources",
        "settings_changes",
        "settings_unexplained",
    )


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
    _progress.restart()
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
        # At most a bucket's groups (fewer when done ones are left out): calls of about GROUPS_PER_CALL groups.
        calls = math.ceil(settings.stage_bucket_groups / GROUPS_PER_CALL)
        planned_groups = plan_groups(
            inputs,
            AssignmentConfigs(),
            rates,
            created_at,
            settings.planner_processes,
            drains,
            calls,
            group_configs={g: s.configs() for g, s in own.items()},
        )
        planned_groups.write.mode("overwrite").parquet(str(staging))
        planned = lake.spark.read.schema(PLANNED_SCHEMA).parquet(str(staging))
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
