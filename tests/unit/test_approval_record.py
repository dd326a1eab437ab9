"""The approval record: its JSON form and schema, what a refusal names, its private file, the approval page's
digests, and who may approve (the two-person rule, the approver list in production mode)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from assignor import AssignmentConfigs, ClientAssignment, GroupAssignment, TaskId
from assignor.protocol.plans import ApprovedPlan
from jobs.orchestration.decision import APPROVE_ALL, decision
from jobs.pipeline import approval_files
from jobs.pipeline.approval_record import ApprovalRecord, ApprovalRecordError, ApprovedDigest, short
from jobs.report.approval import digests_markdown
from jobs.settings import Settings

NOW = 1_764_000_000_000
TARGET = GroupAssignment(
    {
        "a": ClientAssignment(active=frozenset({TaskId(0, 0)}), standby=frozenset({TaskId(0, 1)})),
        "b": ClientAssignment(active=frozenset({TaskId(0, 1)}), standby=frozenset({TaskId(0, 0)})),
    }
)
PLAN = ApprovedPlan(
    "s1/orders", "orders", "s1", NOW - 60_000, NOW + 86_400_000, "", 0, AssignmentConfigs(), TARGET, (TaskId(0, 1),)
)


def record(*plans: ApprovedPlan) -> ApprovalRecord:
    return ApprovalRecord("alice", NOW, "cli", tuple(ApprovedDigest.of(p) for p in plans or (PLAN,)))


def test_a_record_round_trips_through_its_json_and_the_schema_refuses_what_is_not_one() -> None:
    r = record()
    assert ApprovalRecord.from_bytes(r.to_bytes()) == r
    assert r.plans[0].plan_digest == PLAN.plan_digest and r.to_json()["schema_version"] == 1
    bad_digest = r.to_json() | {"plans": [r.plans[0].to_json() | {"plan_digest": "x" * 64}]}
    with pytest.raises(ApprovalRecordError, match=r"plans/0/plan_digest"):
        ApprovalRecord.from_json(bad_digest)
    with pytest.raises(ApprovalRecordError, match="approved_by"):
        ApprovalRecord.from_json(r.to_json() | {"approved_by": ""})
    with pytest.raises(ApprovalRecordError, match="approved_at"):
        ApprovalRecord.from_json(r.to_json() | {"approved_at": 2**63})
    with pytest.raises(ApprovalRecordError, match="listed twice"):
        ApprovalRecord.from_json(r.to_json() | {"plans": [r.plans[0].to_json()] * 2})
    with pytest.raises(ApprovalRecordError, match="approval record: "):
        ApprovalRecord.from_bytes(b'{"approved_at": ' + b"9" * 5000 + b"}")


def test_a_changed_plan_is_refused_naming_what_differs() -> None:
    entry = ApprovedDigest.of(PLAN)
    assert entry.differences(PLAN) == []
    assert entry.differences(replace(PLAN, approved_by="bob", approved_at=NOW)) == []  # not part of the body
    lag = replace(PLAN, configs=AssignmentConfigs(acceptable_recovery_lag=7))
    assert entry.differences(lag) == ["acceptable_recovery_lag 7 (approved 10000)"]
    moved = replace(
        PLAN, target=GroupAssignment({"a": ClientAssignment(active=frozenset({TaskId(0, 0), TaskId(0, 1)}))})
    )
    assert entry.differences(moved) == [f"target {short(moved.target_digest)} (approved {short(PLAN.target_digest)})"]
    assert entry.differences(replace(PLAN, move_order=())) == ["move_order, snapshot_id or created_at"]
    assert entry.differences(replace(PLAN, valid_until=NOW)) == [f"valid_until {NOW} (approved {PLAN.valid_until})"]


def test_an_approval_file_is_private_and_one_anybody_else_could_write_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "approvals"
    path = approval_files.save(folder, record())
    assert (path.stat().st_mode & 0o777, folder.stat().st_mode & 0o777) == (0o600, 0o700)
    assert approval_files.load_all(folder) == [record()]
    assert approval_files.load_all(tmp_path / "none") == []
    folder.chmod(0o770)
    with pytest.raises(ApprovalRecordError, match="writable by nobody else"):
        approval_files.load_all(folder)
    folder.chmod(0o700)
    path.chmod(0o620)
    with pytest.raises(ApprovalRecordError, match="must be 0600"):
        approval_files.load(path)
    path.chmod(0o600)
    link = folder / "link.json"
    os.symlink(path, link)
    with pytest.raises(ApprovalRecordError, match=str(link)):
        approval_files.load(link)


def test_the_approval_page_shows_each_plans_short_digest_and_one_fingerprint_of_all() -> None:
    entries = {p.plan_id: ApprovedDigest.of(p) for p in (PLAN, replace(PLAN, plan_id="s1/clicks", group_id="clicks"))}
    page = "\n".join(digests_markdown(entries))
    assert f"| orders | `{short(PLAN.plan_digest)}` | {PLAN.valid_until} |" in page
    fingerprint = ApprovalRecord("x", 0, "airflow", tuple(entries.values())).fingerprint
    assert f"**What you approve**: 2 plans, fingerprint `{short(fingerprint)}`" in page


def test_under_the_two_person_rule_who_triggered_the_run_cannot_approve_it() -> None:
    answer = {"chosen_options": [APPROVE_ALL], "params_input": {}, "responded_by_user": {"id": "bob", "name": "bob"}}
    candidates = {"orders": "s1/orders"}
    refused = decision(answer, candidates, 60, triggered_by="bob")
    assert (refused.approve, refused.reject) == ((), ("s1/orders",))
    assert refused.reject_reason == "answered by bob, who triggered this run (two-person rule)"
    assert decision(answer, candidates, 60, triggered_by="alice").approve == ("s1/orders",)


def test_production_mode_requires_approvers_and_turns_the_two_person_rule_on(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RBP_PRODUCTION", "RBP_APPROVERS", "RBP_TWO_PERSON_RULE"):
        monkeypatch.delenv(name, raising=False)
    assert (Settings().two_persons, Settings().required_approvers()) == (False, ())
    monkeypatch.setenv("RBP_PRODUCTION", "true")
    with pytest.raises(ValueError, match="RBP_APPROVERS is empty"):
        Settings().required_approvers()
    monkeypatch.setenv("RBP_APPROVERS", "2:alice")
    assert (Settings().two_persons, Settings().required_approvers()) == (True, ("2:alice",))
    monkeypatch.setenv("RBP_TWO_PERSON_RULE", "false")
    assert not Settings().two_persons
