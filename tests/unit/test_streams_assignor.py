"""The pure parts of selecting our broker-side assignor: the trigger tag's toggle and finding a group's decision."""

from __future__ import annotations

import json

from jobs.pipeline.streams_assignor import TRIGGER_TAG, latest_decision, toggled_tags


def test_the_trigger_tag_toggles_and_keeps_the_groups_own_tags() -> None:
    assert toggled_tags([]) == [TRIGGER_TAG]
    assert toggled_tags(["zone", "rack"]) == ["zone", "rack", TRIGGER_TAG]
    assert toggled_tags(["zone", TRIGGER_TAG]) == ["zone"]
    assert toggled_tags(toggled_tags(["zone"])) == ["zone"]


def test_a_groups_decision_is_found_by_group_id_or_first_process_and_only_when_newer() -> None:
    named = json.dumps({"group_id": "app", "decided_at": 2_000, "outcome": "plan"}).encode()
    unmatched = json.dumps({"group_id": None, "decided_at": 3_000, "outcome": "sticky"}).encode()
    latest = {b"app": named, b"process:p1": unmatched, b"other": b"{not json"}
    assert latest_decision(latest, "app", ["p2", "p1"], 1_000)["outcome"] == "plan"
    assert latest_decision(latest, "app", ["p2", "p1"], 2_500)["outcome"] == "sticky"  # older named one skipped
    assert latest_decision(latest, "app", ["p2", "p1"], 3_500) is None
    assert latest_decision(latest, "other", [], 0) is None  # garbage is no decision
