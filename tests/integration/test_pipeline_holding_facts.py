"""The row checks and K1 read one shared join of the assignments with tasks and lags (checks.holding_facts): on random
small plans their verdicts equal the rules worked out by hand in plain Python, also when K1 reads the row checks'
dataset, as validate does."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession

from jobs.pipeline.checks import assignment_checks, holding_facts, task_copy_checks

ASSIGNMENT_DDL = (
    "plan_id string, snapshot_id string, group_id string, step int, process_id string, task_id string, role string"
)
ROLES = ("ACTIVE", "STANDBY", "WARMUP")


@dataclass(frozen=True)
class Plan:
    """One plan of group g in snapshot s: ``held`` maps (step, process, task) to a role; ``caught_up`` the (process,
    task) pairs caught up at the snapshot among ``lagged`` ones (a stateful task's lag rows)."""

    held: dict[tuple[int, str, str], str]
    stateful: tuple[str, ...]
    stateless: tuple[str, ...]
    instances: tuple[str, ...]
    caught_up: frozenset[tuple[str, str]]
    standbys: int


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    instances = tuple(f"p{i}" for i in range(draw(st.integers(2, 4))))
    stateful = tuple(f"0_{i}" for i in range(draw(st.integers(1, 3))))
    stateless = ("1_0",) if draw(st.booleans()) else ()
    steps = draw(st.integers(1, 3))
    cells = [(s, p, t) for s in range(1, steps + 1) for p in instances for t in stateful + stateless]
    # An unreported instance ("p9") may hold a task too: it has no lag rows.
    cells += [(s, "p9", stateful[0]) for s in range(1, steps + 1)]
    held = draw(st.dictionaries(st.sampled_from(cells), st.sampled_from(ROLES), min_size=1, max_size=len(cells)))
    pairs = [(p, t) for p in instances for t in stateful]
    caught_up = frozenset(draw(st.lists(st.sampled_from(pairs), unique=True)))
    return Plan(held, stateful, stateless, instances, caught_up, draw(st.integers(0, 2)))


def k1_by_hand(plan: Plan) -> dict[tuple[int, str], tuple[int, int, bool]]:
    """(step, stateful task) -> (caught-up instances, caught-up copies kept, K1 holds), for every step the plan's
    stateful rows name."""
    steps = sorted({s for (s, _, t) in plan.held if t in plan.stateful})
    out = {}
    for step in steps:
        for task in plan.stateful:
            earlier = {p for (s, p, t) in plan.held if t == task and s < step}
            caught = {p for (p, t) in plan.caught_up if t == task} | earlier
            copies = {p for (s, p, t) in plan.held if t == task and s == step and p in caught}
            wanted = min(len(caught), plan.standbys + 1)
            out[(step, task)] = (len(caught), len(copies), len(copies) >= wanted)
    return out


def actives_by_hand(plan: Plan) -> dict[tuple[int, str, str], bool]:
    """(step, process, task) -> active_on_caught_up for every row."""
    out = {}
    for (step, pid, task), role in plan.held.items():
        anyone = any(t == task for (_, t) in plan.caught_up)
        ok = (
            role != "ACTIVE"
            or task not in plan.stateful
            or not anyone
            or (pid, task) in plan.caught_up
            or any(s < step and p == pid and t == task for (s, p, t) in plan.held)
        )
        out[(step, pid, task)] = ok
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=plans())
def test_row_checks_and_k1_on_the_shared_facts_equal_the_rules_by_hand(spark: SparkSession, plan: Plan) -> None:
    assignments = spark.createDataFrame(
        [("s/g", "s", "g", s, p, t, role) for (s, p, t), role in plan.held.items()], ASSIGNMENT_DDL
    )
    tasks = spark.createDataFrame(
        [("s", "g", t, t in plan.stateful) for t in plan.stateful + plan.stateless],
        "snapshot_id string, group_id string, task_id string, stateful boolean",
    )
    lags = spark.createDataFrame(
        [("s", "g", p, t, (p, t) in plan.caught_up) for p in plan.instances for t in plan.stateful],
        "snapshot_id string, group_id string, process_id string, task_id string, caught_up boolean",
    )
    reports = spark.createDataFrame(
        [("s", "g", p, False) for p in plan.instances],
        "snapshot_id string, group_id string, process_id string, stale boolean",
    )
    pending = spark.createDataFrame([("s/g", plan.standbys)], "plan_id string, num_standby_replicas int")
    facts = holding_facts(assignments, tasks, lags)

    k1 = {
        (r["step"], r["task_id"]): (r["caught_up_instances"], r["caught_up_copies"], r["caught_up_copies_kept"])
        for r in task_copy_checks(facts, tasks, lags, pending).collect()
    }
    assert k1 == k1_by_hand(plan)

    checked = assignment_checks(facts, reports)
    rows = checked.collect()
    assert len(rows) == len(plan.held)
    assert {(r["step"], r["process_id"], r["task_id"]): r["active_on_caught_up"] for r in rows} == actives_by_hand(plan)
    assert {r["process_id"] for r in rows if not r["known_instance"]} <= {"p9"}
    # Validate materializes the row checks' dataset once and computes K1 from it: the same verdicts.
    from_checked = {
        (r["step"], r["task_id"]): (r["caught_up_instances"], r["caught_up_copies"], r["caught_up_copies_kept"])
        for r in task_copy_checks(checked, tasks, lags, pending).collect()
    }
    assert from_checked == k1
