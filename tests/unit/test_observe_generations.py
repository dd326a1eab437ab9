"""observe's realized_generation: the highest generation a group's members name in their own reports; a
streams-protocol member epoch (each member's own count) is not a group generation and is left out."""

from __future__ import annotations

import json

from jobs.pipeline.intake import Report, parse_report
from jobs.pipeline.observe import group_generations
from tests.support.pipeline_kafka import report, stateful_topology


def _parsed(group: str, pid: str, **fields: object) -> Report:
    body = report(group, pid, topology=stateful_topology(group, 2)) | fields
    parsed = parse_report(f"{group}/{pid}".encode(), json.dumps(body).encode())
    assert isinstance(parsed, Report), parsed
    return parsed


def test_a_groups_generation_is_the_highest_its_own_reports_name() -> None:
    reports = [
        _parsed("orders", "a", generation=7, origin="kafka-streams"),
        _parsed("orders", "b", generation=6, origin="kafka-streams"),
        _parsed("payments", "c", generation=2),  # a report from before the origin field: the instance's own
        _parsed("shipping", "d", generation=40, origin="broker-streams"),  # a member epoch, not a generation
        _parsed("refunds", "e", generation=-1, origin="python-runtime"),  # no generation known
    ]
    assert group_generations(reports) == {"orders": 7, "payments": 2}
