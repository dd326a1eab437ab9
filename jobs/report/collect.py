"""Read a snapshot's plans, baselines, validation, reports and schedules from the lake into the view model."""

from __future__ import annotations

import time
from collections.abc import Sequence

from pyspark.sql import DataFrame, Row, Window
from pyspark.sql import functions as sf

from assignor.cost import COST_COLUMNS, PlanCost
from assignor.protocol.state_report import GROUP_GENERATION_ORIGINS
from jobs.lakehouse.lake import Lake
from jobs.pipeline.plan_record import cost_of
from jobs.pipeline.report_only import plan_reach
from jobs.pipeline.restored import RESTORED_COLUMNS
from jobs.report.detail import held_by_process, placements, schedule
from jobs.report.fleet import importance, summarize
from jobs.report.gaps import reporting_gaps
from jobs.report.model import (
    Assignor,
    Assumptions,
    FailedExpectation,
    GroupDetail,
    GroupRisk,
    GroupRow,
    Held,
    PlanVersion,
    Report,
)

HISTORY = 30  # plans shown in a group's history, newest first
ASSUMED = (
    "acceptable_recovery_lag", "max_warmup_replicas", "num_standby_replicas", "probing_rebalance_interval_ms",
    "restore_rate", "restore_rate_source",
)  # fmt: skip


def _int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


def group_risks(lake: Lake, snapshot_id: str, chosen: Sequence[Row]) -> dict[str, GroupRisk]:
    """Per plan id: report completeness (fresh reports vs the broker's members), idle instances, actives placed on an
    instance not caught up at the first rebalance, the largest single restore, and the assumptions used (``chosen``:
    the plans rows group_rows read, with whichever ASSUMED columns the table has)."""
    groups = sorted({r["group_id"] for r in chosen})
    reporting: dict[str, list[tuple[str, bool, bool]]] = {}
    reports = _in(lake.read("member_reports", snapshot_id), "group_id", groups)
    for r in reports.select("group_id", "process_id", "stale", "active_tasks", "standby_tasks").collect():
        holds = bool(r["active_tasks"]) or bool(r["standby_tasks"])
        reporting.setdefault(r["group_id"], []).append((r["process_id"], bool(r["stale"]), holds))
    members = {
        r["group_id"]: int(r["n"])
        for r in _in(lake.read("group_members", snapshot_id), "group_id", groups)
        .groupBy("group_id")
        .agg(sf.countDistinct(sf.coalesce("process_id", "member_id")).alias("n"))
        .collect()
    }
    lags = lake.read("task_lags", snapshot_id).select("group_id", "process_id", "task_id", "lag", "caught_up")
    placed = _in(lake.read("plan_assignments"), "plan_id", [r["plan_id"] for r in chosen])
    first = placed.groupBy("plan_id").agg(sf.min("step").alias("first_step"))
    joined = placed.join(lags, ["group_id", "process_id", "task_id"], "left").join(first, "plan_id")
    figures = {
        r["plan_id"]: (r["unsafe"], r["largest"])
        for r in joined.groupBy("plan_id")
        .agg(
            sf.countDistinct(
                sf.when(
                    (sf.col("step") == sf.col("first_step")) & (sf.col("role") == "ACTIVE") & ~sf.col("caught_up"),
                    sf.col("task_id"),
                )
            ).alias("unsafe"),
            sf.max(sf.when(~sf.col("caught_up"), sf.col("lag"))).alias("largest"),
        )
        .collect()
    }
    out = {}
    for r in chosen:
        seen = reporting.get(r["group_id"], [])
        fresh = [(p, holds) for p, stale, holds in seen if not stale]
        unsafe, largest = figures.get(r["plan_id"], (None, None))
        values = r.asDict()  # a lake older than a column has None for it
        assumed = {c: values.get(c) for c in ASSUMED}
        out[r["plan_id"]] = GroupRisk(
            members_reporting=len(fresh),
            members_in_group=members.get(r["group_id"]),
            stale_reports=sum(1 for _, stale, _ in seen if stale),
            idle_instances=tuple(sorted(p for p, holds in fresh if not holds)),
            unsafe_moves=_int(unsafe),
            largest_restore=_int(largest),
            assumptions=Assumptions(
                _int(assumed["acceptable_recovery_lag"]),
                _int(assumed["max_warmup_replicas"]),
                _int(assumed["num_standby_replicas"]),
                _int(assumed["probing_rebalance_interval_ms"]),
                None if assumed["restore_rate"] is None else float(assumed["restore_rate"]),
                assumed["restore_rate_source"],
            ),
        )
    return out


def _in(frame: DataFrame, column: str, values: Sequence[str]) -> DataFrame:
    return frame.where(sf.col(column).isin(list(values)))


def snapshot_generations(lake: Lake, snapshot_id: str) -> dict[str, int]:
    """group_id -> the highest generation in the snapshot's reports its instances wrote themselves (observe's
    realized_generation counts the same way; group metadata and streams member epochs are left out)."""
    own = sf.col("origin").isNull() | sf.col("origin").isin([str(o) for o in GROUP_GENERATION_ORIGINS])
    rows = (
        lake.read("member_reports", snapshot_id)
        .where(own & (sf.col("generation") >= 0))
        .groupBy("group_id")
        .agg(sf.max("generation").alias("generation"))
        .collect()
    )
    return {str(r["group_id"]): int(r["generation"]) for r in rows}


def group_rows(lake: Lake, snapshot_id: str, group_ids: Sequence[str] | None) -> list[GroupRow]:
    """One row per plan of the snapshot (only ``group_ids`` when given), with its baselines and checks."""
    plans = lake.read("plans", snapshot_id)
    if group_ids is not None:
        if not group_ids:  # a filter that matches nothing shows nothing, not everything
            return []
        plans = _in(plans, "group_id", group_ids)
    # Plans rows written before the settings columns existed change nothing.
    changes = ["settings_changes"] if "settings_changes" in plans.columns else []
    assumed = [c for c in ASSUMED if c in plans.columns]
    bound = ["restore_lower_bound"] if "restore_lower_bound" in plans.columns else []  # older rows have none
    realized = ["realized_generation"] if "realized_generation" in plans.columns else []
    restored = [c for c in RESTORED_COLUMNS if c in plans.columns]  # older lakes have none
    chosen = plans.select(
        "plan_id", "group_id", "status", "reason", *COST_COLUMNS, "max_load_skew_before", "max_load_skew_after",
        "draining", "source_age_ms", "missing_offset_sums", "published_at", "realized_at", *changes, *assumed,
        *bound, *realized, *restored,
    ).collect()  # fmt: skip
    ids = [r["plan_id"] for r in chosen]
    baselines: dict[str, dict[Assignor, PlanCost]] = {}
    known = {a.value for a in Assignor if a is not Assignor.PLAN}
    for r in _in(lake.read("plan_baselines", snapshot_id), "plan_id", ids).collect():
        cost = cost_of(r.asDict())
        # An assignor this report does not know is left out, never mislabelled.
        if r["assignor"] in known and cost is not None:
            baselines.setdefault(r["plan_id"], {})[Assignor(r["assignor"])] = cost
    reach = plan_reach(lake, snapshot_id)
    generations = snapshot_generations(lake, snapshot_id) if realized else {}
    risks = group_risks(lake, snapshot_id, chosen)  # the plans rows read once
    checks = {
        r["plan_id"]: (int(r["passed"]), int(r["total"]))
        for r in _in(lake.read("validation_results"), "plan_id", ids)
        .groupBy("plan_id")
        .agg(sf.sum(sf.col("success").cast("int")).alias("passed"), sf.count(sf.lit(1)).alias("total"))
        .collect()
    }
    return [
        GroupRow(
            plan_id=r["plan_id"],
            group_id=r["group_id"],
            status=r["status"],
            reason=r["reason"],
            plan=cost_of(r.asDict()),
            baselines=baselines.get(r["plan_id"], {}),
            skew_before=r["max_load_skew_before"],
            skew_after=r["max_load_skew_after"],
            checks_passed=checks.get(r["plan_id"], (0, 0))[0],
            checks_total=checks.get(r["plan_id"], (0, 0))[1],
            draining=tuple(sorted(r["draining"] or ())),
            report_only=reach.report_only.get(r["group_id"]),
            steered_streams=r["group_id"] in reach.steered_streams,
            source_age_ms=r["source_age_ms"],
            missing_offset_sums=int(r["missing_offset_sums"] or 0),
            settings_changes=r["settings_changes"] if changes else None,
            risk=risks.get(r["plan_id"]),
            published_at=_int(r["published_at"]),
            realized_at=_int(r["realized_at"]),
            restore_lower_bound=_int(r["restore_lower_bound"]) if bound else None,
            snapshot_generation=generations.get(r["group_id"]),
            realized_generation=_int(r["realized_generation"]) if realized else None,
            **{c: _int(r[c]) for c in restored},
        )
        for r in chosen
    ]


def group_details(lake: Lake, snapshot_id: str, rows: Sequence[GroupRow]) -> list[GroupDetail]:
    """Placement, schedule, failed expectations and plan history of the given groups."""
    if not rows:
        return []
    ids, groups = [r.plan_id for r in rows], [r.group_id for r in rows]
    reports = _in(lake.read("member_reports", snapshot_id), "group_id", groups).where(~sf.col("stale"))
    before: dict[str, dict[str, Held]] = {}
    names: dict[str, dict[str, str]] = {}
    columns = ("group_id", "process_id", "active_tasks", "standby_tasks", "warmup_tasks", "client_id", "host")
    for r in reports.select(*columns).collect():
        name = r["client_id"] or r["host"]
        if name:  # people know their instances by client id or host; the process id shows on hover
            names.setdefault(r["group_id"], {})[r["process_id"]] = str(name)
        before.setdefault(r["group_id"], {})[r["process_id"]] = Held(
            frozenset(r["active_tasks"] or ()), frozenset(r["standby_tasks"] or ()), frozenset(r["warmup_tasks"] or ())
        )
    by_step: dict[str, dict[int, list[tuple[str, str, str]]]] = {}
    assignments = _in(lake.read("plan_assignments"), "plan_id", ids)
    for r in assignments.select("plan_id", "step", "process_id", "task_id", "role").collect():
        by_step.setdefault(r["plan_id"], {}).setdefault(int(r["step"]), []).append(
            (r["process_id"], r["task_id"], r["role"])
        )
    lags: dict[str, dict[tuple[str, str], int]] = {}
    for r in (
        _in(lake.read("task_lags", snapshot_id), "group_id", groups)
        .select("group_id", "process_id", "task_id", "lag")
        .collect()
    ):
        lags.setdefault(r["group_id"], {})[(r["process_id"], r["task_id"])] = int(r["lag"] or 0)
    failed: dict[str, list[FailedExpectation]] = {}
    results = _in(lake.read("validation_results"), "plan_id", ids).where(~sf.col("success"))
    for r in results.orderBy("suite", "expectation").collect():
        failed.setdefault(r["plan_id"], []).append(
            FailedExpectation(r["suite"], r["expectation"], int(r["unexpected_count"]))
        )
    intervals = {
        r["plan_id"]: r["probing_rebalance_interval_ms"]
        for r in _in(lake.read("plans", snapshot_id), "plan_id", ids)
        .select("plan_id", "probing_rebalance_interval_ms")
        .collect()
    }
    history: dict[str, list[PlanVersion]] = {}
    newest_first = Window.partitionBy("group_id").orderBy(sf.col("created_at").desc(), sf.col("plan_id").desc())
    past = (
        _in(lake.read("plans"), "group_id", groups)
        .withColumn("age", sf.row_number().over(newest_first))
        .where(sf.col("age") <= HISTORY)  # one plan a night: a group's history grows without end
        .orderBy("group_id", "age")
    )
    for r in past.collect():
        history.setdefault(r["group_id"], []).append(
            PlanVersion(
                r["snapshot_id"],
                r["plan_id"],
                r["status"],
                r["moves"],
                r["restore_offsets"],
                int(r["created_at"]),
                r["approved_by"],
                r["reason"],
            )
        )
    details = []
    for row in rows:
        steps = {step: held_by_process(step_rows) for step, step_rows in by_step.get(row.plan_id, {}).items()}
        target = steps[max(steps)] if steps else {}
        interval_s = (intervals.get(row.plan_id) or 0) / 1000
        details.append(
            GroupDetail(
                row=row,
                instances=placements(before.get(row.group_id, {}), target, names.get(row.group_id)),
                steps=schedule(steps, lags.get(row.group_id), interval_s),
                failed=tuple(failed.get(row.plan_id, ())),
                history=tuple(history.get(row.group_id, ())),
            )
        )
    return details


def build_report(lake: Lake, snapshot_id: str, group_ids: Sequence[str] | None = None, limit: int = 1000) -> Report:
    """The report of a snapshot as it stands in the lake now: every group's row, details for the ``limit`` that
    matter most (most restore, then longest, then most moves)."""
    rows = sorted(group_rows(lake, snapshot_id, group_ids), key=importance)
    return Report(
        snapshot_id=snapshot_id,
        generated_at=int(time.time() * 1000),
        fleet=summarize(snapshot_id, rows),
        rows=tuple(rows),
        details=tuple(group_details(lake, snapshot_id, rows[: max(limit, 0)])),
        reporting_gaps=reporting_gaps(lake, snapshot_id),
    )
