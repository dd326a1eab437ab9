"""Bad input on a real broker: every quarantine reason is recorded and counted, and nothing else is lost."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as sf

from jobs.lakehouse.lake import Lake
from jobs.local.broker import EmbeddedBroker
from jobs.pipeline.extract import run_extract
from jobs.pipeline.lags import run_lags
from jobs.pipeline.plan import run_plan
from jobs.settings import Settings
from tests.support.pipeline_kafka import create_topics, fill_changelog, produce, report, stateful_topology

pytestmark = pytest.mark.engines  # every spark test here runs on Sail and on Apache Spark with delta-spark


def test_every_quarantine_reason_is_recorded_and_rows_reconcile(
    spark: SparkSession, broker: EmbeddedBroker, tmp_path: Path
) -> None:
    settings = Settings(lake_root=tmp_path / "lake", reports_topic="reports", planner_processes=1)
    bootstrap = broker.bootstrap
    create_topics(bootstrap, {"reports": 1, "g-in0": 2, "g-store0-changelog": 2, "h-in0": 2, "h-store0-changelog": 2})
    fill_changelog(bootstrap, "g-store0-changelog", [3, 3])
    g, h = stateful_topology("g", 1), stateful_topology("h", 1)
    other = {"0": {**h["0"], "source_topics": ["h-in0", "h-extra"]}}
    missing = stateful_topology("m", 1)  # its topics were never created

    def record(key: str, value: dict[str, object] | bytes | None) -> tuple[bytes, bytes | None, None]:
        body = value if isinstance(value, bytes) or value is None else json.dumps(value).encode()
        return key.encode(), body, None

    records = [
        record("g/p1", report("g", "p1", active=["0_0"], offset_sums={"0_0": -2}, topology=g)),
        record("g/p2", report("g", "p2", active=["0_1"], offset_sums={"0_1": -2, "0_0": 1}, topology=g)),
        record("g/p3", report("g", "p3", standby=["0_7"], topology=g)),  # unknown_task
        record("g/p4", report("g", "p4", offset_sums={"0_0": -5}, topology=g)),  # offset_sum_below_-3
        record("g/p5", report("g", "p6", topology=g)),  # conflicting_report: key names another process
        record("g/p7", report("g", "p7", active=["0_0"], standby=["0_0"], topology=g)),  # conflicting_report
        record("g/bad", b"{not json"),  # malformed_json
        record("g/bytes", b"\xff\xfe"),  # malformed_json: not UTF-8
        record("g/p8", {**report("g", "p8", topology=g), "capacity": 0}),  # schema_violation
        record("g/p9", report("g", "p9", topology=g, reported_at=1)),  # stale: kept, flagged
        record("g/old", None),  # tombstone: a withdrawn instance, not bad input
        record("h/p1", report("h", "p1", topology=h)),  # group_skipped: two topologies
        record("h/p2", report("h", "p2", topology=other)),
        record("m/p1", report("m", "p1", topology=missing)),  # group_skipped: topics missing
    ]
    produce(bootstrap, "reports", records)
    lake = Lake(spark, settings.lake_root)

    result = run_extract(lake, settings, bootstrap)
    snapshot = result.snapshot_id
    quarantine = lake.read("quarantine", snapshot)
    reasons = Counter(r["reason"].split(":", 1)[0] for r in quarantine.where(sf.col("source") == "reports").collect())
    assert reasons == {
        "malformed_json": 2,
        "schema_violation": 1,
        "offset_sum_below_-3": 1,
        "conflicting_report": 2,
        "unknown_task": 1,
        "group_skipped": 3,
    }
    assert result.counts["tombstones"] == 1
    assert {f"quarantined[{k}]": v for k, v in reasons.items()}.items() <= dict(result.counts).items()
    skipped = {r["key"]: r["reason"] for r in quarantine.where(sf.col("source") == "group").collect()}
    assert set(skipped) == {"h", "m"}
    assert "2 different topologies" in skipped["h"] and "m-in0" in skipped["m"]
    raw = {r["key"]: r["raw"] for r in quarantine.collect()}
    assert raw["g/bad"] == "{not json"
    assert "unknown_task: 0_7" in quarantine.where(sf.col("key") == "g/p3").first()["reason"]  # type: ignore[index]

    # Nothing else lost: every record read is either a member report or a quarantined record.
    kept = {r["process_id"]: r["stale"] for r in lake.read("member_reports", snapshot).collect()}
    assert kept == {"p1": False, "p2": False, "p9": True}
    snap = lake.read("snapshots", snapshot).first()
    assert snap is not None
    assert snap["reports"] == len(records) - 1 == len(kept) + sum(reasons.values())
    assert snap["skipped_groups"] == 2 and snap["groups"] == 1

    # No consumer group g, h or m exists on the broker: every decodable report says so, and stays where it was.
    checks = lake.read("membership_checks", snapshot).collect()
    assert {r["code"] for r in checks} == {"group_not_on_broker"}
    assert sorted(r["report_key"] for r in checks) == ["g/p1", "g/p2", "g/p3", "g/p9", "h/p1", "h/p2", "m/p1"]
    assert lake.read("group_members", snapshot).count() == 0

    # The rest of the group is still used; stale reports are not planned with.
    run_lags(lake, settings, snapshot)
    assert {r["process_id"] for r in lake.read("task_lags", snapshot).collect()} == {"p1", "p2"}
    run_plan(lake, settings, snapshot)
    assert [r["group_id"] for r in lake.read("plans", snapshot).collect()] == ["g"]
