"""The decision a person makes: groups sorted into change / keep / nothing with a why and a risk, totals that name
their scope, a selection refused when it names a group without a validated plan, and the page that shows it all."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from assignor.cost import PlanCost
from jobs.orchestration.decision import (
    APPROVE_SELECTED,
    MAX_REASON,
    SETTLE_S,
    DecisionError,
    answer_hold_s,
    answer_reason,
    check_selection,
    decision,
)
from jobs.pipeline.status import PlanStatus
from jobs.report.approval import approval_body
from jobs.report.decide_page import (
    fleet_risk,
    has_decision_page,
    refresh_decision_page,
    render_decision_page,
    write_decision_page,
)
from jobs.report.model import Assignor, Assumptions, GroupRisk, GroupRow
from jobs.report.render import render_report
from jobs.report.triage import Kind, Risk, kind, scope, triage, versus
from tests.support.report_views import HOSTILE, report, row

ASSUMED = Assumptions(10_000, 2, 1, 600_000, 5_000.0, "measured")


def risky(i: int, group: str, **figures: Any) -> GroupRow:
    base = GroupRisk(3, 3, 0, (), 0, 1_000, ASSUMED)
    return replace(row(i, group=group), risk=replace(base, **figures))


def test_groups_are_sorted_into_change_keep_and_nothing_with_scoped_totals() -> None:
    keep = replace(row(0, group="keep"), skew_before=0.0)
    idle = replace(row(0, group="idle", kip=False), skew_before=0.0)
    t = triage([row(2, group="a"), row(1, group="b"), keep, idle, row(0, "NOOP", group="noop"), row(3, "REJECTED")])
    assert [c.group_id for c in t.change] == ["a", "b"] and {c.kind for c in t.change} == {Kind.CHANGE}
    assert [c.group_id for c in t.keep] == ["keep"] and t.prevented == 2
    assert [c.group_id for c in t.nothing] == ["idle", "noop"]
    assert [c.group_id for c in t.decided] == ["g3"]
    assert (t.changing.groups, t.changing.moves, t.changing.warmups) == (2, 3, 3)
    assert t.offered.groups == 4 and t.offered.moves == 3  # keep and no-change plans move nothing
    assert [c.group_id for c in t.awaiting] == ["a", "b", "keep", "idle"]  # what the page offers, in its order
    assert t.headline() == (
        "2 groups change (3 moves, 3 warmups); 1 plan keeps the current assignment and prevents 2 KIP-441 moves; "
        "2 groups need nothing"
    )
    assert (
        t.subject("Rebalance 2026-11-26 02:00")
        == "Rebalance 2026-11-26 02:00: 4 plans, 2 change, 3 moves, longest 2 min"
    )
    assert t.keep[0].why == "stops KIP-441 moving 2 tasks"


STILL = PlanCost(moves=0, warmups=0, rounds=1, restore_offsets=0, estimated_seconds=0.0)
SETTING = "num_standby_replicas 0 -> 1 (override)"


def still(group: str, kip441_moves: int | None, **fields: Any) -> GroupRow:
    """A validated plan that moves, warms up and restores nothing; KIP-441 alone would move ``kip441_moves``."""
    baselines = {} if kip441_moves is None else {Assignor.KIP441: replace(STILL, moves=kip441_moves)}
    return replace(row(0, group=group), plan=STILL, baselines=baselines, skew_before=0.0, **fields)


@pytest.mark.parametrize(
    ("plan_row", "expected"),
    [
        (row(2), Kind.CHANGE),
        (replace(row(0), plan=replace(STILL, warmups=1)), Kind.CHANGE),  # warms up, moves later
        # Offsets to restore alone: what replicas the group already runs still owe (the demo's keep-plans).
        (replace(row(0), plan=replace(STILL, restore_offsets=900)), Kind.KEEP),
        (still("settings", None, settings_changes=SETTING), Kind.CHANGE),  # settings only, KIP-441 not computed
        (still("settings", 12, settings_changes=SETTING), Kind.CHANGE),  # ... and KIP-441 would move 12
        (still("kept", 12), Kind.KEEP),
        (still("idle", 0), Kind.NOTHING),
        (still("unknown", None), Kind.NOTHING),
        (row(0, "NOOP"), Kind.NOTHING),
        (row(2, "REJECTED"), Kind.DECIDED),
        (replace(row(0, "PUBLISHED"), settings_changes=SETTING), Kind.DECIDED),
    ],
    ids=lambda v: v.group_id + "-" + v.status if isinstance(v, GroupRow) else str(v),
)
def test_a_plans_kind_is_what_approving_it_does(plan_row: GroupRow, expected: Kind) -> None:
    assert kind(plan_row) is expected
    t = triage([plan_row])  # and the first screen sorts it by that kind, nowhere else
    assert {k: len(v) for k, v in ((Kind.CHANGE, t.change), (Kind.KEEP, t.keep), (Kind.NOTHING, t.nothing),
                                   (Kind.DECIDED, t.decided))} == {k: int(k is expected) for k in Kind}  # fmt: skip
    assert len(t.awaiting) == int(plan_row.status == PlanStatus.VALIDATED)


def test_a_settings_only_plan_is_a_change_in_the_totals_the_row_the_keep_list_and_both_filters() -> None:
    # The demo's `ledger`: no move, no warmup, num_standby_replicas 0 -> 1; once with KIP-441 moving 12 of its
    # tasks (it read as a keep-plan then), once with KIP-441 not computed (it read as "needs nothing").
    for kip441 in (12, None):
        ledger = still("ledger", kip441, settings_changes=SETTING)
        rows = [row(2, group="orders"), ledger, still("kept", 5), row(0, "NOOP", group="noop")]
        t = triage(rows)
        assert [c.group_id for c in t.change] == ["ledger", "orders"]  # a settings change is a medium risk
        assert [c.group_id for c in t.keep] == ["kept"] and t.prevented == 5
        assert [c.group_id for c in t.nothing] == ["noop"]
        assert t.headline() == (
            "2 groups change (2 moves, 2 warmups; 1 changing only its settings); 1 plan keeps the current "
            "assignment and prevents 5 KIP-441 moves; 1 group needs nothing"
        )
        assert "settings change: num_standby_replicas 0 -> 1 (override)" in t.change[0].why
        html = render_decision_page(report(rows), 1_795_000_000_000, "12 h")
        ledger_tr = re.search(r'<tr data-group="ledger"[^>]*>.*?</tr>', html, re.S)
        assert ledger_tr is not None and 'data-kind="change"' in ledger_tr.group(0)
        assert " hidden>" not in ledger_tr.group(0).split("\n")[0]  # shown when the page opens
        assert "nothing to do" not in ledger_tr.group(0) and "keeps" not in ledger_tr.group(0)
        keep_list = html[html.index('data-testid="keep"') : html.index('data-testid="nothing"')]
        assert "ledger" not in keep_list and "kept" in keep_list
        report_page = render_report(report(rows))
        assert re.search(r'<tr[^>]*data-group="ledger"[^>]*data-changes="true"', report_page)
        body = approval_body(report(rows), "r", "d", 0, 60)
        assert "| ledger |" in body.split("**1 plan keeps")[0]  # among the changing groups of the approval page


def test_the_confirmation_counts_what_is_approved_by_kind_and_warns_of_keep_plans_left_out() -> None:
    rows = [row(2, group="a"), row(1, group="b"), still("k1", 12), still("k2", 114), still("idle", 0)]
    t = triage(rows)
    assert t.changing.confirmation() == (
        "Approve 2 plans, 3 moves, 3 warmups (2 changing groups); reject the other 3 plans. "
        "2 keep-plans not selected: KIP-441 may move 126 tasks there."
    )
    assert t.differing.confirmation() == (
        "Approve 4 plans, 3 moves, 3 warmups (2 changing groups, 2 keep-plans); reject the other 1 plan."
    )
    assert t.offered.confirmation() == (
        "Approve 5 plans, 3 moves, 3 warmups (2 changing groups, 2 keep-plans, 1 no-change plan); "
        "reject the other 0 plans."
    )
    one = scope([c for c in t.awaiting if c.group_id in ("a", "k2")], t.awaiting)
    assert one.confirmation() == (
        "Approve 2 plans, 2 moves, 2 warmups (1 changing group, 1 keep-plan); reject the other 3 plans. "
        "1 keep-plan not selected: KIP-441 may move 12 tasks there."
    )
    assert (one.keeps_left, one.kip441_left, t.differing.left_to_kip441) == (1, 12, "")
    # The first screen states each scope's consequence; the filter a person sees first is changes and keeps.
    html = render_decision_page(report(rows), 1_795_000_000_000, "12 h")
    assert '<td class="warn">2 keep-plans not selected: KIP-441 may move 126 tasks there</td>' in html
    assert re.search(r'<input type="radio" name="scope" value="differs" checked>', html)
    assert html.count('data-kind="keep"') == 2 and 'data-kip441="114"' in html


def test_changing_groups_rank_by_risk_then_by_difference_from_kip441_and_say_why() -> None:
    calm = risky(1, "calm")
    far = replace(risky(1, "far"), baselines={Assignor.KIP441: PlanCost(9, 0, 1, 0, 0.0)})
    unsafe = risky(1, "unsafe", unsafe_moves=2)
    partial = risky(1, "partial", members_reporting=2, stale_reports=1, idle_instances=("p-new",))
    slow = risky(1, "slow", largest_restore=5_000_000)  # 1,000 s at 5,000 offsets/s
    t = triage([calm, far, unsafe, partial, slow])
    assert [c.group_id for c in t.change] == ["partial", "unsafe", "slow", "far", "calm"]
    by = {c.group_id: c for c in t.change}
    assert by["unsafe"].risk is Risk.HIGH and "2 tasks moved without a caught-up copy" in by["unsafe"].risks
    assert by["partial"].risk is Risk.HIGH and "2 of 3 instances reported" in by["partial"].risks
    assert "1 instance holding nothing (p-new): joined or restarted" in by["partial"].why
    assert "1 instance stopped reporting (left?)" in by["partial"].why
    assert by["slow"].risk is Risk.MEDIUM and "largest restore 5,000,000 offsets (~16 min 40 s)" in by["slow"].risks
    assert by["calm"].risk is Risk.LOW and by["far"].versus_kip441 == "KIP-441: 9 (plan 8 fewer)"
    fr = fleet_risk(t)
    assert (fr.unsafe_moves, fr.unsafe_groups, fr.largest_restore, fr.largest_group) == (2, 1, 5_000_000, "slow")
    assert fr.rates == (("5,000 offsets/s (measured)", 5),) and fr.incomplete == 1
    settings = "acceptable lag 10,000 offsets, 1 standby, 2 warmups at a time, probing every 10 min"
    assert fr.settings == ((settings, 5),)
    page = render_decision_page(report([calm]), 1_795_000_000_000, "12 h")
    assert f"assumes {settings}, restore 5,000 offsets/s (measured)" in page  # the same words, per group
    # A NOOP group is not offered: its assumptions are not among the offered plans'.
    noop = replace(risky(0, "noop"), status="NOOP")
    assert fleet_risk(triage([calm, far, unsafe, partial, slow, noop])).rates == fr.rates


def test_a_selection_naming_a_group_without_a_validated_plan_is_refused_naming_it() -> None:
    candidates = {"orders": "s/orders", "payments": "s/payments"}
    assert check_selection([" orders", "orders", ""], candidates) == ["orders"]
    with pytest.raises(DecisionError, match="groups without a validated plan in this run: nope, zz"):
        check_selection(["orders", "zz", "nope"], candidates)
    with pytest.raises(DecisionError, match=r"run: x00, x01, .*, x09 and 9,990 more$"):
        check_selection([f"x{i:02d}" for i in range(10_000)], candidates)  # a pasted list names the first few
    with pytest.raises(DecisionError, match="must be a list of group ids, not str"):
        check_selection("orders", candidates)
    answer = {"responded_by_user": {"id": "2", "name": "alice"}, "chosen_options": [APPROVE_SELECTED],
              "params_input": {"selected_groups": ["payments"]}}  # fmt: skip
    d = decision(answer, candidates, 60)
    assert d.approve == ("s/payments",) and d.reject == ("s/orders",)


def test_the_decision_page_offers_the_changing_groups_with_checkboxes_and_fetches_nothing() -> None:
    rows = [row(1), row(2, group=HOSTILE), replace(row(0, group="keep"), skew_before=0.0), row(0, "NOOP")]
    html = render_decision_page(report(rows), 1_795_000_000_000, "12 h")
    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert not re.search(r"""<(script|img|iframe)[^>]*\ssrc=|<link[^>]*stylesheet|@import|url\(\s*['"]?https?:""", html)
    assert html.count('class="pick"') == 3  # every VALIDATED plan can be ticked; the NOOP group cannot
    assert 'data-kind="change"' in html and 'data-kind="keep"' in html
    assert "2 groups change (3 moves, 3 warmups); 1 plan keeps the current assignment" in html
    assert "plans expire" in html and "2026-11-18" in html


def test_why_not_kafkas_assignors_names_where_the_plan_wins_and_where_a_baseline_is_as_good() -> None:
    broker = PlanCost(moves=1, warmups=0, rounds=1, restore_offsets=1_000, estimated_seconds=10.0)
    quick = replace(row(1, group="quick"), baselines={Assignor.STREAMS_BROKER: broker})
    costly = replace(row(3, group="costly"), baselines={Assignor.STREAMS_BROKER: replace(broker, moves=9)})
    kip, streams = versus([quick, costly, row(2, group="plain")])
    assert (kip.computed, kip.fewer_moves, kip.as_good) == (1, 1, ())
    assert (streams.computed, streams.fewer_moves, streams.as_good, streams.faster) == (2, 1, ("quick",), 2)
    assert "it would finish sooner in 2, by moving actives before a caught-up copy exists" in streams.sentence()
    assert "It would do as well in 1 (quick)" in streams.sentence()


def test_an_answer_is_held_until_the_approval_task_has_waited_a_few_seconds() -> None:
    asked = datetime(2026, 11, 27, 9, 0, 0, tzinfo=UTC)
    entry = {"created_at": "2026-11-27T09:00:00Z", "task_instance": {"state": "deferred"}}
    assert answer_hold_s(entry, asked + timedelta(seconds=1)) == SETTLE_S - 1  # apache/airflow#71580: not yet
    assert answer_hold_s(entry, asked + timedelta(seconds=SETTLE_S)) == 0
    assert answer_hold_s({**entry, "task_instance": {"state": "running"}}, asked + timedelta(minutes=5)) is None
    parked = {**entry, "task_instance": {"state": "awaiting_input"}}  # Airflow 3.3 parks HITL tasks so
    assert answer_hold_s(parked, asked + timedelta(seconds=2)) == SETTLE_S - 2
    with pytest.raises(DecisionError, match="created_at"):
        answer_hold_s({**entry, "created_at": "yesterday"}, asked)
    with pytest.raises(DecisionError, match="time zone"):
        answer_hold_s({**entry, "created_at": "2026-11-27T09:00:00"}, asked)


def test_an_answers_reason_is_stripped_and_bounded() -> None:
    assert answer_reason({"reason": "  ok  "}) == "ok"
    assert answer_reason({"reason": "   "}) is None and answer_reason({}) is None
    assert answer_reason({"reason": "x" * MAX_REASON}) == "x" * MAX_REASON
    with pytest.raises(DecisionError, match="at most"):
        answer_reason({"reason": "x" * (MAX_REASON + 1)})


def test_once_published_the_decision_page_shows_each_groups_estimate_beside_what_happened(tmp_path: Path) -> None:
    realized = replace(row(2, "REALIZED", group="orders"), published_at=1_795_000_000_000,
                       realized_at=1_795_000_036_000, snapshot_generation=4, realized_generation=7,
                       restored_offsets=1_234, restored_reporting=2, restored_members=3)  # fmt: skip
    unreported = replace(row(1, "REALIZED", group="clicks"), published_at=1_795_000_000_000,
                         realized_at=1_795_000_010_000)  # fmt: skip
    waiting = row(3)
    before = render_decision_page(report([waiting]), 1_795_000_000_000, "12 h")
    assert 'data-testid="afterwards"' not in before  # nothing was published yet: no outcome to show
    written = write_decision_page(report([waiting]), tmp_path, 1_795_000_000_000, "12 h", {"report": "r.html"})
    assert has_decision_page(tmp_path, "s")
    assert refresh_decision_page(report([realized, unreported, waiting]), tmp_path) == written
    html = written.read_text(encoding="utf-8")
    afterwards = html[html.index('data-testid="afterwards"') : html.index('aria-labelledby="groups"')]
    assert afterwards.index("clicks") < afterwards.index("orders")  # realized ones by group
    assert "estimated 2 min; took at most 36 s" in afterwards
    assert "estimated 3 rebalances; went through at most 3 rebalances" in afterwards
    assert "estimated 2,000 offsets; restored at least 1,234 offsets (2 of 3 instances reported)" in afterwards
    assert "estimated 1,000 offsets; not observed" in afterwards and "went through at most" in afterwards
    assert 'href="r.html"' in html  # written again with the links it was first written with
    assert refresh_decision_page(report([realized]), tmp_path / "elsewhere") is None
