"""Streams-protocol groups no plan can reach, and groups whose plugin the streams protocol ignores: named, with the
reason, for the report and the approval page."""

from __future__ import annotations

from jobs.pipeline.intake import MembershipFinding
from jobs.pipeline.plugin_groups import (
    PLUGIN_GROUP_WITHOUT_REPORTS,
    PLUGIN_UNDER_STREAMS_PROTOCOL,
    STREAMS_ASSIGNOR_MISSING,
    streams_protocol_gaps,
)
from jobs.report.gaps import gaps_markdown
from jobs.report.model import ReportingGap


def codes(findings: list[MembershipFinding]) -> list[tuple[str, str]]:
    return [(f.group_id, f.reason.split(":", 1)[0]) for f in findings]


def test_with_our_assignor_only_a_group_that_had_the_plugin_is_named() -> None:
    found = streams_protocol_gaps({"orders", "payments"}, {"orders": "20261101T0200"}, "rebalance-planner")
    assert codes(found) == [("orders", PLUGIN_UNDER_STREAMS_PROTOCOL)]
    assert "20261101T0200" in found[0].reason and "task.assignor.class is ignored" in found[0].reason


def test_without_our_assignor_every_streams_group_is_named() -> None:
    found = streams_protocol_gaps({"payments", "orders"}, {"orders": "s1"}, None)
    # One finding per group (membership_checks' key): the missing assignor first, the plugin in its reason.
    assert codes(found) == [("orders", STREAMS_ASSIGNOR_MISSING), ("payments", STREAMS_ASSIGNOR_MISSING)]
    assert "task.assignor.class is ignored" in found[0].reason and "plugin" not in found[1].reason


def test_no_streams_groups_no_findings() -> None:
    assert streams_protocol_gaps(set(), {"orders": "s1"}, None) == []


def test_the_approval_page_lists_each_kind_of_gap_under_its_own_heading() -> None:
    gaps = [
        ReportingGap("b", STREAMS_ASSIGNOR_MISSING, f"{STREAMS_ASSIGNOR_MISSING}: no assignor"),
        ReportingGap("a", PLUGIN_GROUP_WITHOUT_REPORTS, f"{PLUGIN_GROUP_WITHOUT_REPORTS}: no report"),
        ReportingGap("c", STREAMS_ASSIGNOR_MISSING, f"{STREAMS_ASSIGNOR_MISSING}: no assignor"),
    ]
    lines = gaps_markdown(gaps)
    headings = [line for line in lines if line.startswith("**")]
    assert headings == [
        "**Plugin groups without reports** (1): report-only.",
        "**Streams-protocol groups no plan can reach (the brokers lack our assignor)** (2): report-only.",
    ]
    assert [line for line in lines if line.startswith("* ")] == [
        "* a: no report",
        "* b: no assignor",
        "* c: no assignor",
    ]
    assert gaps_markdown([]) == []
