"""validate's B1/B2 dataset on the Spark engine, including subtopologies that mix stateful and stateless tasks."""

from __future__ import annotations

from pyspark.sql import SparkSession

from jobs.pipeline.checks import balance_checks

# Subtopologies 0 and 1 each mix two stateful tasks (_0, _1) with three stateless ones (_2.._4).
STATEFUL = {"0_0", "0_1", "1_0", "1_1"}
TASKS = [f"{sub}_{p}" for sub in (0, 1) for p in range(5)]


def verdicts(spark: SparkSession, targets: dict[str, dict[str, list[str]]]) -> dict[str, tuple[bool, bool, bool]]:
    """balance_checks over one-step plans of a two-instance group: plan -> (B1 actives, B1 stateful, B2)."""
    plans = spark.createDataFrame(
        [(plan, "s1", "g", 1, 0) for plan in targets],
        "plan_id string, snapshot_id string, group_id string, rounds int, num_standby_replicas int",
    )
    reports = spark.createDataFrame(
        [("s1", "g", pid, 1, False) for pid in ("a", "b")],
        "snapshot_id string, group_id string, process_id string, capacity int, stale boolean",
    )
    tasks = spark.createDataFrame(
        [("s1", "g", t, int(t.split("_")[0]), t in STATEFUL) for t in TASKS],
        "snapshot_id string, group_id string, task_id string, subtopology int, stateful boolean",
    )
    assignments = spark.createDataFrame(
        [
            (plan, "s1", "g", 1, pid, task, "ACTIVE")
            for plan, owners in targets.items()
            for pid, held in owners.items()
            for task in held
        ],
        "plan_id string, snapshot_id string, group_id string, step int, process_id string, task_id string, role string",
    )
    return {
        r["plan_id"]: (r["actives_within_one"], r["stateful_replicas_within_one"], r["subtopologies_within_one"])
        for r in balance_checks(assignments, plans, reports, tasks).collect()
    }


def test_b1_and_b2_read_mixed_subtopologies_as_the_contract_does(spark: SparkSession) -> None:
    found = verdicts(
        spark,
        {
            # Every subtopology spread within one: balanced by any reading.
            "even": {"a": ["0_0", "0_2", "0_3", "1_1", "1_4"], "b": ["0_1", "0_4", "1_0", "1_2", "1_3"]},
            # All actives of each subtopology 4 against 1, but its stateful actives one each: B2 holds.
            "stateful-even": {"a": ["0_0", "0_2", "0_3", "0_4", "1_0"], "b": ["0_1", "1_1", "1_2", "1_3", "1_4"]},
            # Both stateful actives of subtopology 0 on a, and its actives 4 against 1: B2 is broken.
            "lopsided": {"a": ["0_0", "0_1", "0_2", "0_3", "1_2"], "b": ["0_4", "1_0", "1_1", "1_3", "1_4"]},
            # Seven actives against three, and every stateful task on a: B1 is broken both ways.
            "heavy": {"a": ["0_0", "0_1", "0_2", "0_3", "1_0", "1_1", "1_2"], "b": ["0_4", "1_3", "1_4"]},
        },
    )
    assert found["even"] == (True, True, True)
    assert found["stateful-even"] == (True, True, True)
    assert found["lopsided"] == (True, True, False)
    assert found["heavy"][:2] == (False, False)
