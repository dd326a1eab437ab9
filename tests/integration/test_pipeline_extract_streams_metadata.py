"""extract reads an unmodified Kafka Streams application (Apache Kafka's WordCountDemo, two JVMs, one of them with
two stream threads) from the broker's group metadata, and publish never sends that group a plan."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as sf

from assignor.runtime.kafka_io import read_latest_by_key
from jobs.lakehouse.lake import Lake
from jobs.local.broker import EmbeddedBroker
from jobs.pipeline.extract import run_extract
from jobs.pipeline.group_metadata import read_streams_groups
from jobs.pipeline.publish import run_publish
from jobs.pipeline.report_only import REPORT_ONLY_REASON
from jobs.pipeline.streams_groups import GROUP_METADATA, group_reports
from jobs.polling import wait_until
from jobs.settings import Settings
from tests.support.pipeline_kafka import create_topics, produce
from tests.support.signing import SIGNER, key_file
from tests.support.streams_app import INPUT_TOPIC, OUTPUT_TOPIC, WordCountInstance, streams_examples_classpath

log = logging.getLogger(__name__)
APP = "wordcount-unmodified"
STORE_TOPICS = f"{APP}-KSTREAM-AGGREGATE-STATE-STORE-0000000003"  # WordCountDemo's count() store, named by Kafka
CHANGELOG, REPARTITION = f"{STORE_TOPICS}-changelog", f"{STORE_TOPICS}-repartition"
PARTITIONS = 4


def _settings(tmp_path: Path) -> Settings:
    return Settings(
        lake_root=tmp_path / "lake",
        reports_topic="reports",
        plans_topic="plans",
        plan_signing_key_file=key_file(tmp_path),
        plan_key_id=SIGNER.key_id,
        planner_processes=1,
    )


def _process_id(instance_dir: Path) -> str:
    """The process id Kafka Streams keeps in its state directory (independent of the group metadata)."""
    metadata = instance_dir / "state" / APP / "kafka-streams-process-metadata"
    return str(json.loads(metadata.read_text(encoding="utf-8"))["processId"])


@pytest.fixture
def wordcount(broker: EmbeddedBroker, tmp_path: Path) -> Iterator[tuple[WordCountInstance, WordCountInstance]]:
    """Instance a (two threads) counts the input alone, then instance b (one thread) joins; both stop afterwards."""
    classpath = streams_examples_classpath()
    create_topics(broker.bootstrap, {INPUT_TOPIC: PARTITIONS, OUTPUT_TOPIC: 1, "reports": 1}, compacted=["reports"])
    produce(broker.bootstrap, INPUT_TOPIC, [(None, b"all streams lead to kafka", p) for p in range(PARTITIONS)])
    a = WordCountInstance(broker.bootstrap, APP, tmp_path, "a", threads=2)
    b = WordCountInstance(broker.bootstrap, APP, tmp_path, "b", threads=1)
    with a, b:
        a.start(classpath)

        def settled(members: int, processes: int) -> bool:
            """The group has these members, and every task runs as an active on exactly one of them."""
            for instance in (a, b):  # b counts once started
                assert instance.running or not instance.log_file.exists(), (
                    f"{instance.name} stopped: {instance.log_tail()}"
                )
            found = read_streams_groups(broker.bootstrap, {}, (), 10.0).groups.get(APP, ())
            read = group_reports(found, {}, 0)
            reports = [json.loads(value) for _, value in read.reports]
            actives = sorted(t for r in reports for t in r["active_tasks"])
            everything = sorted(f"{s}_{p}" for s in (0, 1) for p in range(PARTITIONS))
            return len(found) == members and len(reports) == processes and actives == everything

        started = time.monotonic()
        wait_until(lambda: settled(2, 1), 120, "instance a's two threads holding the tasks", poll_s=0.5)
        log.info("instance a running every task after %.1f s", time.monotonic() - started)
        wait_until(lambda: len(read_latest_by_key(broker.bootstrap, CHANGELOG)) > 0, 60, "counts in the changelog")
        b.start(classpath)
        wait_until(lambda: settled(3, 2), 120, "instance b joining and the group settling", poll_s=0.5)
        log.info("instance b joined, group settled after %.1f s", time.monotonic() - started)
        yield a, b


def test_extract_reads_an_unmodified_streams_group_from_its_metadata_and_publish_never_targets_it(
    spark: SparkSession, broker: EmbeddedBroker, wordcount: tuple[WordCountInstance, WordCountInstance], tmp_path: Path
) -> None:
    a, b = wordcount
    settings = _settings(tmp_path)
    lake = Lake(spark, settings.lake_root)
    process_a, process_b = _process_id(tmp_path / "a"), _process_id(tmp_path / "b")

    result = run_extract(lake, settings, broker.bootstrap)
    snapshot = result.snapshot_id
    assert snapshot is not None

    reports = {r["process_id"]: r for r in lake.read("member_reports", snapshot).collect()}
    assert set(reports) == {process_a, process_b}
    assert {p: (r["group_id"], r["origin"], r["capacity"]) for p, r in reports.items()} == {
        process_a: (APP, GROUP_METADATA, 2),  # two stream threads, two members, one process
        process_b: (APP, GROUP_METADATA, 1),
    }
    assert all(r["protocol_version"] == 11 and not r["stale"] for r in reports.values())
    # The application's settings, as far as its metadata tells them: WordCountDemo runs without standbys (at most
    # max.warmup.replicas = 2 of its 4 counting tasks can be warming up, sent as standbys); the rest is unknown.
    own = {(r["protocol"], r["num_standby_replicas"], r["acceptable_recovery_lag"]) for r in reports.values()}
    assert own == {("classic", 0, None)}
    # Offset sums are sent for stateful tasks only (subtopology 1 holds the count store): a ran all of them before
    # b joined, so it has state for each, as the -2 sentinel (running it as an active when it last joined) or as
    # the offsets its checkpoint holds. b only ever has state for subtopology 1's tasks too.
    sums_a = dict(reports[process_a]["task_offset_sums"])
    assert set(sums_a) == {f"1_{p}" for p in range(PARTITIONS)}
    assert all(s == -2 or s >= 0 for s in sums_a.values())
    assert all(t.startswith("1_") and s >= -3 for t, s in reports[process_b]["task_offset_sums"].items())
    # Every task is active somewhere, once.
    actives = [t for r in reports.values() for t in r["active_tasks"]]
    assert sorted(actives) == sorted(f"{s}_{p}" for s in (0, 1) for p in range(PARTITIONS))

    topology = json.loads(reports[process_a]["topology"])
    assert topology == {
        "0": {"source_topics": [INPUT_TOPIC], "changelog_topics": [], "stateful": False},
        "1": {"source_topics": [REPARTITION], "changelog_topics": [CHANGELOG], "stateful": True},
    }
    tasks = {r["task_id"]: r["stateful"] for r in lake.read("group_tasks", snapshot).collect() if r["group_id"] == APP}
    assert tasks == {f"{s}_{p}": s == 1 for s in (0, 1) for p in range(PARTITIONS)}
    changelogs = lake.read("changelog_offsets", snapshot).where(sf.col("group_id") == APP).collect()
    assert {(r["topic"], r["partition"]) for r in changelogs} == {(CHANGELOG, p) for p in range(PARTITIONS)}
    assert sum(r["end_offset"] for r in changelogs) > 0
    assert lake.read("quarantine", snapshot).count() == 0
    members = lake.read("group_members", snapshot).where(sf.col("group_id") == APP).collect()
    assert sorted(r["process_id"] for r in members) == sorted([process_a, process_a, process_b])

    # An approved plan for the group (however it came to be) is HELD, with the reason, and never sent.
    plan: dict[str, object] = {"plan_id": "p-wordcount", "snapshot_id": snapshot, "group_id": APP, "status": "APPROVED"}
    plan |= {"created_at": int(time.time() * 1000), "approved_by": "alice", "approved_at": int(time.time() * 1000)}
    lake.merge("plans", spark.createDataFrame([plan]))
    published = run_publish(lake, settings, broker.bootstrap, snapshot_id=snapshot)
    assert dict(published.counts) == {"report_only": 1}
    row = lake.read("plans").where(sf.col("plan_id") == "p-wordcount").first()
    assert row is not None and (row["status"], row["reason"]) == ("HELD", REPORT_ONLY_REASON)
    assert read_latest_by_key(broker.bootstrap, settings.plans_topic) == {}
    assert a.running and b.running
