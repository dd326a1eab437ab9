"""Stage 3b, baselines: per planned group, what Kafka's own assignors would cost on the same snapshot
(plan_baselines), so the report and the approval page compare every plan with leaving the group alone."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as sf

from assignor import AssignmentConfigs
from assignor.baselines import BASELINE_ASSIGNORS, baseline_cost
from jobs.lakehouse.columns import arrow_schema
from jobs.lakehouse.lake import Lake
from jobs.lakehouse.tables import table_schema
from jobs.pipeline.group_input import PlanningRows, first_value, group_state, groups_of
from jobs.pipeline.group_runner import GroupWork, calls_for, group_udf, restart_progress, run_groups
from jobs.pipeline.plan_record import cost_columns, plan_id_of
from jobs.pipeline.planning_input import planning_input
from jobs.pipeline.restore_rates import RestoreRates, restore_rates
from jobs.pipeline.stage import StageResult, resolve_snapshot
from jobs.settings import Kip441Settings, Settings
from schemas.kip441 import KIP441_NAMES

log = logging.getLogger(__name__)

BASELINE_MAX_TASKS = 1_000
BaselineRecords = Callable[[PlanningRows, AssignmentConfigs, "float | None"], list[dict[str, Any]]]


def baseline_records(
    rows: PlanningRows, configs: AssignmentConfigs, restore_rate: float | None
) -> list[dict[str, Any]]:
    """One group's plan_baselines rows, one per baseline assignor; a group the assignors refuse gets none."""
    snapshot_id, group_id = first_value(rows, "snapshot_id"), first_value(rows, "group_id")
    try:
        group = group_state(rows)
    except ValueError:  # the plan stage already recorded why this group's input is refused
        return []
    if len(group.all_tasks) > BASELINE_MAX_TASKS:
        # Replaying KIP-441 grows about with the square of the tasks: past this the report says "not computed"
        # rather than hold up the night for a comparison.
        log.info("baselines of %s/%s not computed: %d tasks", snapshot_id, group_id, len(group.all_tasks))
        return []
    out = []
    for name in sorted(BASELINE_ASSIGNORS):
        # Any failure costs only this group's row for this assignor: the report shows "not computed",
        # and the rest of the fleet's baselines still land.
        try:
            replayed = baseline_cost(group, configs, name, restore_rate=restore_rate)
        except Exception as err:
            log.warning(
                "baseline %s of %s/%s not computed: %s: %s", name, snapshot_id, group_id, type(err).__name__, err
            )
            continue
        out.append(
            {
                "plan_id": plan_id_of(snapshot_id, group_id),
                "snapshot_id": snapshot_id,
                "group_id": group_id,
                "assignor": name,
                **cost_columns(replayed.cost),
                "converged": replayed.converged,
            }
        )
    return out


@dataclass(frozen=True)
class BaselineCall:
    """What one call's replays run with beside its rows: each group's restore rate (``rates``) and settings
    (``group_configs``, else ``configs``), the Arrow form of plan_baselines (``schema``), and ``records``:
    baseline_records, or a stand-in a test passes."""

    configs: AssignmentConfigs
    rates: Mapping[str, float | None]
    schema: pa.Schema
    records: BaselineRecords = baseline_records
    group_configs: Mapping[str, AssignmentConfigs] = field(default_factory=dict)


def baseline_table(rows: pa.Table, call: BaselineCall) -> pa.Table:
    """Several groups' planning rows in, their plan_baselines rows out."""
    out: list[dict[str, Any]] = []
    for group in groups_of(rows):
        group_id = first_value(group, "group_id")
        out += call.records(group, call.group_configs.get(group_id, call.configs), call.rates[group_id])
    return pa.Table.from_pylist(out, schema=call.schema)


def _died_alone(rows: pa.Table, call: BaselineCall) -> pa.Table:
    """No baselines for a group whose replay killed its worker process while it ran alone."""
    log.error(
        "baselines of %s not computed: the worker process replaying them alone died", rows.column("group_id")[0].as_py()
    )
    return call.schema.empty_table()


def baselines_udf(
    configs: AssignmentConfigs,
    rates: RestoreRates,
    processes: int,
    schema: pa.Schema,
    records: BaselineRecords = baseline_records,
    group_configs: Mapping[str, AssignmentConfigs] | None = None,
) -> Callable[[pa.Table], pa.Table]:
    """The applyInArrow function: several groups' planning rows in, their plan_baselines rows (``schema``) out,
    estimated at the restore rate each group's plan was (``rates``) with the settings its plan was made with
    (``group_configs``, else ``configs``)."""
    own = dict(group_configs or {})

    def call(ids: list[str]) -> BaselineCall:
        return BaselineCall(
            configs, {g: rates.for_group(g)[0] for g in ids}, schema, records, {g: own[g] for g in ids if g in own}
        )

    return group_udf(GroupWork(baseline_table, call, _died_alone, "replayed the baselines of"), processes)


def run_baselines(lake: Lake, settings: Settings, snapshot_id: str | None = None) -> StageResult:
    """Replay every baseline assignor on each planned group of the snapshot that has no baselines yet."""
    snapshot_id = resolve_snapshot(lake, snapshot_id)
    restart_progress()
    plans = lake.read("plans", snapshot_id)
    planned = plans.select("group_id")
    # Kafka's assignor replayed with the settings each plan was made with: the group's own or its override.
    chosen = plans.select("group_id", *KIP441_NAMES).collect()
    made_with = {
        str(r["group_id"]): Kip441Settings.from_columns(r.asDict()).configs()
        for r in chosen
        if r["num_standby_replicas"] is not None
    }
    done = lake.read("plan_baselines", snapshot_id).select("group_id").distinct()
    inputs: DataFrame = (
        planning_input(
            lake.read("member_reports", snapshot_id),
            lake.read("group_tasks", snapshot_id),
            lake.read("task_lags", snapshot_id),
        )
        .join(planned, "group_id", "left_semi")
        .join(done, "group_id", "left_anti")
    )
    rates = restore_rates(lake, snapshot_id, settings.restore_rate)
    ddl = table_schema("plan_baselines").ddl
    schema = arrow_schema(lake.spark, ddl)
    udf = baselines_udf(AssignmentConfigs(), rates, settings.planner_processes, schema, group_configs=made_with)
    rows = run_groups(inputs, udf, ddl, calls_for(len(chosen)))
    outcome = lake.merge("plan_baselines", rows.where(sf.col("plan_id").isNotNull()))
    return StageResult("baselines", snapshot_id, (outcome,), {})
