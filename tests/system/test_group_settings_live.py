"""A live group keeps its own KIP-441 settings: real instance processes (assignor.runtime) running with one standby
per task, on the real broker, extracted, planned and validated by the real stages while the pipeline's own default
is none. An explicit override that drops the standbys is planned, recorded and flagged, never silent."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as sf

from assignor import AssignmentConfigs
from jobs.lakehouse.lake import Lake
from jobs.local.broker import EmbeddedBroker
from jobs.local.direct_plan import live_reports
from jobs.local.fleet import Fleet
from jobs.pipeline.extract import run_extract
from jobs.pipeline.lags import run_lags
from jobs.pipeline.plan import run_plan
from jobs.pipeline.targets import plan_targets
from jobs.pipeline.validate import run_validate
from jobs.report import build_report, run_report
from jobs.report.approval import summary_markdown
from jobs.settings import Kip441Overrides, Settings
from tests.support.fleet_harness import CONFIGS, PARTITIONS, fleet_config, start_settled
from tests.support.kafka_isolation import isolated
from tests.support.runtime_harness import wait_for

GROUP = "orders"
OWN = dataclasses.replace(CONFIGS, num_standby_replicas=1)  # what the group runs with


@dataclass
class Planned:
    lake: Lake
    bootstrap: str
    root: Path
    snapshot: str
    plan: dict[str, object]


def plan_snapshot(lake: Lake, settings: Settings, bootstrap: str) -> tuple[str, dict[str, object]]:
    """extract -> lags -> plan -> validate; the snapshot and the group's plans row."""
    snapshot = run_extract(lake, settings, bootstrap).snapshot_id
    assert snapshot is not None
    run_lags(lake, settings, snapshot)
    run_plan(lake, settings, snapshot)
    run_validate(lake, settings, snapshot)
    row = lake.read("plans", snapshot).where(sf.col("group_id") == GROUP).first()
    assert row is not None
    return snapshot, row.asDict()


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory, kafka: EmbeddedBroker, spark: SparkSession) -> Iterator[Planned]:
    """Three instances with one standby per task settle and report; the pipeline plans them with no override."""
    root = tmp_path_factory.mktemp("group-settings")
    with isolated(kafka) as broker, Fleet(fleet_config(broker.bootstrap, root / "fleet", OWN)) as fleet:
        fleet.create_group(GROUP)
        start_settled(fleet, GROUP, ["i1", "i2", "i3"])
        pids = {i.process_id for i in fleet.members(GROUP) if i.alive}

        def reports_hold_standbys() -> bool:
            reports = live_reports(broker.bootstrap, "_rebalance_reports", GROUP)
            held = [t for p in pids if p in reports for t in reports[p]["standby_tasks"]]
            return pids <= set(reports) and len(held) == PARTITIONS

        wait_for(reports_hold_standbys, 60, "reports of the settled group with one standby per task")
        settings = Settings(lake_root=root / "lake", kafka_bootstrap=broker.bootstrap, planner_processes=1)
        assert settings.kip441_overrides.for_group(GROUP) == {}
        assert AssignmentConfigs().num_standby_replicas == 0  # the pipeline's own default: no standbys
        lake = Lake(spark, settings.lake_root)
        snapshot, plan = plan_snapshot(lake, settings, broker.bootstrap)
        yield Planned(lake, broker.bootstrap, root, snapshot, plan)


def test_the_reports_carry_the_groups_own_settings_into_the_lake(live: Planned) -> None:
    rows = live.lake.read("member_reports", live.snapshot).where(sf.col("group_id") == GROUP).collect()
    assert len(rows) == 3
    for r in rows:
        assert r["protocol"] == "classic" and r["origin"] == "python-runtime"
        assert (r["num_standby_replicas"], r["acceptable_recovery_lag"], r["probing_rebalance_interval_ms"]) == (
            1,
            OWN.acceptable_recovery_lag,
            OWN.probing_rebalance_interval_ms,
        )


def test_the_group_is_planned_with_its_own_standbys_and_its_plan_keeps_them(live: Planned) -> None:
    plan = live.plan
    assert plan["num_standby_replicas"] == 1
    assert plan["probing_rebalance_interval_ms"] == OWN.probing_rebalance_interval_ms
    assert plan["acceptable_recovery_lag"] == OWN.acceptable_recovery_lag
    assert plan["settings_sources"] == dict.fromkeys(
        ("acceptable_recovery_lag", "max_warmup_replicas", "num_standby_replicas", "probing_rebalance_interval_ms"),
        "reported",
    )
    assert plan["settings_changes"] is None and plan["status"] in ("VALIDATED", "NOOP"), plan
    target = plan_targets(live.lake, [str(plan["plan_id"])])[str(plan["plan_id"])]
    standbys = sorted(str(t) for ca in target.clients.values() for t in ca.standby)
    assert standbys == sorted(f"0_{p}" for p in range(PARTITIONS))  # every stateful task keeps its standby


def test_an_explicit_override_that_drops_the_standbys_is_flagged_not_silent(live: Planned) -> None:
    settings = Settings(
        lake_root=live.root / "lake",
        kafka_bootstrap=live.bootstrap,
        planner_processes=1,
        kip441_overrides=Kip441Overrides.model_validate({GROUP: {"num_standby_replicas": 0}}),
    )
    snapshot, plan = plan_snapshot(live.lake, settings, live.bootstrap)
    assert plan["num_standby_replicas"] == 0 and plan["status"] == "VALIDATED", plan
    assert plan["settings_changes"] == "num_standby_replicas 1 -> 0 (override)"
    results = {
        r["expectation"]: r["success"]
        for r in live.lake.read("validation_results").where(sf.col("plan_id") == str(plan["plan_id"])).collect()
    }
    assert results["settings_as_the_group_runs"] is False  # the flag, recorded
    assert results["settings_changes_explicit"] is True  # asked for: not a rejection
    view = build_report(live.lake, snapshot, None, 1000)
    body = summary_markdown(view.fleet, view.rows)  # the approval page's body
    assert "**Settings change** in 1 plan" in body and "num\\_standby\\_replicas 1 -\\> 0 (override)" in body
    html = run_report(live.lake, snapshot, None).read_text(encoding="utf-8")
    assert "settings change: num_standby_replicas 1 -&gt; 0 (override)" in html
