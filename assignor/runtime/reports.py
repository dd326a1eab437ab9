"""State reports: what each live instance tells the pipeline about itself (docs/formats.md)."""

from __future__ import annotations

from collections.abc import Mapping

from assignor.configs import AssignmentConfigs
from assignor.protocol.reported_settings import GroupProtocol, ReportedSettings
from assignor.protocol.restored_offsets import TaskRestore
from assignor.protocol.state_report import REPORT_SCHEMA_VERSION, ReportOrigin, StateReport, SubtopologyReport
from assignor.runtime.group_assignor import MemberView, Topology
from assignor.task import TaskId

__all__ = ["REPORT_SCHEMA_VERSION", "build_state_report"]


def build_state_report(
    group_id: str,
    member: MemberView,
    topology: Topology,
    *,
    member_id: str,
    client_id: str,
    host: str,
    generation: int,
    reported_at: int,
    configs: AssignmentConfigs,
    restored_offsets: Mapping[TaskId, TaskRestore] | None = None,
) -> StateReport:
    """The instance's report now: its assignment, its offset sums, its topology, the plan it honors and the
    KIP-441 settings it runs with (``configs``: the group's own, whatever a plan says), and each task's latest
    restore (``restored_offsets``; None: not reported)."""
    info = member.info
    return StateReport(
        group_id=group_id,
        process_id=member.process_id,
        member_id=member_id,
        client_id=client_id,
        host=host,
        capacity=member.capacity,
        client_tags=dict(member.client_tags),
        protocol_version=member.version,
        generation=generation,
        reported_at=reported_at,
        active_tasks=tuple(sorted(info.active_tasks, key=str)) if info else (),
        standby_tasks=tuple(sorted(info.standby_tasks, key=str)) if info else (),
        warmup_tasks=tuple(sorted(info.warmup_tasks, key=str)) if info else (),
        task_offset_sums=dict(sorted(member.offset_sums().items())),
        topology={
            sub.id: SubtopologyReport(tuple(sub.source_topics), tuple(sub.changelog_topics), sub.stateful)
            for sub in topology.subtopologies
        },
        plan_id=info.plan_id if info else None,
        fallback_reason=info.fallback_reason if info else None,
        origin=ReportOrigin.PYTHON_RUNTIME,
        protocol=GroupProtocol.CLASSIC,  # the runtime is a kafka-python consumer group
        settings=ReportedSettings.of(configs),
        restored_offsets=None if restored_offsets is None else dict(sorted(restored_offsets.items())),
    )
