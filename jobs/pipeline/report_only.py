"""Report-only groups: groups the pipeline reads and plans but can send no plan to, and why, per group. A group is
report-only by where its reports came from (``member_reports.origin``); an approved plan of theirs is HELD, never
published (docs/plan-lifecycle.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pyspark.sql import functions as sf

from assignor.protocol.state_report import ReportOrigin
from jobs.lakehouse.lake import Lake
from jobs.pipeline.plugin_groups import STREAMS_ASSIGNOR_MISSING

GROUP_METADATA_REASON = (
    "report-only: the group's reports were read from its group metadata (an unmodified Kafka Streams group has "
    "neither our plugin nor our runtime to honor a plan); not published"
)
STREAMS_PROTOCOL_REASON = (
    "report-only: streams protocol (KIP-1071): the broker assigns this group's tasks, and the broker-side "
    "plan-following assignor is not installed or not selected for it (streams.assignor.name); our plugin does "
    "nothing under group.protocol=streams; not published"
)
REPORT_ONLY_REASON = GROUP_METADATA_REASON  # the reason of classic report-only groups, the most common kind
REASONS = {
    str(ReportOrigin.GROUP_METADATA): GROUP_METADATA_REASON,
    str(ReportOrigin.BROKER_STREAMS): STREAMS_PROTOCOL_REASON,
}


def report_only_reasons(lake: Lake, snapshot_ids: Sequence[str]) -> dict[str, str]:
    """Group id -> why nothing may be published to it, for the report-only groups of those snapshots."""
    if not snapshot_ids:
        return {}
    reports = lake.read("member_reports").where(sf.col("snapshot_id").isin(list(snapshot_ids)))
    rows = reports.where(sf.col("origin").isin(list(REASONS))).select("group_id", "origin").distinct().collect()
    # A group read both ways across snapshots (it switched protocol) takes the streams reason: it is newer.
    ordered = sorted(rows, key=lambda r: r["origin"] == str(ReportOrigin.BROKER_STREAMS))
    return {r["group_id"]: REASONS[r["origin"]] for r in ordered}


def report_only_groups(lake: Lake, snapshot_ids: Sequence[str]) -> set[str]:
    """The report-only groups of those snapshots: nothing may be published to them."""
    return set(report_only_reasons(lake, snapshot_ids))


@dataclass(frozen=True)
class Reach:
    """How a snapshot's plans can reach their groups, as a person reads it: the groups no plan can reach (and why),
    and the streams-protocol groups the brokers' assignor steers (published through it)."""

    report_only: Mapping[str, str]
    steered_streams: frozenset[str]


def plan_reach(lake: Lake, snapshot_id: str) -> Reach:
    """A streams-protocol group is report-only only when extract found the brokers without our assignor."""
    reasons = report_only_reasons(lake, [snapshot_id])
    streams = {g for g, why in reasons.items() if why == STREAMS_PROTOCOL_REASON}
    checks = lake.read("membership_checks", snapshot_id).where(sf.col("code") == STREAMS_ASSIGNOR_MISSING)
    unreached = {r["group_id"] for r in checks.select("group_id").distinct().collect()} & streams
    steered = frozenset(streams - unreached)
    return Reach({g: why for g, why in reasons.items() if g not in steered}, steered)
