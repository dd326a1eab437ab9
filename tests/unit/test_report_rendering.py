"""The report and the approval summary rendered from view-model records (no Spark): numbers spelled for people,
the comparison honest about missing baselines, markup escaped and accessible, nothing fetched when viewed."""

from __future__ import annotations

import re
from dataclasses import replace

import pandas as pd

from jobs.pipeline.report_only import GROUP_METADATA_REASON
from jobs.report import numbers
from jobs.report.approval import approval_body
from jobs.report.bench_page import Figures, render_bench_page
from jobs.report.charts import Chart, binned, grouped_bars
from jobs.report.detail import schedule
from jobs.report.fleet import summarize
from jobs.report.model import (
    Assignor,
    Held,
)
from jobs.report.render import asset, render_report
from tests.support.report_views import HOSTILE, LONG_PID, report, row


def test_numbers_have_separators_plural_forms_and_humane_durations() -> None:
    assert numbers.plural(1, "move") == "1 move" and numbers.plural(2, "move") == "2 moves"
    assert numbers.plural(1_234_567, "offset") == "1,234,567 offsets"
    assert numbers.count(None) == "-" and numbers.count(12_000) == "12,000"
    assert numbers.duration(45) == "45 s" and numbers.duration(200) == "3 min 20 s"
    assert numbers.duration(3_900) == "1 h 5 min" and numbers.duration(None) == "not estimated"
    assert numbers.short_id(LONG_PID) == "3f2a9c4e…c1b7a6e91" and numbers.short_id("a") == "a"
    assert (
        numbers.change(21, 105) == "plan 80% less"
        and numbers.change(5, 0) == "plan 5 more"
        and numbers.change(3, 3) == "same"
        and numbers.change(1, None) == "-"
    )


def test_schedule_counts_new_warmups_and_their_restore_per_step() -> None:
    steps = schedule(
        {1: {"a": Held(warmup=frozenset({"0_1", "0_2"}))},
         2: {"a": Held(frozenset({"0_1"}), warmup=frozenset({"0_2", "0_3"}))}},
        {("a", "0_1"): 10, ("a", "0_2"): 20, ("a", "0_3"): 300},
        600,
    )  # fmt: skip
    assert [(s.warmups, s.new_warmups, s.warmup_restore_offsets, s.starts_after_s) for s in steps] == [
        (2, 2, 30, 0),
        (2, 1, 300, 600),
    ]
    assert schedule({1: {}}, None, 600)[0].warmup_restore_offsets is None  # lags unknown, not zero


def test_summary_compares_with_kip441_on_the_groups_it_covers_and_says_when_not_computed() -> None:
    rows = [row(1), row(2), row(3, kip=False), row(0, "NOOP")]
    fleet = summarize("s", rows)
    moves = next(c for c in fleet.comparisons if c.metric == "moves")
    assert moves.plan is not None and moves.plan.total == 6
    kip, broker = moves.baselines
    assert kip.groups == 3 and kip.baseline is not None and kip.baseline.total == 3 + 4 + 2
    assert kip.plan is not None and kip.plan.total == 3  # the plans of the same three groups
    assert broker.groups == 0 and broker.baseline is None
    assert [r.group_id for r in fleet.top][:3] == ["g3", "g2", "g1"]  # the most offsets to restore first
    assert fleet.tonight == 3 and dict(fleet.by_status) == {"VALIDATED": 3, "NOOP": 1}


def test_restore_is_shown_against_its_lower_bound_per_group_and_fleet_wide() -> None:
    rows = [row(1), row(2), row(0, "NOOP")]
    # A bound of 0 under a plan that restores, and a restore that is itself a lower bound, give no ratio.
    unbounded = replace(row(3, group="zero-bound"), restore_lower_bound=0)
    incomplete = replace(row(4, group="incomplete"), missing_offset_sums=2)
    unknown = replace(row(5, group="before-the-column"), restore_lower_bound=None)
    assert [r.restore_vs_bound for r in rows] == [1_000 / 800, 2_000 / 1_600, 1.0]
    assert [r.restore_vs_bound for r in (unbounded, incomplete, unknown)] == [None, None, None]
    assert (rows[0].bound_figure, unbounded.bound_figure, incomplete.bound_figure) == ("1.25×", "above 0", "-")
    fleet = summarize("s", [*rows, unbounded, incomplete, unknown])
    assert fleet.restore_and_bound == (3_000, 2_400) and fleet.restore_vs_bound == 1.25
    page = render_report(report([*rows, unbounded, incomplete, unknown]))
    assert "The plans restore 1.25× the least any balanced" in page
    assert 'data-value="1.25" title="lower bound 800 offsets">1.25×<' in page
    assert summarize("s", [unknown]).restore_vs_bound is None
    assert 'data-testid="restore-vs-bound"' not in render_report(report([unknown]))


def test_report_page_is_self_contained_escaped_and_accessible() -> None:
    page = render_report(report([row(1), row(2), row(3, group=HOSTILE), row(0, "NOOP", kip=False)]))
    assert "<script>alert(1)" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    # Nothing is fetched when the page is viewed: no external script, stylesheet, image or font.
    assert not re.search(r"""<(script|img|iframe)[^>]*\ssrc=|<link[^>]*stylesheet|@import|url\(\s*['"]?https?:""", page)
    assert page.count("<svg") >= 3  # the charts, rendered when the report was written
    assert page.count("<caption>") >= 5 and 'scope="col"' in page and 'scope="row"' in page
    assert 'aria-sort="descending"' in page  # the table's initial order is announced
    assert f'title="process {LONG_PID}">3f2a9c4e-7b1d…0-5d2c1b7a6e91<' in page  # cut, in full on hover
    assert 'title="process b">host-b:8080<' in page  # an instance by its host or client id, the process on hover
    assert "3 moves · 3 warmups · 4 rebalances · 3,000 offsets to restore · 3 min" in page
    single = render_report(report([row(1)]))
    assert "1 move · 1 warmup · 2 rebalances · 1,000 offsets to restore · 1 min" in single
    assert "warmups_within_budget" in page and "4,321" in page
    assert "broker-side" in page and "not computed" in page


def test_approval_body_leads_with_the_decision_and_ranks_the_changing_groups() -> None:
    kept = replace(row(0, group="kept"), skew_before=0.0)  # moves nothing where KIP-441 would move 2
    rows = [row(1), row(5, "REJECTED"), row(2, group="a|b"), row(0, "NOOP", kip=False), kept]
    links = ("[open the report](http://x/r.html)", "`/docs/index.html`")
    body = approval_body(report(rows), *links, 1, 60, None, "[D](u)")
    assert body.index("[D](u)") < body.index("2 groups change")  # the decision page, first
    assert (
        "**2 groups change (3 moves, 3 warmups); 1 plan keeps the current assignment and prevents 2 KIP-441 "
        "moves; 1 group needs nothing.**" in body
    )
    # Every total names its scope: the changing groups (and what they leave to KIP-441), with the keep-plans,
    # every validated plan, the whole fleet (NOOP included).
    assert (
        "| only the changing groups | 2 | 3 | 3 | 3,000 | 2 min "
        "| 1 keep-plan not selected: KIP-441 may move 2 tasks there |" in body
    )
    assert (
        "| the changing groups and the keep-plans (every plan that differs from what Kafka would do) "
        "| 3 | 3 | 3 | 3,000 | 2 min | - |" in body
    )
    assert "| every validated plan (changing, keep and no-change plans) | 3 | 3 | 3 | 3,000 | 2 min | - |" in body
    assert "over all 5 groups planned (NOOP and rejected included" in body
    # The direction against a baseline is spelt out, never a bare "-43%" beside the baseline's figure.
    assert re.search(r"\| moves, total \| 8 \| 16 \(plan 50% less\), on 4 groups where this plan: 8 \|", body)
    table = [line for line in body.splitlines() if re.match(r"\| (high|medium|low) \|", line)]
    assert [line.split(" | ")[1] for line in table] == ["a\\|b", "g1"]  # changing only, most unlike KIP-441 first
    assert "| low | g1 | imbalance: skew 0.50 → 0.00 active tasks per thread (most − least loaded); 1 task" in body
    assert "| 1 | KIP-441: 3 (plan 2 fewer) | 1 | 1,000 | 1 min |" in body
    assert "kept (KIP-441 would move 2)" in body and "**1 group needs nothing**: g0" in body
    assert "| g5 | REJECTED |" in body  # not awaiting a decision, listed apart
    assert "1 plan outside this run's group filter is not offered" in body
    # A held report-only plan: its reason is the report-only note, said once.
    held = replace(row(3, "HELD", group="legacy"), report_only=GROUP_METADATA_REASON, reason=GROUP_METADATA_REASON)
    assert approval_body(report([held, row(1)]), *links, 0, 60).count(GROUP_METADATA_REASON) == 1
    assert "[open the report](http://x/r.html)" in body and "/docs/index.html" in body


def test_benchmark_page_shares_the_look_sorts_numbers_as_numbers_and_fetches_nothing() -> None:
    frame = pd.DataFrame.from_records(
        [{"label": HOSTILE, "assignor": a.label, "value": v} for a, v in ((Assignor.KIP441, 9.0), (Assignor.PLAN, 2.0))]
    )
    svg = grouped_bars(frame, [Assignor.KIP441, Assignor.PLAN], [HOSTILE], "moves", "Median moves")
    table = Figures("Medians per family", ("family", "moves"), ((HOSTILE, 1234.5), ("random", 3)))
    page = render_bench_page("Bench <title>", "What was measured.", [table], [Chart("Median moves", "Bars.", svg)])
    assert "<script>alert(1)" not in page and "Bench &lt;title&gt;" in page
    assert not re.search(r"""<(script|img|iframe)[^>]*\ssrc=|<link[^>]*stylesheet|@import|url\(\s*['"]?https?:""", page)
    assert asset("look.css") in page and "data-sortable" in page  # the report's stylesheet and sorting script
    assert '<td class="num" data-value="1234.5">1,234.5</td>' in page and "<td>random</td>" in page
    assert page.count("<svg") == 1 and "<caption>Medians per family</caption>" in page


def test_a_drain_plan_says_what_it_drains_and_when_the_instance_is_safe_to_stop() -> None:
    waiting = replace(row(1, group="orders"), draining=("orders-p1",))
    done = replace(row(2, "REALIZED", group="payments"), draining=("payments-p3",))
    page = render_report(report([waiting, done, row(3)]))
    assert "drains orders-p1: stop it once the plan is REALIZED" in page
    assert "drains payments-p3: payments-p3 is safe to stop" in page
    assert "orders-p1 is safe to stop" not in page
    # The group's detail says it too (the report details the group that matters most, here the only one).
    assert render_report(report([done])).count("payments-p3 is safe to stop") == 2
    body = approval_body(report([waiting, done]), "r", "d", 0, 60)
    line = next(x for x in body.splitlines() if "| orders |" in x)
    assert "drains orders-p1" in line and "drains orders-p1: stop it once the plan is REALIZED" in line
    assert "payments-p3 is safe to stop" in body
    already = replace(row(0, "NOOP", group="idle"), draining=("idle-p0",))
    assert already.drain_note == "drains idle-p0: idle-p0 is safe to stop"  # it holds nothing already
    # A drain that expired (its instance left first, or valid_until passed) never says "safe".
    gone = replace(row(4, "EXPIRED", group="left"), draining=("left-p2",))
    assert (
        gone.drain_note == "drains left-p2: the drain was not realized, so not known to be safe to stop; plan it again"
    )


def test_histogram_bins_start_at_round_steps_and_never_overlap() -> None:
    assert binned(pd.Series([0, 1, 2, 3, 30]))[1][:2] == ["0-4", "5-9"]
    assert binned(pd.Series([0.5, 2.7, 3.1, 9.9, 12.5]))[1][:2] == ["0 to <2", "2 to <4"]
    # One group, or all alike: one round bin (it was 1e-10 wide, or no bin at all and an IndexError).
    assert binned(pd.Series([0.1234]))[1] == ["0.1 to <0.2"]
    assert binned(pd.Series([3.3333, 3.3333]))[1] == ["3.0 to <3.5"]
    fractions = binned(pd.Series([0.0, 0.1, 0.33]))
    assert fractions[1][0] == "0.00 to <0.05" and list(fractions[0]) == [
        "0.00 to <0.05",
        "0.10 to <0.15",
        "0.30 to <0.35",
    ]


def test_a_realized_plan_shows_its_estimate_beside_what_it_took_in_the_past_tense() -> None:
    done = replace(row(2, "REALIZED", group="orders"), published_at=1_795_000_000_000, realized_at=1_795_000_036_000)
    page = render_report(report([done]))
    assert "Estimated 2 min; it took at most 36 s: published 2026-11-18 11:06 UTC" in page
    assert "together made" in page and "would together make" not in page
    waiting = render_report(report([row(1)]))
    assert "would together make" in waiting and "it took at most" not in waiting
    # The decision's headline only while a plan awaits one (decided, it read "0 groups change").
    assert 'data-testid="decision"' not in page and "0 groups change" not in page
    assert "1 group changes (1 move, 1 warmup)" in waiting


def test_a_realized_plan_shows_the_rebalances_observed_beside_the_estimate() -> None:
    done = replace(
        row(2, "REALIZED", group="orders"),
        published_at=1_795_000_000_000,
        realized_at=1_795_000_036_000,
        snapshot_generation=4,
        realized_generation=7,
    )
    page = render_report(report([done]))
    assert (
        "Estimated 3 rebalances; the group went through at most 3 rebalances (generation 4 at the snapshot, 7" in page
    )
    restored = '<span data-testid="restored">what the group restored was not observed'
    assert f"Estimated 2,000 offsets to restore; {restored}" in page
    unreported = render_report(report([replace(done, realized_generation=None)]))  # e.g. a streams-protocol group
    assert "Rebalances were not observed." in unreported and "went through" not in unreported
    assert replace(done, realized_generation=3).rebalances_at_most is None  # a restarted group's counter: unknown


def test_a_realized_plan_shows_the_offsets_restored_beside_the_estimate_with_how_many_reported() -> None:
    done = replace(
        row(2, "REALIZED", group="orders"),
        published_at=1_795_000_000_000,
        realized_at=1_795_000_036_000,
        restored_offsets=1_234,
        restored_reporting=3,
        restored_members=3,
    )
    page = render_report(report([done]))
    assert "Estimated 2,000 offsets to restore; <span" in page
    assert (
        "the group restored 1,234 offsets (all 3 instances reported)</span> in restores that began after publish"
        in page
    )
    partial = render_report(report([replace(done, restored_reporting=2)]))
    assert "the group restored at least 1,234 offsets (2 of 3 instances reported)" in partial
    assert replace(done, restored_reporting=0).restored_text == "not observed"
