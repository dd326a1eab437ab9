"""extract says which Kafka Streams groups should have reported and did not: a group the plugin reported for in an
earlier snapshot that is read from its metadata now, and every metadata group while the reports topic is missing;
the approval page's lines and the report's reader show them. Apache Kafka's WordCountDemo on the embedded broker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as sf

from jobs.cli.main import main
from jobs.lakehouse.lake import Lake
from jobs.local.broker import EmbeddedBroker
from jobs.pipeline.extract import run_extract
from jobs.pipeline.plugin_groups import PLUGIN_GROUP_WITHOUT_REPORTS, REPORTS_TOPIC_MISSING
from jobs.report.gaps import gaps_markdown, reporting_gaps
from tests.integration.test_pipeline_extract_streams_metadata import (  # noqa: F401  (the fixture, reused)
    APP,
    CHANGELOG,
    PARTITIONS,
    REPARTITION,
    _settings,
    wordcount,
)
from tests.support.pipeline_kafka import produce, report
from tests.support.streams_app import INPUT_TOPIC


def gaps(lake: Lake, snapshot: str) -> dict[str, str]:
    rows = lake.read("membership_checks", snapshot).where(sf.col("group_id") == APP).collect()
    return {r["code"]: r["reason"] for r in rows if r["member_id"] is None}


@pytest.mark.usefixtures("wordcount")
def test_plugin_groups_without_reports_are_named_for_the_approval_page(
    spark: SparkSession,
    broker: EmbeddedBroker,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = _settings(tmp_path)
    lake = Lake(spark, settings.lake_root)
    topology = {
        "0": {"source_topics": [INPUT_TOPIC], "changelog_topics": [], "stateful": False},
        "1": {"source_topics": [REPARTITION], "changelog_topics": [CHANGELOG], "stateful": True},
    }
    tasks = [f"{s}_{p}" for s in (0, 1) for p in range(PARTITIONS)]
    body = {**report(APP, "p1", active=tasks, topology=topology), "origin": "kafka-streams"}
    produce(broker.bootstrap, "reports", [(f"{APP}/p1".encode(), json.dumps(body).encode(), None)])
    first = run_extract(lake, settings, broker.bootstrap).snapshot_id
    assert first is not None and gaps(lake, first) == {}  # it reported: nothing to say

    produce(broker.bootstrap, "reports", [(f"{APP}/p1".encode(), None, None)])  # its reports stop
    second = run_extract(lake, settings, broker.bootstrap).snapshot_id
    assert second is not None
    found = gaps(lake, second)
    assert list(found) == [PLUGIN_GROUP_WITHOUT_REPORTS]
    assert f"reported for this group in snapshot {first}" in found[PLUGIN_GROUP_WITHOUT_REPORTS]
    (gap,) = reporting_gaps(lake, second)
    lines = gaps_markdown([gap])
    assert "**Plugin groups without reports** (1)" in lines[1] and lines[3].startswith(f"* {APP}: the Kafka Streams")

    # Another lake, no history, and no reports topic at all: every metadata group is flagged, naming `setup`.
    missing = settings.model_copy(update={"reports_topic": "no-such-reports", "lake_root": tmp_path / "lake2"})
    fresh = Lake(spark, missing.lake_root)
    third = run_extract(fresh, missing, broker.bootstrap).snapshot_id
    assert third is not None
    found = gaps(fresh, third)
    assert list(found) == [REPORTS_TOPIC_MISSING]
    assert "the reports topic no-such-reports does not exist" in found[REPORTS_TOPIC_MISSING]
    assert "`rebalance-planner setup`" in found[REPORTS_TOPIC_MISSING]

    # status reads the same group from its metadata: report-only, never sent a plan.
    monkeypatch.setenv("RBP_REPORTS_TOPIC", "reports")
    monkeypatch.delenv("RBP_KAFKA_CONFIG", raising=False)
    capsys.readouterr()
    assert main(["status", APP, "--bootstrap", broker.bootstrap, "--json", "--no-lake"]) == 0
    (status,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert (status["source"], status["members"], status["plan_id"]) == ("group-metadata", 2, None)
    assert sorted(t for i in status["instances"] for t in i["active"]) == sorted(tasks)
    assert status["next_check"] == "never (report-only: plans are not published to it)"
    assert status["report_age_ms"] is None
