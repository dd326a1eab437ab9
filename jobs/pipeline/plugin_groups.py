"""Groups that should report but did not: a Kafka Streams group read from its group metadata this snapshot although
the lake holds reports the plugin wrote for it before, or any such group while the reports topic does not exist.

The limits, honestly: the broker cannot tell a plugin member from a plain Kafka Streams member (the plugin changes
the assignment, not the subscription), so a plugin group that has never reported (its reports topic missing from
day one) is recognised only through the missing topic, not by name. Findings land in ``membership_checks`` (codes
below) and on the approval page and report; the group is still planned from its metadata, as report-only."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pyspark.sql import functions as sf

from assignor.protocol.state_report import ReportOrigin
from jobs.lakehouse.lake import Lake
from jobs.pipeline.intake import MembershipFinding

PLUGIN_GROUP_WITHOUT_REPORTS = "plugin_group_without_reports"
REPORTS_TOPIC_MISSING = "reports_topic_missing"
# Streams-protocol groups (KIP-1071) that no plan can reach: one whose application configured our plugin (ignored
# under group.protocol=streams), and any while the brokers lack our broker-side assignor.
PLUGIN_UNDER_STREAMS_PROTOCOL = "plugin_under_streams_protocol"
STREAMS_ASSIGNOR_MISSING = "streams_assignor_missing"
REPORTING_GAPS = (PLUGIN_GROUP_WITHOUT_REPORTS, REPORTS_TOPIC_MISSING, PLUGIN_UNDER_STREAMS_PROTOCOL,
                  STREAMS_ASSIGNOR_MISSING)  # fmt: skip


def earlier_plugin_snapshots(lake: Lake, groups: Iterable[str]) -> dict[str, str]:
    """group -> the newest earlier snapshot holding a report the Kafka Streams plugin wrote for it."""
    wanted = sorted(set(groups))
    if not wanted:
        return {}
    rows = (
        lake.read("member_reports")
        .where(sf.col("group_id").isin(wanted) & (sf.col("origin") == str(ReportOrigin.KAFKA_STREAMS)))
        .groupBy("group_id")
        .agg(sf.max("snapshot_id").alias("snapshot_id"))
        .collect()
    )
    return {r["group_id"]: r["snapshot_id"] for r in rows}


def reporting_gaps(
    metadata_groups: Iterable[str], plugin_before: Mapping[str, str], reports_topic: str, topic_exists: bool
) -> list[MembershipFinding]:
    """One finding per group planned from its metadata that should have reported (see the module's limits)."""
    findings = []
    for group in sorted(set(metadata_groups)):
        if group in plugin_before:
            reason = (
                f"{PLUGIN_GROUP_WITHOUT_REPORTS}: the Kafka Streams plugin reported for this group in snapshot "
                f"{plugin_before[group]}, but no report arrived on {reports_topic} this snapshot; planned from group "
                "metadata only (check that the topic exists, `rebalance-planner setup`, and that the application may "
                "write it)"
            )
        elif not topic_exists:
            reason = (
                f"{REPORTS_TOPIC_MISSING}: the reports topic {reports_topic} does not exist, so a plugin in this "
                "group could not report; planned from group metadata only (create it: `rebalance-planner setup`)"
            )
        else:
            continue
        findings.append(MembershipFinding(group, None, None, reason))
    return findings


def streams_protocol_gaps(
    streams_groups: Iterable[str], plugin_before: Mapping[str, str], assignor: str | None
) -> list[MembershipFinding]:
    """One finding per streams-protocol group no plan can reach (the brokers lack our assignor) or whose plugin
    reported before (the plugin does nothing under the streams protocol); the first code covers both."""
    findings = []
    for group in sorted(set(streams_groups)):
        plugin = (
            f"the Kafka Streams plugin reported for this group (snapshot {plugin_before[group]}) and the group now "
            "runs group.protocol=streams, where task.assignor.class is ignored"
            if group in plugin_before
            else ""
        )
        if assignor is None:
            reason = (
                f"{STREAMS_ASSIGNOR_MISSING}: the brokers do not list our broker-side assignor in "
                "group.streams.assignors, so no plan can reach this streams-protocol group; it is planned "
                "report-only (docs/broker-assignor.md)" + (f"; {plugin}" if plugin else "")
            )
        elif plugin:
            reason = f"{PLUGIN_UNDER_STREAMS_PROTOCOL}: {plugin}; plans reach it through the broker-side assignor"
        else:
            continue
        findings.append(MembershipFinding(group, None, None, reason))
    return findings
