"""On a real broker: one state report whose subtopology key is a number of thousands of digits fails nothing but
itself; every other group of the night is extracted, and the record is quarantined with the reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from jobs.lakehouse.lake import Lake
from jobs.local.broker import EmbeddedBroker
from jobs.pipeline.extract import run_extract
from jobs.settings import Settings
from tests.support.pipeline_kafka import create_topics, fill_changelog, produce, report, stateful_topology

pytestmark = pytest.mark.engines  # the quarantine's lookup of earlier hashes runs on Sail and on Apache Spark


def test_a_report_with_a_huge_subtopology_key_fails_nothing_but_itself(
    spark: SparkSession, broker: EmbeddedBroker, tmp_path: Path
) -> None:
    settings = Settings(lake_root=tmp_path / "lake", reports_topic="reports", planner_processes=1)
    bootstrap = broker.bootstrap
    create_topics(bootstrap, {"reports": 1, "h-in0": 2, "h-store0-changelog": 2})
    fill_changelog(bootstrap, "h-store0-changelog", [4, 4])
    h = stateful_topology("h", 1)
    hostile = report("g", "p1", topology={"9" * 5_000: stateful_topology("g", 1)["0"]})
    good = [
        report("h", "p1", active=["0_0"], offset_sums={"0_0": -2}, topology=h),
        report("h", "p2", active=["0_1"], offset_sums={"0_1": -2}, topology=h),
    ]
    records = [(b"g/p1", json.dumps(hostile).encode(), None)]
    records += [(f"h/{r['process_id']}".encode(), json.dumps(r).encode(), None) for r in good]
    produce(bootstrap, "reports", records)
    lake = Lake(spark, settings.lake_root)

    result = run_extract(lake, settings, bootstrap)

    snapshot = result.snapshot_id
    kept = sorted((r["group_id"], r["process_id"]) for r in lake.read("member_reports", snapshot).collect())
    assert kept == [("h", "p1"), ("h", "p2")]
    assert sorted(r["task_id"] for r in lake.read("group_tasks", snapshot).collect()) == ["0_0", "0_1"]
    (row,) = lake.read("quarantine", snapshot).collect()
    assert (row["source"], row["key"], row["group_id"]) == ("reports", "g/p1", "g")
    assert row["reason"].startswith("schema_violation: at topology: topology key must be a decimal integer")
    assert result.counts["quarantined[schema_violation]"] == 1


def test_the_quarantine_is_capped_per_source_and_not_refilled_by_the_same_records_each_night(
    spark: SparkSession, broker: EmbeddedBroker, tmp_path: Path
) -> None:
    settings = Settings(
        lake_root=tmp_path / "lake", reports_topic="reports", planner_processes=1, quarantine_cap_per_source=2
    )
    bootstrap = broker.bootstrap
    create_topics(bootstrap, {"reports": 2, "h-in0": 1, "h-store0-changelog": 1})
    good = report("h", "p1", active=["0_0"], offset_sums={"0_0": -2}, topology=stateful_topology("h", 1))
    # Many records a key, each superseding the last: only the latest of each key is read into the snapshot.
    superseded = [(b"h/p1", b"{stale garbage %d" % i, None) for i in range(200)]
    bad = [(f"g/p{i}".encode(), b"{not json " + b"x" * 10_000, None) for i in range(5)]
    produce(bootstrap, "reports", [*superseded, (b"h/p1", json.dumps(good).encode(), None), *bad])
    lake = Lake(spark, settings.lake_root)

    first = run_extract(lake, settings, bootstrap)

    assert first.counts["reports_read"] == 6  # 200 superseded records of h/p1 folded away as they arrived
    rows = lake.read("quarantine", first.snapshot_id).collect()
    stored = sorted((r["source"], r["key"]) for r in rows)
    assert stored == [("quarantine_cap", "reports"), ("reports", "g/p0"), ("reports", "g/p1")]
    summary = next(r for r in rows if r["source"] == "quarantine_cap")
    assert summary["reason"].startswith("quarantine_capped: 3 more quarantined reports record(s)")
    record = next(r for r in rows if r["key"] == "g/p0")
    assert len(record["raw"]) == 4096 and record["raw_bytes"] == 10_010 and len(record["content_hash"]) == 64
    assert first.counts["quarantine_not_stored[reports]"] == 3

    second = run_extract(lake, settings, bootstrap)  # the next night reads the same bad records again

    again = sorted((r["source"], r["key"]) for r in lake.read("quarantine", second.snapshot_id).collect())
    # Those stored before are not stored again: the ones the cap left out last night get their turn.
    assert again == [("quarantine_cap", "reports"), ("reports", "g/p2"), ("reports", "g/p3")]
    assert second.counts["quarantine_seen_before[reports]"] == 2
    assert second.counts["quarantine_not_stored[reports]"] == 1
    assert [r["process_id"] for r in lake.read("member_reports", second.snapshot_id).collect()] == ["p1"]
