"""The report read from a real Delta lake on the embedded engine: the summary's numbers are the lake's, baselines
are compared when present and said to be "not computed" when absent, statuses are the lake's current ones."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as sf

from jobs.lakehouse.lake import Lake
from jobs.orchestration import tasks
from jobs.pipeline.approve import run_approve
from jobs.pipeline.targets import target_rows
from jobs.report import build_report, collect, report_path, run_report
from jobs.report.decide_page import write_decision_page
from jobs.report.fleet import headline_value
from jobs.report.model import Assignor
from jobs.report.render import render_report
from jobs.settings import Kip441Overrides, Settings
from tests.support.report_lake import SNAPSHOT, planned_lake, seed_baselines


def test_report_reads_the_lake_and_compares_with_kip441_only_where_it_was_computed(
    spark: SparkSession, tmp_path: Path
) -> None:
    lake = planned_lake(spark, tmp_path / "lake")
    plans = lake.read("plans", SNAPSHOT).collect()

    # No plan_baselines table yet (the baselines stage has not run): nothing invented, and it says so.
    bare = build_report(lake, SNAPSHOT)
    assert all(b.groups == 0 and b.baseline is None for c in bare.fleet.comparisons for b in c.baselines)
    page = run_report(lake, SNAPSHOT, tmp_path / "bare.html").read_text(encoding="utf-8")
    assert "What KIP-441 would do on this snapshot is not computed." in page

    # KIP-441 computed for every other plan: compared on those groups only.
    seeded = seed_baselines(lake, "kip441", every=2)
    report = build_report(lake, SNAPSHOT)
    fleet = report.fleet
    assert fleet.groups == len(plans)
    assert dict(fleet.by_status) == Counter(p["status"] for p in plans)
    moves = next(c for c in fleet.comparisons if c.metric == "moves")
    assert headline_value(moves.plan, "total") == sum(p["moves"] or 0 for p in plans)
    kip, broker = moves.baselines
    assert (kip.assignor, kip.groups) == (Assignor.KIP441, len(seeded))
    assert kip.baseline is not None and kip.baseline.total == sum(int(str(r[4])) for r in seeded)
    covered = {r[0] for r in seeded}
    assert kip.plan is not None and kip.plan.total == sum(p["moves"] or 0 for p in plans if p["plan_id"] in covered)
    assert broker.groups == 0 and broker.baseline is None
    restore = next(c for c in fleet.comparisons if c.metric == "restore_offsets")
    assert headline_value(restore.plan, "total") == sum(p["restore_offsets"] or 0 for p in plans)
    # The most offsets to restore first.
    restores = [r.figure("restore_offsets") or 0 for r in report.rows]
    assert restores == sorted(restores, reverse=True)

    # Each group's detail: the target per instance is the plan's last step, and the schedule has every step.
    detail = report.details[0]
    target = target_rows(lake.read("plan_assignments").where(sf.col("plan_id") == detail.row.plan_id)).collect()
    expected = Counter((r["process_id"], r["role"]) for r in target)
    shown = Counter(
        {(i.process_id, "ACTIVE"): len(i.after.active) for i in detail.instances}
        | {(i.process_id, "STANDBY"): len(i.after.standby) for i in detail.instances}
    )
    assert +shown == expected
    steps = lake.read("plan_assignments").where(sf.col("plan_id") == detail.row.plan_id).select("step").distinct()
    assert [s.step for s in detail.steps] == sorted(r["step"] for r in steps.collect())
    assert [h.plan_id for h in detail.history] == [detail.row.plan_id]

    # A group filter shows those groups only; one that matches nothing shows nothing, never the whole fleet.
    one = plans[0]["group_id"]
    assert [r.group_id for r in build_report(lake, SNAPSHOT, [one]).rows] == [one]
    empty = build_report(lake, SNAPSHOT, [])
    assert empty.rows == () and empty.fleet.groups == 0
    assert "0 groups planned" in render_report(empty)


def test_report_shows_the_status_the_lake_has_now(spark: SparkSession, tmp_path: Path) -> None:
    settings = Settings(lake_root=tmp_path / "lake", kip441_overrides=Kip441Overrides.fleet(num_standby_replicas=1))
    lake = planned_lake(spark, settings.lake_root, groups=2)
    validated = [p["plan_id"] for p in lake.read("plans", SNAPSHOT).collect() if p["status"] == "VALIDATED"]
    assert validated, "the synthetic groups' plans pass validation"
    run_approve(lake, settings, by="alice", plan_ids=validated[:1])
    report = build_report(lake, SNAPSHOT)
    statuses = {r.plan_id: r.status for r in report.rows}
    assert statuses[validated[0]] == "APPROVED"
    page = run_report(lake, SNAPSHOT, tmp_path / "r.html").read_text(encoding="utf-8")
    assert 'data-set-status="APPROVED" data-count="1"' in page


def test_a_report_that_fails_to_render_costs_neither_the_approval_page_nor_a_decision(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = planned_lake(spark, tmp_path / "lake", groups=2)

    def broken(*_args: object, **_kwargs: object) -> Path:
        raise RuntimeError("vl-convert crashed")

    monkeypatch.setattr(tasks, "write_report", broken)
    reviewed = tasks.review(tasks.Runtime(Settings(lake_root=lake.root), "127.0.0.1:9", None), SNAPSHOT, [], None)
    assert reviewed["candidates"], "the validated plans are still offered"
    assert "not written: RuntimeError: vl-convert crashed" in reviewed["report"]
    assert f"snapshot `{SNAPSHOT}`" in reviewed["body"]
    tasks._refresh_report(lake, SNAPSHOT)  # after a decision is committed: logged, not raised


def test_a_refresh_rewrites_the_report_and_the_decision_page_from_one_read_of_the_lake(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = planned_lake(spark, tmp_path / "lake", groups=2)
    page = report_path(lake, SNAPSHOT)
    decide = write_decision_page(build_report(lake, SNAPSHOT), page.parent, 1_795_000_000_000, "12 h")
    decide.write_text("as review wrote it", encoding="utf-8")
    reads: list[str] = []
    group_rows = collect.group_rows  # what every build of a report reads the lake with

    def counted(lake_: Lake, snapshot_id: str, group_ids: object) -> object:
        reads.append(snapshot_id)
        return group_rows(lake_, snapshot_id, group_ids)  # type: ignore[arg-type]

    monkeypatch.setattr(collect, "group_rows", counted)
    tasks._refresh_report(lake, SNAPSHOT)
    assert reads == [SNAPSHOT]  # both pages from one read
    assert SNAPSHOT in page.read_text(encoding="utf-8")
    rewritten = decide.read_text(encoding="utf-8")
    assert rewritten != "as review wrote it" and "Groups awaiting a decision" in rewritten
