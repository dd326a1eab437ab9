"""Report-only groups for the demo: jobs.local.synthetic's settled, restarted, scaled-out and skewed groups, scaled down
so their changelogs can really be written to the broker, and their reports produced to the reports topic."""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from dataclasses import replace

from confluent_kafka import Producer

from assignor import AssignmentConfigs
from assignor.protocol.reported_settings import ReportedSettings
from jobs.kafka_topics import TopicSpec, ensure_topics
from jobs.local.synthetic import SyntheticGroup, synthetic_group

SCALE = 1_000  # synthetic changelogs hold ~200k records per partition; the demo writes 1/1000 of that


def _scaled(group: SyntheticGroup, now_ms: int, settings: ReportedSettings | None = None) -> SyntheticGroup:
    """The same group with changelogs and offset sums divided by SCALE (sentinels kept), reported now, running
    with ``settings`` when given."""
    ends = {tp: max(1, end // SCALE) for tp, end in group.end_offsets.items()}
    reports = []
    for r in group.reports:
        sums = {t: (s if s < 0 else s // SCALE) for t, s in r.task_offset_sums.items()}
        reports.append(replace(r, task_offset_sums=sums, reported_at=now_ms, settings=settings or r.settings))
    return replace(group, reports=reports, end_offsets=ends)


def simulated_groups(count: int, seed: int = 11, configs: AssignmentConfigs | None = None) -> list[SyntheticGroup]:
    """``count`` groups sim-0000, sim-0001, ...: one stateful subtopology of 4 partitions on 3 instances, each
    reporting ``configs`` as its own settings (default: one standby, the rest unknown)."""
    rng, now = random.Random(seed), int(time.time() * 1000)
    own = None if configs is None else ReportedSettings.of(configs)
    standbys = 1 if configs is None else configs.num_standby_replicas
    groups = []
    for i in range(count):
        group = synthetic_group(f"sim-{i:04d}", rng, subtopologies=1, partitions=4, instances=3, standbys=standbys)
        groups.append(_scaled(group, now, own))
    return groups


def write_simulated_groups(
    bootstrap: str, reports_topic: str, groups: list[SyntheticGroup], kafka: Mapping[str, str] | None = None
) -> int:
    """Create the groups' topics, fill each changelog to its end offset, produce the reports; records written."""
    kafka = dict(kafka or {})
    client = {"bootstrap.servers": bootstrap, **kafka}
    topics = {t: n for g in groups for t, n in g.partitions.items()}
    specs = [TopicSpec(t, n, compacted=t.endswith("-changelog")) for t, n in topics.items()]
    ensure_topics(client, [*specs, TopicSpec(reports_topic, compacted=True)])
    producer = Producer({**client, "linger.ms": 5})
    written = 0
    for g in groups:
        for (topic, partition), end in g.end_offsets.items():
            for _ in range(end):
                producer.produce(topic, b"v", b"k", partition=partition)
                written += 1
                if written % 20_000 == 0:
                    producer.flush(60)
    reports = [r for g in groups for r in g.reports]
    for r in reports:
        producer.produce(reports_topic, r.encode(), r.key.encode())
    if producer.flush(60):
        raise RuntimeError("reports of the simulated groups not delivered")
    return written + len(reports)
