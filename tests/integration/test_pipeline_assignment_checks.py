"""An active is checked against lags only where it matters: a first step's active on an instance not caught up fails;
the same task held earlier, a standby, a stateless task or nobody caught up passes."""

from __future__ import annotations

from pyspark.sql import SparkSession

from jobs.pipeline.checks import assignment_checks, holding_facts

ASSIGNMENTS = [
    ("s/g", "s", "g", 1, "p2", "0_0", "ACTIVE"),  # p2 is behind on 0_0 and never held it: not caught up
    ("s/g", "s", "g", 1, "p1", "0_0", "STANDBY"),
    ("s/g", "s", "g", 1, "p2", "0_1", "STANDBY"),
    ("s/g", "s", "g", 2, "p2", "0_1", "ACTIVE"),  # held since step 1: caught up by step 2
    ("s/g", "s", "g", 1, "p1", "0_2", "ACTIVE"),  # nobody is caught up on 0_2: any instance will do
    ("s/g", "s", "g", 1, "p2", "1_0", "ACTIVE"),  # stateless: no lag
    ("s/g", "s", "g", 1, "p9", "0_0", "WARMUP"),  # an instance that sent no fresh report
]


def test_only_a_first_steps_active_on_an_instance_behind_fails(spark: SparkSession) -> None:
    assignments = spark.createDataFrame(
        ASSIGNMENTS,
        "plan_id string, snapshot_id string, group_id string, step int, process_id string, task_id string, role string",
    )
    reports = spark.createDataFrame(
        [("s", "g", "p1", False), ("s", "g", "p2", False), ("s", "g", "p9", True)],
        "snapshot_id string, group_id string, process_id string, stale boolean",
    )
    tasks = spark.createDataFrame(
        [("s", "g", t, t != "1_0") for t in ("0_0", "0_1", "0_2", "1_0")],
        "snapshot_id string, group_id string, task_id string, stateful boolean",
    )
    lags = spark.createDataFrame(
        [
            ("s", "g", "p1", "0_0", True),
            ("s", "g", "p2", "0_0", False),
            ("s", "g", "p1", "0_1", True),
            ("s", "g", "p2", "0_1", False),
            ("s", "g", "p1", "0_2", False),
            ("s", "g", "p2", "0_2", False),
        ],
        "snapshot_id string, group_id string, process_id string, task_id string, caught_up boolean",
    )
    rows = assignment_checks(holding_facts(assignments, tasks, lags), reports).collect()
    checked = {(r["step"], r["process_id"], r["task_id"]): r for r in rows}
    assert len(rows) == len(ASSIGNMENTS)
    assert {key for key, r in checked.items() if not r["active_on_caught_up"]} == {(1, "p2", "0_0")}
    assert {key for key, r in checked.items() if not r["known_instance"]} == {(1, "p9", "0_0")}
    assert all(r["known_task"] for r in rows)
