"""State reports: what each live instance tells the pipeline about itself (shared/contracts/pipeline.md)."""

from __future__ import annotations

from typing import Any

from assignor.runtime.group_assignor import MemberView, Topology

REPORT_SCHEMA_VERSION = 1


def state_report(
    group_id: str,
    member: MemberView,
    topology: Topology,
    *,
    member_id: str,
    client_id: str,
    host: str,
    generation: int,
    reported_at: int,
) -> dict[str, Any]:
    """The JSON object published to the reports topic (schemas/state_report.schema.json)."""
    info = member.info
    return {
        "schema_version": REPORT_SCHEMA_VERSION,
        "group_id": group_id,
        "process_id": member.process_id,
        "member_id": member_id,
        "client_id": client_id,
        "host": host,
        "capacity": member.capacity,
        "client_tags": dict(member.client_tags),
        "protocol_version": member.version,
        "generation": generation,
        "reported_at": reported_at,
        "active_tasks": sorted(str(t) for t in info.active_tasks) if info else [],
        "standby_tasks": sorted(str(t) for t in info.standby_tasks) if info else [],
        "warmup_tasks": sorted(str(t) for t in info.warmup_tasks) if info else [],
        "task_offset_sums": {str(t): s for t, s in sorted(member.offset_sums().items())},
        "topology": {
            str(sub.id): {
                "source_topics": list(sub.source_topics),
                "changelog_topics": list(sub.changelog_topics),
                "stateful": sub.stateful,
            }
            for sub in topology.subtopologies
        },
        "plan_id": info.plan_id if info else None,
        "fallback_reason": info.fallback_reason if info else None,
        "origin": "python-runtime",
    }
