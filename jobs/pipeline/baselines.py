"""Stage 3b, baselines: per planned group, what Kafka's own assignors would cost on the same snapshot
(plan_baselines), so the report and the approval page compare every plan with leaving the group alone."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as sf

from assignor import AssignmentConfigs
from assignor.baselines import BASELINE_ASSIGNORS, baseline_cost
from jobs.lakehouse.lake import Lake
from jobs.lakehouse.tables import table_schema
from jobs.pipeline.plan import group_state, plan_id_of, planning_input
from jobs.pipeline.restore_rates import RestoreRates, restore_rates
from jobs.pipeline.stage import StageResult, resolve_snapshot
from jobs.pipeline.workers import WorkerDied, run_alone, run_on_workers
from jobs.settings import Kip441Settings, Settings
from schemas.kip441 import KIP441_NAMES

log = logging.getLogger(__name__)

BASELINE_MAX_TASKS = 1_000


def baseline_records(
    rows: pd.DataFrame, configs: AssignmentConfigs, restore_rate: float | None
) -> list[dict[str, Any]]:
    """One group's plan_baselines rows, one per baseline assignor; a group the assignors refuse gets none."""
    snapshot_id, group_id = str(rows["snapshot_id"].iloc[0]), str(rows["group_id"].iloc[0])
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
            cost = baseline_cost(group, configs, name, restore_rate=restore_rate)
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
                "moves": cost.moves,
                "warmups": cost.warmups,
                "rounds": cost.rounds,
                "restore_offsets": cost.restore_offsets,
                "estimated_seconds": cost.estimated_seconds,
                "converged": cost.converged,
            }
        )
    return out


def baselines_udf(
    configs: AssignmentConfigs,
    rates: RestoreRates,
    processes: int,
    records: Callable[[pd.DataFrame, AssignmentConfigs, float | None], list[dict[str, Any]]] = baseline_records,
    group_configs: Mapping[str, AssignmentConfigs] | None = None,
) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """The applyInPandas function: one group's planning rows in, its plan_baselines rows out, estimated at the
    restore rate its plan was (``rates``) with the settings its plan was made with (``group_configs``, else
    ``configs``); ``records`` is baseline_records, or a stand-in a test passes."""
    own = dict(group_configs or {})
    default = configs
    driver = os.getpid()
    columns = table_schema("plan_baselines").column_names

    def replay(rows: pd.DataFrame) -> pd.DataFrame:
        restore_rate, _ = rates.for_group(str(rows["group_id"].iloc[0]))
        configs = own.get(str(rows["group_id"].iloc[0]), default)
        if processes > 1 and os.getpid() == driver:  # see planner_udf: CPU-bound Python off the engine's GIL
            try:
                out = run_on_workers(processes, records, rows, configs, restore_rate)
            except BrokenProcessPool:  # a worker died: this group alone, so only a group that kills it goes without
                (alone,) = run_alone([(records, (rows, configs, restore_rate))])
                if isinstance(alone, WorkerDied):
                    group_id = rows["group_id"].iloc[0]
                    log.error("baselines of %s not computed: the worker process replaying them alone died", group_id)
                    alone = []
                out = alone
        else:
            out = records(rows, configs, restore_rate)
        return pd.DataFrame(out, columns=columns)

    return replay


def run_baselines(lake: Lake, settings: Settings, snapshot_id: str | None = None) -> StageResult:
    """Replay every baseline assignor on each planned group of the snapshot that has no baselines yet."""
    snapshot_id = resolve_snapshot(lake, snapshot_id)
    plans = lake.read("plans", snapshot_id)
    planned = plans.select("group_id")
    # Kafka's assignor replayed with the settings each plan was made with: the group's own or its override.
    made_with = {
        str(r["group_id"]): Kip441Settings.from_columns(r.asDict()).configs()
        for r in plans.where(sf.col("num_standby_replicas").isNotNull()).select("group_id", *KIP441_NAMES).collect()
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
    udf = baselines_udf(AssignmentConfigs(), rates, settings.planner_processes, group_configs=made_with)
    rows = inputs.groupBy("group_id").applyInPandas(udf, table_schema("plan_baselines").ddl)
    outcome = lake.merge("plan_baselines", rows.where(sf.col("plan_id").isNotNull()))
    return StageResult("baselines", snapshot_id, (outcome,), {})
