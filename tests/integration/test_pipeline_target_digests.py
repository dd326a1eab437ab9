"""Validate binds each plan to the digest of its target computed from the rows' strings (targets.target_digests);
approval and publish recompute it through GroupAssignment (targets_of, target_digest). On random plans, including
repeated rows, warm-ups and drained processes, both give the same digest; a plan whose target holds a malformed task
id, which targets_of refuses, gets no digest and costs the other plans nothing."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from assignor import ClientAssignment, GroupAssignment, TaskId
from assignor.protocol.plans import target_digest
from jobs.pipeline.targets import target_digests, targets_of

ASSIGNMENT_DDL = "plan_id string, step int, process_id string, task_id string, role string"
PLANS_DDL = "plan_id string, draining array<string>"
# Process ids from outside may hold characters JSON escapes; "0_01" is no task id (TaskId.parse takes only "0_1").
PROCESSES = ("p1", "p2", 'p"3', "p\\4", "é5")
TASKS = ("0_1", "0_01", "0_1", "0_2", "1_0", "10_3", "2_10")
ROLES = ("ACTIVE", "STANDBY", "WARMUP")


@st.composite
def fleets(draw: st.DrawFn) -> tuple[list[tuple[str, int, str, str, str]], list[tuple[str, list[str] | None]]]:
    rows, plans = [], []
    for i in range(draw(st.integers(1, 4))):
        plan_id = f"s/g{i}"
        steps = draw(st.integers(1, 3))
        cell = st.tuples(
            st.integers(1, steps), st.sampled_from(PROCESSES), st.sampled_from(TASKS), st.sampled_from(ROLES)
        )
        rows += [(plan_id, *c) for c in draw(st.lists(cell, min_size=1, max_size=24))]
        drained = draw(st.none() | st.lists(st.sampled_from((*PROCESSES, "gone")), max_size=2))
        plans.append((plan_id, drained))
    return rows, plans


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fleet=fleets())
def test_the_digest_from_strings_equals_the_digest_of_the_target_read_back(
    spark: SparkSession, fleet: tuple[list[tuple[str, int, str, str, str]], list[tuple[str, list[str] | None]]]
) -> None:
    rows, plans = fleet
    assignments = spark.createDataFrame(rows, ASSIGNMENT_DDL)
    plan_rows = spark.createDataFrame(plans, PLANS_DDL)
    # Plan by plan, as targets_of reads a target: a target holding "0_01" is refused (only targets count: a warm-up or
    # an earlier step does not), and target_digests leaves that plan out without failing the others.
    expected: dict[str, str] = {}
    for plan_id, _ in plans:
        mine = assignments.where(assignments.plan_id == plan_id)
        try:
            expected |= {
                p: target_digest(t) for p, t in targets_of(mine, plan_rows.where(plan_rows.plan_id == plan_id)).items()
            }
        except ValueError as refused:
            assert "0_01" in str(refused)
    assert target_digests(assignments, plan_rows) == expected


def test_the_digest_binds_the_last_steps_actives_standbys_and_drained_processes(spark: SparkSession) -> None:
    rows = [
        ("s/g", 1, "a", "0_0", "ACTIVE"),
        ("s/g", 2, "a", "0_1", "ACTIVE"),
        ("s/g", 2, "b", "0_0", "ACTIVE"),
        ("s/g", 2, "b", "0_1", "STANDBY"),
        ("s/g", 2, "a", "0_0", "WARMUP"),
    ]
    plans = [("s/g", ["c"])]
    target = GroupAssignment(
        {
            "a": ClientAssignment(active=frozenset({TaskId(0, 1)})),
            "b": ClientAssignment(active=frozenset({TaskId(0, 0)}), standby=frozenset({TaskId(0, 1)})),
            "c": ClientAssignment(),
        }
    )
    got = target_digests(spark.createDataFrame(rows, ASSIGNMENT_DDL), spark.createDataFrame(plans, PLANS_DDL))
    assert got == {"s/g": target_digest(target)}
