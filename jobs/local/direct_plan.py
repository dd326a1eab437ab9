"""Plan one live group straight from its state reports, without the lake: for runtime tests and benchmarks.

The pipeline does the same at fleet scale with Spark, validation and approval; this is the shortest honest
path from live reports to a signed plan on the plans topic.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import Producer

from assignor import AssignmentConfigs, ClientState, GroupState, TaskId, plan_group
from assignor.planner import GroupPlan
from assignor.protocol.plans import ApprovedPlan
from assignor.protocol.restored_offsets import is_restored_key
from assignor.runtime.group_assignor import Topology
from assignor.runtime.kafka_io import ChangelogEndOffsets, read_latest_by_key


def live_reports(bootstrap: str, reports_topic: str, group_id: str) -> dict[str, dict[str, Any]]:
    """The latest report per process of one group."""
    reports = {}
    for key, value in read_latest_by_key(bootstrap, reports_topic).items():
        text = key.decode("utf-8", "replace")
        if value is None or not text.startswith(f"{group_id}/") or is_restored_key(text):
            continue  # a restored-offsets report is not a state report
        report = json.loads(value)
        reports[report["process_id"]] = report
    return reports


def group_state(
    bootstrap: str,
    topology: Topology,
    partitions: int,
    reports: Mapping[str, Mapping[str, Any]],
    new_process_ids: Sequence[str] = (),
) -> GroupState:
    """The GroupState the reports describe (plus instances about to join, with no state)."""
    tasks = frozenset(TaskId(s.id, p) for s in topology.subtopologies for p in range(partitions))
    stateful = frozenset(t for t in tasks if topology.changelog_partitions(t))
    ends_by_partition = ChangelogEndOffsets(bootstrap)
    try:
        ends = ends_by_partition([p for t in sorted(stateful) for p in topology.changelog_partitions(t)])
    finally:
        ends_by_partition.close()
    end_sums = {t: sum(ends[p] for p in topology.changelog_partitions(t)) for t in stateful}
    clients = [
        ClientState(
            process_id=pid,
            capacity=int(r.get("capacity", 1)),
            previous_active=frozenset(TaskId.parse(t) for t in r["active_tasks"]),
            previous_standby=frozenset(TaskId.parse(t) for t in [*r["standby_tasks"], *r["warmup_tasks"]]),
            task_offset_sums={
                TaskId.parse(t): s for t, s in r["task_offset_sums"].items() if TaskId.parse(t) in stateful
            },
        )
        for pid, r in sorted(reports.items())
    ]
    clients += [ClientState(pid) for pid in new_process_ids if pid not in reports]
    return GroupState(clients, stateful, tasks - stateful, end_sums)


def approved_plan(
    group_id: str, group: GroupState, configs: AssignmentConfigs, *, valid_for_ms: int = 3_600_000
) -> tuple[ApprovedPlan, GroupPlan]:
    """Plan the group and approve it on the spot (the pipeline has a person do this)."""
    planned = plan_group(group, configs)
    now = int(time.time() * 1000)
    plan = ApprovedPlan(
        plan_id=f"plan-{uuid.uuid4().hex[:12]}",
        group_id=group_id,
        snapshot_id=f"direct-{now}",
        created_at=now,
        valid_until=now + valid_for_ms,
        approved_by="direct",
        approved_at=now,
        configs=configs,
        target=planned.target,
        move_order=tuple(planned.move_order),
    )
    return plan, planned


def publish_record(bootstrap: str, topic: str, key: str, record: Mapping[str, Any] | bytes | None) -> None:
    """Write one record (a dict as JSON, raw bytes, or None for a tombstone) and wait for it."""
    producer = Producer({"bootstrap.servers": bootstrap})
    value = record if isinstance(record, bytes) or record is None else json.dumps(record).encode("utf-8")
    producer.produce(topic, key=key.encode("utf-8"), value=value)
    if producer.flush(15) != 0:
        raise RuntimeError(f"record for {key} not delivered to {topic}")
