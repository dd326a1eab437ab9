"""Report-only groups on a real lake and broker: a plan made from metadata that lacks offset sums says its restore
figure is a lower bound (and does not price them as full restores), carries the metadata's age, and approving it
HOLDs it; publish never sends it."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as sf

from assignor.runtime.kafka_io import read_latest_by_key
from jobs.lakehouse.lake import Lake
from jobs.local.broker import EmbeddedBroker
from jobs.pipeline.approve import run_approve
from jobs.pipeline.lags import run_lags
from jobs.pipeline.plan import run_plan
from jobs.pipeline.publish import run_publish
from jobs.pipeline.stage import StageInputError
from jobs.pipeline.validate import run_validate
from jobs.report import run_report
from jobs.settings import Kip441Overrides, Settings
from tests.support.pipeline_kafka import create_topics
from tests.support.report_only_data import one_subtopology_group, write_reports
from tests.support.signing import SIGNER, key_file

CAPTURED_AT = 1_700_000_000_000
HOUR_MS = 3_600_000
BIG_END = 400_000  # partition 0 of every changelog: a store big enough that a full restore would stand out
ENDS = [BIG_END, 500]
# x runs 0_0 and keeps a caught-up standby of 0_1; y runs 0_1 and holds a standby of 0_0 whose offset sum its
# subscription lacks (it was assigned in the rebalance that sent it): the group is balanced as it is.
BALANCED = {"x": (["0_0"], ["0_1"], {"0_0": -2, "0_1": 500}), "y": (["0_1"], ["0_0"], {"0_1": -2})}
# x runs both tasks, y only a standby of 0_0 without an offset sum: a plan must move one task to y.
LOPSIDED = {"x": (["0_0", "0_1"], [], {"0_0": -2, "0_1": -2}), "y": ([], ["0_0"], {})}


def _settings(tmp_path: Path) -> Settings:
    return Settings(
        lake_root=tmp_path / "lake",
        plan_signing_key_file=key_file(tmp_path),
        plan_key_id=SIGNER.key_id,
        # The reports below carry no settings: these are what the groups run with, given as explicit overrides.
        kip441_overrides=Kip441Overrides.fleet(acceptable_recovery_lag=100, num_standby_replicas=1),
        planner_processes=1,
        reports_topic="reports",
        plans_topic="plans",
    )


def _snapshot(lake: Lake, snapshot_id: str, captured_at: int) -> None:
    reports = [
        # Read from metadata: dated at capture, as extract dates them.
        *one_subtopology_group("legacy", BALANCED, captured_at, report_only=True),
        *one_subtopology_group("legacy-lopsided", LOPSIDED, captured_at, report_only=True),
        # The same state reported by our runtime a minute before capture: its reports are what they say.
        *one_subtopology_group("runtime-app", BALANCED, captured_at - 60_000, report_only=False),
    ]
    write_reports(
        lake, snapshot_id, captured_at, reports, {"legacy": ENDS, "legacy-lopsided": ENDS, "runtime-app": ENDS}
    )


def _plans(lake: Lake, snapshot_id: str) -> dict[str, dict[str, object]]:
    return {r["group_id"]: r.asDict() for r in lake.read("plans", snapshot_id).collect()}


def test_report_only_plans_flag_missing_offset_sums_carry_their_age_and_are_held_after_approval(
    spark: SparkSession, broker: EmbeddedBroker, tmp_path: Path
) -> None:
    settings = _settings(tmp_path)
    lake = Lake(spark, settings.lake_root)
    _snapshot(lake, "s1", CAPTURED_AT)
    run_lags(lake, settings, "s1")
    run_plan(lake, settings, "s1")
    plans = _plans(lake, "s1")
    # y's standby of 0_0 stays where it is: its unknown offset sum is not priced as the whole 400,000-offset store.
    assert (plans["legacy"]["status"], plans["legacy"]["restore_offsets"]) == ("NOOP", 0)
    assert (plans["legacy"]["missing_offset_sums"], plans["legacy"]["incomplete_offsets"]) == (1, True)
    # The plan for the lopsided group restores 0_1's 500 offsets onto y; 0_0's standby there is not counted.
    assert (plans["legacy-lopsided"]["restore_offsets"], plans["legacy-lopsided"]["incomplete_offsets"]) == (500, True)
    # A group reporting itself is what it says: the missing sum there is no state, a full restore, and no flag.
    assert plans["runtime-app"]["restore_offsets"] == BIG_END
    assert (plans["runtime-app"]["missing_offset_sums"], plans["runtime-app"]["incomplete_offsets"]) == (0, False)
    assert plans["runtime-app"]["source_age_ms"] == 60_000
    # The lower bound priced the missing sums as full restores too: capped at the restore left, never above it.
    assert plans["legacy"]["restore_lower_bound"] == 0
    assert all(0 <= int(str(p["restore_lower_bound"])) <= int(str(p["restore_offsets"])) for p in plans.values())
    assert plans["legacy"]["source_age_ms"] == 0  # first seen now: no older snapshot says how old it is

    # Validation flags the missing offset sums and does not reject the plan for them.
    run_validate(lake, settings, "s1")
    lopsided = _plans(lake, "s1")["legacy-lopsided"]
    assert lopsided["status"] == "VALIDATED"
    assert "flagged: offset_sums_known (1 rows)" in str(lopsided["reason"])
    results = lake.read("validation_results").where(sf.col("plan_id") == str(lopsided["plan_id"]))
    flag = results.where(sf.col("expectation") == "offset_sums_known").first()
    assert flag is not None and not flag["success"] and flag["unexpected_count"] == 1

    # Approving it records the decision and HOLDs it: the group runs nothing that could honor a plan.
    approved = run_approve(lake, settings, by="alice", snapshot_id="s1")
    assert approved.counts["held"] == 1
    held = _plans(lake, "s1")["legacy-lopsided"]
    assert (held["status"], held["approved_by"]) == ("HELD", "alice")
    assert "report-only" in str(held["reason"])
    assert not run_approve(lake, settings, by="alice", plan_ids=[str(held["plan_id"])]).changed
    planned = lake.read("assignment_history").where(
        (sf.col("plan_id") == str(held["plan_id"])) & (sf.col("source") == "planned")
    )
    assert planned.count() > 0  # what a person approved is recorded, published or not

    create_topics(broker.bootstrap, {settings.plans_topic: 1}, compacted=[settings.plans_topic])
    published = run_publish(lake, settings, broker.bootstrap, snapshot_id="s1")
    assert published.counts.get("published", 0) == 0
    assert read_latest_by_key(broker.bootstrap, settings.plans_topic) == {}
    with pytest.raises(StageInputError, match="is HELD"):
        run_publish(lake, settings, broker.bootstrap, plan_ids=[str(held["plan_id"])])
    assert _plans(lake, "s1")["legacy-lopsided"]["status"] == "HELD"

    # An hour later the same members are in the same generation: their metadata is at least an hour old.
    _snapshot(lake, "s2", CAPTURED_AT + HOUR_MS)
    run_lags(lake, settings, "s2")
    run_plan(lake, settings, "s2")
    later = _plans(lake, "s2")
    assert later["legacy"]["source_age_ms"] == HOUR_MS and later["runtime-app"]["source_age_ms"] == 60_000

    page = run_report(lake, "s2", tmp_path / "report.html").read_text(encoding="utf-8")
    assert "report-only: planned from group metadata at least 1 h old" in page
    assert "≥ 0" in page and "1 held replica without offset sums" in page
