"""Test input on a real broker: topics with exact end offsets, and state reports in the report schema."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import Producer

from assignor.runtime.reports import REPORT_SCHEMA_VERSION
from jobs.kafka_topics import TopicSpec, ensure_topics


def create_topics(bootstrap: str, partitions: Mapping[str, int], compacted: Sequence[str] = ()) -> None:
    """Create topics and wait until each exists."""
    specs = [TopicSpec(t, n, compacted=t in compacted) for t, n in partitions.items()]
    ensure_topics({"bootstrap.servers": bootstrap}, specs)


def produce(bootstrap: str, topic: str, records: Sequence[tuple[bytes | None, bytes | None, int | None]]) -> None:
    """(key, value, partition) records, delivered before it returns."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for key, value, partition in records:
        if partition is None:
            producer.produce(topic, key=key, value=value)
        else:
            producer.produce(topic, key=key, value=value, partition=partition)
    assert producer.flush(30) == 0, f"records to {topic} not delivered"


def fill_changelog(bootstrap: str, topic: str, ends: Sequence[int]) -> None:
    """Write ends[p] records to partition p."""
    produce(bootstrap, topic, [(b"k", b"v", p) for p, end in enumerate(ends) for _ in range(end)])


def report(
    group_id: str,
    process_id: str,
    *,
    active: Sequence[str] = (),
    standby: Sequence[str] = (),
    warmup: Sequence[str] = (),
    offset_sums: Mapping[str, int] | None = None,
    topology: Mapping[str, Any],
    reported_at: int | None = None,
    plan_id: str | None = None,
) -> dict[str, Any]:
    """A state report in schemas/state_report.schema.json."""
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "group_id": group_id,
        "process_id": process_id,
        "member_id": f"{process_id}-m",
        "client_id": f"{process_id}-c",
        "host": "localhost:0",
        "capacity": 1,
        "client_tags": {},
        "protocol_version": 1,
        "generation": 3,
        "reported_at": int(time.time() * 1000) if reported_at is None else reported_at,
        "active_tasks": sorted(active),
        "standby_tasks": sorted(standby),
        "warmup_tasks": sorted(warmup),
        "task_offset_sums": dict(offset_sums or {}),
        "topology": dict(topology),
        "plan_id": plan_id,
        "fallback_reason": None,
    }


def stateful_topology(group_id: str, subtopologies: int) -> dict[str, Any]:
    """Subtopologies 0..n-1, each stateful with source <group>-in<s> and changelog <group>-store<s>-changelog."""
    return {
        str(s): {
            "source_topics": [f"{group_id}-in{s}"],
            "changelog_topics": [f"{group_id}-store{s}-changelog"],
            "stateful": True,
        }
        for s in range(subtopologies)
    }


def publish_reports(bootstrap: str, topic: str, reports: Sequence[Mapping[str, Any]]) -> None:
    """Publish reports keyed <group_id>/<process_id>."""
    produce(
        bootstrap,
        topic,
        [(f"{r['group_id']}/{r['process_id']}".encode(), json.dumps(r).encode(), None) for r in reports],
    )
