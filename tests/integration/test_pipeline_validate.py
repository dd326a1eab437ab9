"""Great Expectations on real plans: deliberately broken plans are REJECTED naming the expectation they broke."""

from __future__ import annotations

import random
import re
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as sf

from assignor.protocol.reported_settings import ReportedSettings
from jobs.lakehouse.lake import Lake
from jobs.lakehouse.tables import table_schema
from jobs.local.synthetic import (
    SyntheticGroup,
    fleet_end_offsets,
    fleet_partitions,
    fleet_records,
    synthetic_group,
)
from jobs.pipeline.broker_reads import BrokerState
from jobs.pipeline.data_docs_assets import assets_current
from jobs.pipeline.extract import write_snapshot
from jobs.pipeline.intake import intake_records
from jobs.pipeline.lags import run_lags
from jobs.pipeline.plan import run_plan
from jobs.pipeline.validate import run_validate
from jobs.settings import Kip441Overrides, Settings

pytestmark = pytest.mark.engines  # every test here runs on Sail and on Apache Spark with delta-spark

CAPTURED_AT = 1_700_000_000_000


def planned_lake(
    spark: SparkSession, root: Path, settings: Settings, change: Callable[[list[SyntheticGroup]], None] | None = None
) -> tuple[Lake, dict[str, str]]:
    """Four small synthetic groups (``change``d, if given) extracted, lagged and planned; group_id -> plan_id."""
    rng = random.Random(11)
    fleet = [
        synthetic_group(f"g{i}", rng, subtopologies=2, partitions=6, instances=4, scenario="scaled_out")
        for i in range(4)
    ]
    if change is not None:
        change(fleet)
    intake = intake_records(fleet_records(fleet), fleet_partitions(fleet), CAPTURED_AT, 10**13)
    lake = Lake(spark, root)
    state = BrokerState(fleet_partitions(fleet), fleet_end_offsets(fleet), {})
    write_snapshot(lake, "s1", CAPTURED_AT, intake, state)
    run_lags(lake, settings, "s1")
    run_plan(lake, settings, "s1")
    return lake, {r["group_id"]: r["plan_id"] for r in lake.read("plans", "s1").collect()}


def one_standby(root: Path) -> Settings:
    return Settings(lake_root=root, kip441_overrides=Kip441Overrides.fleet(num_standby_replicas=1), planner_processes=1)


@pytest.fixture(scope="module")
def planned_once(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The four groups planned with one standby, once per engine (a planning is most of a test's time on Apache
    Spark); each test tampers with its own copy. (lake root, group_id -> plan_id)."""
    root = tmp_path_factory.mktemp("planned") / "lake"
    _, plans = planned_lake(spark, root, one_standby(root))
    return root, plans


def copy_of(
    spark: SparkSession, planned: tuple[Path, dict[str, str]], tmp_path: Path
) -> tuple[Settings, Lake, dict[str, str]]:
    """A test's own copy of the planned lake (Delta logs name their files relative to the table: a copy is whole)."""
    root, plans = planned
    settings = one_standby(tmp_path / "lake")
    shutil.copytree(root, settings.lake_root, ignore=shutil.ignore_patterns(Lake.STAGING))
    return settings, Lake(spark, settings.lake_root), dict(plans)


def test_broken_plans_are_rejected_with_the_expectation_named(
    spark: SparkSession, planned_once: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    settings, lake, plans = copy_of(spark, planned_once, tmp_path)
    step1 = lake.read("plan_assignments", "s1").where(sf.col("step") == 1).collect()

    def held(plan_id: str) -> dict[str, set[str]]:
        by: dict[str, set[str]] = {}
        for r in step1:
            if r["plan_id"] == plan_id:
                by.setdefault(r["process_id"], set()).add(r["task_id"])
        return by

    def free_slots(plan_id: str) -> list[tuple[str, str]]:
        """(instance, task) pairs the instance does not hold at step 1."""
        by = held(plan_id)
        tasks = sorted(set().union(*by.values()))
        return [(pid, t) for pid in sorted(by) for t in tasks if t not in by[pid]]

    def row(group: str, pid: str, task: str, role: str) -> tuple[object, ...]:
        return (plans[group], "s1", group, 1, pid, task, role)

    twice_active = row("g0", *free_slots(plans["g0"])[0], "ACTIVE")
    warmups = [row("g1", pid, task, "WARMUP") for pid, task in free_slots(plans["g1"])[:3]]
    ghost = row("g2", "ghost", sorted(held(plans["g2"]).popitem()[1])[0], "STANDBY")
    tampered = spark.createDataFrame([twice_active, *warmups, ghost], table_schema("plan_assignments").ddl)
    lake.merge("plan_assignments", tampered)

    run_validate(lake, settings, "s1")

    status = {r["group_id"]: (r["status"], r["reason"] or "") for r in lake.read("plans", "s1").collect()}
    assert status["g0"][0] == "REJECTED" and "one_active_per_task_per_step (1 rows)" in status["g0"][1]
    assert status["g1"][0] == "REJECTED" and "warmups_within_budget (1 rows)" in status["g1"][1]
    assert status["g2"][0] == "REJECTED" and "instance_known_to_snapshot (1 rows)" in status["g2"][1]
    assert status["g3"] == ("VALIDATED", "")
    results = {
        (r["plan_id"], r["expectation"]): (r["success"], r["unexpected_count"])
        for r in lake.read("validation_results").collect()
    }
    assert results[(plans["g0"], "one_active_per_task_per_step")] == (False, 1)
    assert results[(plans["g3"], "one_active_per_task_per_step")] == (True, 0)
    assert results[(plans["g1"], "warmups_within_budget")] == (False, 1)
    assert all(ok for (plan, _), (ok, _) in results.items() if plan == plans["g3"])
    docs = settings.data_docs / "index.html"
    assert docs.is_file() and "step_tasks" in docs.read_text(encoding="utf-8")
    # Each validation page is named after the snapshot it validated, not GX's "__none__".
    pages = list((settings.data_docs / "validations").rglob("*.html"))
    assert pages and all("__none__" not in p.as_posix() for p in pages)
    assert all("/s1/" in p.as_posix() for p in pages)
    text = pages[0].read_text(encoding="utf-8")
    assert assets_current(settings.data_docs_assets_dir), "`make data-docs-assets` installs the Data Docs' assets"
    for page in [docs, *pages]:  # every script and stylesheet is a vendored file of the site, none from elsewhere
        html = page.read_text(encoding="utf-8")
        assert not re.search(r"<script[^>]*src=\"https?://|<link[^>]*href=\"https?://", html), page
        linked = re.findall(r"<(?:script|link)\b[^>]*\b(?:src|href)=\"([^\"#]+)\"", html)
        assert sum("static/vendor/" in u for u in linked) >= 10, page
        assert all((page.parent / u).resolve().is_file() for u in linked), page
    assert re.search(r"Run Name</div></td><td[^>]*><div[^>]*>s1<", text)
    assert "Data asset: None" not in text and re.search(r"Data asset: \w+", text)


def test_a_dropped_caught_up_copy_or_an_unbalanced_target_is_rejected(
    spark: SparkSession, planned_once: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    settings, lake, plans = copy_of(spark, planned_once, tmp_path)
    assignments = DeltaTable(str(lake.path("plan_assignments")))
    rows = lake.read("plan_assignments", "s1").collect()
    caught_up = {
        (r["group_id"], r["process_id"], r["task_id"])
        for r in lake.read("task_lags", "s1").where(sf.col("caught_up")).collect()
    }
    # g0 (K1): drop a first-step standby on an instance caught up at the snapshot. The active is on a caught-up
    # instance too (H1), so the task had the two caught-up copies K1 asks for with one standby.
    standby = next(
        r
        for r in rows
        if r["plan_id"] == plans["g0"]
        and r["step"] == 1
        and r["role"] == "STANDBY"
        and (r["group_id"], r["process_id"], r["task_id"]) in caught_up
    )
    assignments.delete(
        f"plan_id = '{standby['plan_id']}' AND step = 1 AND process_id = '{standby['process_id']}' "
        f"AND task_id = '{standby['task_id']}' AND role = 'STANDBY'"
    )
    # g1 (B1): at the target, hand an active of the least busy instance to the busiest one.
    last = max(r["step"] for r in rows if r["plan_id"] == plans["g1"])
    actives: dict[str, list[str]] = {}
    for r in rows:
        if r["plan_id"] == plans["g1"] and r["step"] == last and r["role"] == "ACTIVE":
            actives.setdefault(r["process_id"], []).append(r["task_id"])
    giver = min(actives, key=lambda p: (len(actives[p]), p))
    taker = max((p for p in actives if p != giver), key=lambda p: (len(actives[p]), p))
    task = sorted(actives[giver])[0]
    assignments.delete(
        f"plan_id = '{plans['g1']}' AND step = {last} AND process_id = '{giver}' AND task_id = '{task}'"
        " AND role = 'ACTIVE'"
    )
    moved = [(plans["g1"], "s1", "g1", last, taker, task, "ACTIVE")]
    lake.merge("plan_assignments", spark.createDataFrame(moved, table_schema("plan_assignments").ddl))

    run_validate(lake, settings, "s1")

    status = {r["group_id"]: (r["status"], r["reason"] or "") for r in lake.read("plans", "s1").collect()}
    assert status["g0"][0] == "REJECTED" and "caught_up_copies_kept (1 rows)" in status["g0"][1]
    assert status["g1"][0] == "REJECTED" and "b1_actives_within_one (1 rows)" in status["g1"][1]
    assert status["g2"] == ("VALIDATED", "") and status["g3"] == ("VALIDATED", "")


def test_a_settings_change_without_an_override_is_rejected_naming_it_and_an_override_is_flagged(
    spark: SparkSession, tmp_path: Path
) -> None:
    def g0_disagrees(fleet: list[SyntheticGroup]) -> None:
        # Every synthetic group runs with one standby; one instance of g0 reports none (a config rollout).
        first = replace(fleet[0].reports[0], settings=ReportedSettings(num_standby_replicas=0))
        fleet[0] = replace(fleet[0], reports=[first, *fleet[0].reports[1:]])

    overrides = Kip441Overrides.model_validate({"g2": {"num_standby_replicas": 0}})
    settings = Settings(lake_root=tmp_path / "lake", kip441_overrides=overrides, planner_processes=1)
    lake, plans = planned_lake(spark, settings.lake_root, settings, g0_disagrees)
    run_validate(lake, settings, "s1")

    rows = {r["group_id"]: r for r in lake.read("plans", "s1").collect()}
    g0, g2 = rows["g0"], rows["g2"]
    assert g0["status"] == "REJECTED" and g0["num_standby_replicas"] == 1  # the safer value, but not silently
    assert "settings_changes_explicit (1 rows)" in g0["reason"]
    assert "num_standby_replicas 0,1 -> 1 (members disagree)" in g0["reason"]
    assert g2["status"] == "VALIDATED" and g2["num_standby_replicas"] == 0
    assert g2["settings_changes"] == "num_standby_replicas 1 -> 0 (override)" and g2["settings_unexplained"] is None
    assert g2["settings_sources"]["num_standby_replicas"] == "override"
    for group in ("g1", "g3"):
        assert rows[group]["status"] == "VALIDATED" and rows[group]["settings_changes"] is None
        assert rows[group]["num_standby_replicas"] == 1
        assert rows[group]["settings_sources"]["num_standby_replicas"] == "reported"
    results = {
        (r["plan_id"], r["expectation"]): r["success"]
        for r in lake.read("validation_results").where(sf.col("expectation").startswith("settings_")).collect()
    }
    assert results[(plans["g2"], "settings_as_the_group_runs")] is False  # the flag, recorded
    assert results[(plans["g2"], "settings_changes_explicit")] is True
    assert results[(plans["g0"], "settings_changes_explicit")] is False
    assert results[(plans["g1"], "settings_as_the_group_runs")] is True
