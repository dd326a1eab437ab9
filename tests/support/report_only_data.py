"""Snapshots written straight into a lake from state reports (no broker): report-only groups among them."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from jobs.lakehouse.lake import Lake
from jobs.pipeline.broker_reads import BrokerState
from jobs.pipeline.extract import write_snapshot
from jobs.pipeline.intake import intake_records
from jobs.pipeline.streams_groups import GROUP_METADATA
from tests.support.pipeline_kafka import report, stateful_topology


def one_subtopology_group(
    group_id: str,
    holds: Mapping[str, tuple[Sequence[str], Sequence[str], Mapping[str, int]]],
    reported_at: int,
    *,
    report_only: bool,
) -> list[dict[str, Any]]:
    """One report per instance (process -> (active, standby, offset sums)) of a one-subtopology group;
    ``report_only``: read from group metadata, as extract would write it."""
    topology = stateful_topology(group_id, 1)
    out = []
    for pid, (active, standby, sums) in holds.items():
        body = report(
            group_id, pid, active=active, standby=standby, offset_sums=sums, topology=topology, reported_at=reported_at
        )
        out.append(body | ({"origin": GROUP_METADATA} if report_only else {}))
    return out


def write_reports(
    lake: Lake, snapshot_id: str, captured_at: int, reports: Sequence[dict[str, Any]], ends: Mapping[str, Sequence[int]]
) -> None:
    """A snapshot of these reports; ``ends``: group -> end offset of each partition of its one changelog."""
    records = {f"{r['group_id']}/{r['process_id']}".encode(): json.dumps(r).encode() for r in reports}
    partitions: dict[str, int] = {}
    end_offsets: dict[tuple[str, int], int] = {}
    for group_id, group_ends in ends.items():
        partitions |= {f"{group_id}-in0": len(group_ends), f"{group_id}-store0-changelog": len(group_ends)}
        end_offsets |= {(f"{group_id}-store0-changelog", p): e for p, e in enumerate(group_ends)}
    intake = intake_records(records, partitions, captured_at, 10**13)
    write_snapshot(lake, snapshot_id, captured_at, intake, BrokerState(partitions, end_offsets, {}))
