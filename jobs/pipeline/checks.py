"""The datasets the validation suites run on: plan rows reshaped so each rule is one column check per row."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as sf


def per_task(frame: DataFrame) -> DataFrame:
    """``frame`` joined by sort-merge, never broadcast: it has rows per task (millions for a fleet). An engine sizes
    a Delta read by its compressed Parquet files, so such a side can look small enough to broadcast while its hash
    table needs hundreds of MB (Apache Spark ran out of memory that way at 10,000 groups). Sort-merge spills."""
    return frame.hint("merge")


def holding_facts(assignments: DataFrame, tasks: DataFrame, lags: DataFrame) -> DataFrame:
    """plan_assignments rows with what both the row checks and K1 read about each: ``known_task`` and ``stateful``
    (the group's task), ``caught_up_now`` (true: this instance was caught up at the snapshot; null: it was not, or
    has no lag row), ``anyone_caught_up`` (any instance; null: the task has no lag rows) and ``first_step`` (the
    first step this instance holds the task in the plan).

    These joins over every row are most of validate's work: assignment_checks keeps them, so K1 reads its rows."""
    key = ["snapshot_id", "group_id"]
    anyone = lags.groupBy(*key, "task_id").agg(sf.max(sf.col("caught_up").cast("int")).alias("anyone_caught_up"))
    # One row per task of a group, joined with ``anyone`` first: each assignment row then takes one join for both.
    per_group_task = tasks.select(*key, "task_id", sf.lit(True).alias("known_task"), "stateful").join(
        per_task(anyone), [*key, "task_id"], "full"
    )
    # Only the caught-up rows: a third of the lags, and the join's table is built from them.
    caught_up = lags.where(sf.col("caught_up")).select(
        *key, "process_id", "task_id", sf.lit(True).alias("caught_up_now")
    )
    first_held = assignments.groupBy("plan_id", "process_id", "task_id").agg(sf.min("step").alias("first_step"))
    return (
        assignments.join(per_task(per_group_task), [*key, "task_id"], "left")
        .join(per_task(caught_up), [*key, "process_id", "task_id"], "left")
        .join(per_task(first_held), ["plan_id", "process_id", "task_id"], "left")
    )


# What task_copy_checks reads of holding_facts beyond the plan_assignments columns.
K1_FACTS = ("snapshot_id", "stateful", "caught_up_now", "first_step")


def assignment_checks(facts: DataFrame, reports: DataFrame) -> DataFrame:
    """plan_assignments rows (``facts``: holding_facts) with known_instance, known_task and active_on_caught_up flags,
    and the facts task_copy_checks reads (one materialized dataset serves both).

    An active is on a caught-up instance when the instance was caught up at the snapshot, or held the task
    in an earlier step (the plan waits for it to catch up), or when no instance was caught up on the task.
    """
    key = ["snapshot_id", "group_id"]
    instances = reports.where(~sf.col("stale")).select(*key, "process_id", sf.lit(True).alias("known_instance"))
    active_on_caught_up = (
        (sf.col("role") != "ACTIVE")
        | sf.col("anyone_caught_up").isNull()  # stateless task: no lag
        | (sf.col("anyone_caught_up") == 0)
        | sf.coalesce(sf.col("caught_up_now"), sf.lit(False))
        | (sf.col("step") > sf.col("first_step"))
    )
    return facts.join(instances, [*key, "process_id"], "left").select(
        "plan_id",
        "group_id",
        "step",
        "process_id",
        "task_id",
        "role",
        sf.coalesce(sf.col("known_instance"), sf.lit(False)).alias("known_instance"),
        sf.coalesce(sf.col("known_task"), sf.lit(False)).alias("known_task"),
        active_on_caught_up.alias("active_on_caught_up"),
        *K1_FACTS,
    )


def step_task_checks(assignments: DataFrame, tasks: DataFrame) -> DataFrame:
    """One row per (plan, step, task of the group) with the number of instances running it as active."""
    steps = assignments.select("plan_id", "snapshot_id", "group_id", "step").distinct()
    universe = steps.join(per_task(tasks.select("snapshot_id", "group_id", "task_id")), ["snapshot_id", "group_id"])
    actives = (
        assignments.where(sf.col("role") == "ACTIVE")
        .groupBy("plan_id", "step", "task_id")
        .agg(sf.count(sf.lit(1)).alias("active_count"))
    )
    return universe.join(per_task(actives), ["plan_id", "step", "task_id"], "left").select(
        "plan_id",
        "step",
        "task_id",
        sf.coalesce(sf.col("active_count"), sf.lit(0)).cast("bigint").alias("active_count"),
    )


def instance_task_checks(assignments: DataFrame) -> DataFrame:
    """One row per (plan, step, instance, task held) with the number of roles it is held in."""
    return assignments.groupBy("plan_id", "step", "process_id", "task_id").agg(
        sf.count(sf.lit(1)).cast("bigint").alias("roles")
    )


def step_checks(assignments: DataFrame, plans: DataFrame | None = None) -> DataFrame:
    """One row per (plan, step) with its number of warmups; with ``plans`` also whether they are within the
    plan's own max_warmup_replicas (``within_warmup_budget``; each group is planned with its own settings)."""
    steps = assignments.groupBy("plan_id", "step").agg(
        sf.sum(sf.when(sf.col("role") == "WARMUP", 1).otherwise(0)).cast("bigint").alias("warmups")
    )
    if plans is None:
        return steps
    budget = plans.select("plan_id", "max_warmup_replicas")
    return steps.join(budget, "plan_id", "left").select(
        "plan_id",
        "step",
        "warmups",
        (sf.col("warmups") <= sf.coalesce(sf.col("max_warmup_replicas"), sf.lit(0))).alias("within_warmup_budget"),
    )


def settings_checks(plans: DataFrame) -> DataFrame:
    """One row per plan with what its settings change versus the group's own: ``settings_changes`` (explicit
    overrides included) and ``settings_unexplained`` (changes no override asked for)."""
    return plans.select("plan_id", "settings_changes", "settings_unexplained")


def task_copy_checks(facts: DataFrame, tasks: DataFrame, lags: DataFrame, plans: DataFrame) -> DataFrame:
    """One row per (plan, step, stateful task) with K1's verdict: ``caught_up_copies_kept`` (``facts``:
    holding_facts, or assignment_checks rows, which keep them).

    Before step k an instance is caught up on a task when it was at the snapshot or held the task in an earlier
    step (each step assumes the previous one's replicas caught up). Step k must keep min(c, 1 + standbys) of the
    task's replicas on its c caught-up instances.
    """
    key = ["snapshot_id", "group_id"]
    stateful = tasks.where(sf.col("stateful")).select(*key, "task_id")
    held = facts.where(sf.coalesce(sf.col("stateful"), sf.lit(False)))
    steps = held.select("plan_id", *key, "step").distinct()
    universe = steps.join(per_task(stateful), key)
    caught_up_now = sf.coalesce(sf.col("caught_up_now"), sf.lit(False))
    # The c caught-up instances before step k: every instance caught up at the snapshot (holding the task or not),
    # and every other that held it in an earlier step.
    at_snapshot = lags.where(sf.col("caught_up")).groupBy(*key, "task_id").agg(sf.count(sf.lit(1)).alias("at_snapshot"))
    late = held.where(~caught_up_now).select("plan_id", "process_id", "task_id", "first_step").distinct()
    caught_up_later = (
        universe.select("plan_id", "step", "task_id")
        .join(per_task(late), ["plan_id", "task_id"])
        .where(sf.col("first_step") < sf.col("step"))
        .groupBy("plan_id", "step", "task_id")
        .agg(sf.count(sf.lit(1)).alias("caught_up_later"))
    )
    # The replicas step k keeps on them: held at step k by an instance caught up before it.
    kept = (
        held.where(caught_up_now | (sf.col("first_step") < sf.col("step")))
        .select("plan_id", "step", "process_id", "task_id")
        .distinct()
        .groupBy("plan_id", "step", "task_id")
        .agg(sf.count(sf.lit(1)).alias("caught_up_copies"))
    )
    copies = plans.select("plan_id", (sf.col("num_standby_replicas") + 1).alias("copies"))
    rows = (
        universe.join(per_task(at_snapshot), [*key, "task_id"], "left")
        .join(per_task(caught_up_later), ["plan_id", "step", "task_id"], "left")
        .join(per_task(kept), ["plan_id", "step", "task_id"], "left")
        .join(copies, "plan_id", "left")
        .select(
            "plan_id",
            "step",
            "task_id",
            (sf.coalesce(sf.col("at_snapshot"), sf.lit(0)) + sf.coalesce(sf.col("caught_up_later"), sf.lit(0)))
            .cast("bigint")
            .alias("caught_up_instances"),
            sf.coalesce(sf.col("caught_up_copies"), sf.lit(0)).cast("bigint").alias("caught_up_copies"),
            sf.col("copies"),
        )
    )
    wanted = sf.least(sf.col("caught_up_instances"), sf.coalesce(sf.col("copies"), sf.lit(1)).cast("bigint"))
    return rows.withColumn("caught_up_copies_kept", sf.col("caught_up_copies") >= wanted)


# Ratios of counts to small integer capacities: two that differ by more than 1 differ by 1 + 1/(c1*c2) at least.
_WITHIN_ONE = 1 + 1e-9


def _spread_within_one(per_client: DataFrame, keys: list[str], value: str) -> DataFrame:
    """Per ``keys``: whether ``value`` varies by at most one over the rows (clients)."""
    return per_client.groupBy(*keys).agg(
        ((sf.max(value) - sf.min(value)) <= _WITHIN_ONE).alias("within_one"),
    )


def balance_checks(assignments: DataFrame, plans: DataFrame, reports: DataFrame, tasks: DataFrame) -> DataFrame:
    """One row per plan with B1 and B2 read on its last step (the target, where no probing is pending).

    B1: actives per capacity within one over the instances, and stateful actives plus standbys (stateful tasks
    only) where the capacities let replicas spread that evenly. B2: per subtopology and capacity, active counts
    within one; a subtopology mixing stateful and stateless tasks passes when its stateful actives alone are.
    Instances the plan drains hold nothing at the end and are left out: the rest must balance among themselves.
    """
    key = ["snapshot_id", "group_id"]
    # Plans rows written before the drain column existed, or built by hand, drain nothing.
    draining = sf.col("draining") if "draining" in plans.columns else sf.lit(None).cast("array<string>")
    last = plans.select(
        "plan_id", *key, sf.col("rounds").alias("step"), "num_standby_replicas", draining.alias("draining")
    )
    instances = reports.where(~sf.col("stale")).select(*key, "process_id", "capacity")
    kinds = tasks.select(*key, "task_id", "subtopology", "stateful")
    drained = sf.array_contains(sf.coalesce(sf.col("draining"), sf.array().cast("array<string>")), sf.col("process_id"))
    members = last.join(instances, key).where(~drained).drop("draining")
    last = last.drop("draining")
    held = (
        assignments.join(last.select("plan_id", "step"), ["plan_id", "step"], "left_semi")
        .join(per_task(kinds), [*key, "task_id"])
        .select("plan_id", "process_id", "subtopology", "stateful", "role")
    )
    active, standby = sf.col("role") == "ACTIVE", sf.col("role") == "STANDBY"
    loads = held.groupBy("plan_id", "process_id").agg(
        sf.sum(active.cast("int")).alias("actives"),
        sf.sum(((active & sf.col("stateful")) | standby).cast("int")).alias("stateful_load"),
    )
    clients = (
        members.join(loads, ["plan_id", "process_id"], "left")
        .na.fill(0, ["actives", "stateful_load"])
        .select(
            "plan_id",
            "process_id",
            "capacity",
            (sf.col("actives") / sf.col("capacity")).alias("active_ratio"),
            (sf.col("stateful_load") / sf.col("capacity")).alias("stateful_ratio"),
        )
    )
    b1_actives = _spread_within_one(clients, ["plan_id"], "active_ratio").withColumnRenamed("within_one", "b1")
    b1_stateful = _spread_within_one(clients, ["plan_id"], "stateful_ratio").withColumnRenamed(
        "within_one", "b1_stateful"
    )
    # Replicas can only spread within one when no instance's share exceeds one copy of every stateful task.
    shape = (
        members.groupBy("plan_id", "num_standby_replicas")
        .agg(sf.count(sf.lit(1)).alias("n"), sf.sum("capacity").alias("total"), sf.max("capacity").alias("top"))
        .join(
            last.join(per_task(kinds.where(sf.col("stateful"))), key)
            .groupBy("plan_id")
            .agg(sf.count(sf.lit(1)).alias("s")),
            "plan_id",
            "left",
        )
        .na.fill(0, ["s"])
    )
    replicas = sf.col("s") * (1 + sf.least(sf.col("n") - 1, sf.col("num_standby_replicas")))
    feasible = shape.select("plan_id", (sf.ceil(replicas * sf.col("top") / sf.col("total")) <= sf.col("s")).alias("ok"))
    subtopologies = (
        last.join(per_task(kinds), key)
        .groupBy("plan_id", "subtopology")
        .agg(sf.max(sf.col("stateful").cast("int")).alias("has_state"))
    )
    per_sub = (
        held.where(active)
        .groupBy("plan_id", "process_id", "subtopology")
        .agg(sf.count(sf.lit(1)).alias("every"), sf.sum(sf.col("stateful").cast("int")).alias("alone"))
    )
    grid = (
        members.select("plan_id", "process_id", "capacity")
        .join(subtopologies, "plan_id")
        .join(per_sub, ["plan_id", "process_id", "subtopology"], "left")
        .na.fill(0, ["every", "alone"])
    )
    b2_classes = grid.groupBy("plan_id", "subtopology", "capacity").agg(
        ((sf.max("every") - sf.min("every")) <= 1).alias("every_ok"),
        ((sf.max("has_state") == 1) & ((sf.max("alone") - sf.min("alone")) <= 1)).alias("alone_ok"),
    )
    b2 = b2_classes.groupBy("plan_id").agg(sf.min((sf.col("every_ok") | sf.col("alone_ok")).cast("int")).alias("b2"))
    return (
        last.select("plan_id")
        .join(b1_actives, "plan_id", "left")
        .join(b1_stateful, "plan_id", "left")
        .join(feasible, "plan_id", "left")
        .join(b2, "plan_id", "left")
        .select(
            "plan_id",
            sf.coalesce(sf.col("b1"), sf.lit(True)).alias("actives_within_one"),
            (sf.coalesce(sf.col("b1_stateful"), sf.lit(True)) | ~sf.coalesce(sf.col("ok"), sf.lit(True))).alias(
                "stateful_replicas_within_one"
            ),
            (sf.coalesce(sf.col("b2"), sf.lit(1)) == 1).alias("subtopologies_within_one"),
        )
    )
