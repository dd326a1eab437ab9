"""The HTML report and the decision page in headless Chromium, opened from files as an operator would: the first
screen's numbers are the lake's, the table sorts and filters, a group's detail opens, nothing is fetched; the decision
page filters (changes and keeps first), ticks and confirms with the counts, warning of keep-plans left to KIP-441 in
the words the Python side uses; a realized plan shows its estimate beside what it took and restored, in the report
and on the decision page written again after it ran.
Screenshots go to var/test-artifacts/ (the decision and estimate-vs-actual ones at 1,600 x 1,000)."""

from __future__ import annotations

import re
import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from playwright.sync_api import Page, Request, ViewportSize, expect, sync_playwright
from pyspark.sql import Row, SparkSession
from pyspark.sql.functions import col, lit, when

from jobs.lakehouse.lake import Lake
from jobs.report import build_report, run_report
from jobs.report.decide_page import refresh_decision_page, write_decision_page
from jobs.report.triage import triage
from tests.support.report_lake import SNAPSHOT, planned_lake, seed_baselines

ARTIFACTS = Path(__file__).resolve().parents[2] / "var" / "test-artifacts"
LAPTOP = ViewportSize(width=1366, height=768)
SCREEN = ViewportSize(width=1600, height=1000)


@dataclass(frozen=True)
class Lakeside:
    """The report file and what the lake holds: the snapshot's plans and KIP-441's total moves."""

    path: Path
    plans: list[Row]
    kip441_moves: int
    decide: Path
    lake: Lake


SETTING = "num_standby_replicas 0 -> 1 (override)"


def keep_and_settings_only(lake: Lake) -> tuple[str, str]:
    """Make two validated plans what a nightly run has beside its changing groups (the synthetic fleet only scales
    out, so every plan moves): a keep-plan (nothing moves, no setting changes; KIP-441, seeded after, would move)
    and a settings-only plan (nothing moves, one setting changes: the demo's ``ledger``). Their group ids."""
    plans = sorted((p for p in lake.read("plans", SNAPSHOT).collect() if p["status"] == "VALIDATED"),
                   key=lambda p: str(p["group_id"]))  # fmt: skip
    assert len(plans) >= 4, "the fixture needs validated plans that still change beside the two made still"
    keep, settings = plans[-1], plans[-2]
    still = (
        lake.read("plans", SNAPSHOT)
        .where(col("plan_id").isin(keep["plan_id"], settings["plan_id"]))
        .withColumn("moves", lit(0))
        .withColumn("warmups", lit(0))
        .withColumn("rounds", lit(0))
        .withColumn("estimated_seconds", lit(0.0))
        .withColumn("max_load_skew_after", col("max_load_skew_before"))  # the current assignment, kept
        .withColumn(
            "settings_changes",
            when(col("plan_id") == settings["plan_id"], lit(SETTING)).otherwise(lit(None).cast("string")),
        )
    )
    # restore_offsets stays: the replicas kept still owe offsets (as the demo's keep-plans do), not a change.
    cost = ["moves", "warmups", "rounds", "estimated_seconds", "max_load_skew_after"]
    lake.merge("plans", still, update=[*cost, "settings_changes"])
    return str(keep["group_id"]), str(settings["group_id"])


@pytest.fixture(scope="module")
def lake_report(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Lakeside:
    """A planned lake of 8 groups with KIP-441 baselines (one plan a keep-plan, one settings-only), its report file
    and its plans as the lake has them."""
    lake = planned_lake(spark, tmp_path_factory.mktemp("report") / "lake", groups=8)
    keep_and_settings_only(lake)
    kip441_moves = sum(int(str(b[4])) for b in seed_baselines(lake, "kip441"))
    path = run_report(lake, SNAPSHOT, None)
    decide = write_decision_page(build_report(lake, SNAPSHOT), path.parent, 1_795_000_000_000, "12 h")
    return Lakeside(path, lake.read("plans", SNAPSHOT).collect(), kip441_moves, decide, lake)


def changes(p: Row) -> bool:
    """What makes a plan a change, read from the lake's row: a move, a warmup or a settings change."""
    return bool(p["moves"] or p["warmups"] or p["settings_changes"])


@pytest.fixture
def page() -> Iterator[tuple[Page, list[str]]]:
    """A headless Chromium page that records every request that is not for a local file."""
    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is needed for the browser tests: `make browser` installs it"
    fetched: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport=LAPTOP)

            def record(request: Request) -> None:
                if not request.url.startswith(("file://", "data:", "about:")):
                    fetched.append(request.url)

            page.on("request", record)
            yield page, fetched
        finally:
            browser.close()


def _column(page: Page, index: int) -> list[str]:
    values = page.locator("#group-table tbody tr:not([hidden])").evaluate_all(
        f"rows => rows.map(r => r.cells[{index}].getAttribute('data-value'))"
    )
    return [str(v) for v in values]


def test_first_screen_summary_equals_the_lake(lake_report: Lakeside, page: tuple[Page, list[str]]) -> None:
    path, plans = lake_report.path, lake_report.plans
    browser, fetched = page
    browser.goto(path.as_uri())
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.screenshot(path=str(ARTIFACTS / "report-first-screen.png"))

    def card(metric: str) -> float:
        return float(
            browser.locator(f"[data-testid=cards] [data-metric={metric}] .value").get_attribute("data-value") or "nan"
        )

    assert card("moves") == sum(int(p["moves"] or 0) for p in plans)
    assert card("restore_offsets") == sum(int(p["restore_offsets"] or 0) for p in plans)
    assert card("rounds") == max(int(p["rounds"] or 0) for p in plans)
    kip_moves = browser.locator("[data-testid=comparison] tr[data-metric=moves] td").nth(1).get_attribute("data-value")
    assert float(kip_moves or "nan") == lake_report.kip441_moves
    chips = browser.locator("[data-testid=statuses] button").evaluate_all(
        "bs => bs.map(b => [b.getAttribute('data-set-status'), Number(b.getAttribute('data-count'))])"
    )
    assert dict(chips) == Counter(str(p["status"]) for p in plans)
    # Readable at laptop width: the page itself never scrolls sideways (wide tables scroll in their own box).
    assert browser.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
    assert fetched == []  # every asset is inlined: nothing fetched at view time
    browser.set_viewport_size(SCREEN)
    browser.screenshot(path=str(ARTIFACTS / "report-first-screen-1600.png"))


def test_groups_table_sorts_and_filters(lake_report: Lakeside, page: tuple[Page, list[str]]) -> None:
    path, plans = lake_report.path, lake_report.plans
    browser, _ = page
    browser.goto(path.as_uri())
    heading = browser.locator("#group-table thead th").nth(2)
    moves = heading.locator("button")  # its accessible name gains the sort arrow
    moves.click()
    descending = [float(v) for v in _column(browser, 2)]
    assert len(set(descending)) > 1, "the fixture's groups must differ in moves, or sorting proves nothing"
    assert descending == sorted(descending, reverse=True)
    assert heading.get_attribute("aria-sort") == "descending"
    moves.click()
    ascending = [float(v) for v in _column(browser, 2)]
    assert ascending == sorted(ascending) and len(ascending) == len(plans)

    target = str(sorted(plans, key=lambda p: str(p["group_id"]))[3]["group_id"])
    browser.get_by_role("searchbox", name="group").fill(target)
    assert _column(browser, 0) == [target.lower()]
    assert browser.locator("[data-filter-count]").text_content() == f"showing 1 of {len(plans)}"
    browser.get_by_role("searchbox", name="group").fill("")
    status = str(plans[0]["status"])
    browser.get_by_role("combobox", name="status").select_option(status)
    shown = browser.locator("#group-table tbody tr:not([hidden])").evaluate_all(
        "rows => rows.map(r => r.getAttribute('data-status'))"
    )
    assert shown == [status] * sum(1 for p in plans if p["status"] == status)
    browser.screenshot(path=str(ARTIFACTS / "report-table-filtered.png"), full_page=True)


def test_a_groups_detail_opens_from_the_table(lake_report: Lakeside, page: tuple[Page, list[str]]) -> None:
    path, plans = lake_report.path, lake_report.plans
    browser, _ = page
    browser.goto(path.as_uri())
    group = str(max(plans, key=lambda p: int(p["restore_offsets"] or 0))["group_id"])
    detail = browser.locator(f"details.group[data-group='{group}']")
    assert not detail.get_attribute("open") and detail.get_attribute("open") is None
    browser.locator("#group-table").get_by_role("link", name=group, exact=True).click()
    # The detail opens on the hashchange event, which fires after click() returns: wait for it with a deadline.
    expect(detail).to_have_attribute("open", re.compile(".*"), timeout=10_000)
    placement = detail.get_by_role("table", name="Placement per instance")
    assert placement.is_visible()
    assert detail.get_by_role("table", name="Schedule").locator("tbody tr").count() >= 1
    assert detail.get_by_role("table", name="This plan beside Kafka's own assignors").is_visible()
    detail.scroll_into_view_if_needed()
    browser.screenshot(path=str(ARTIFACTS / "report-group-detail.png"))


def open_decision(lake_report: Lakeside, browser: Page) -> list[Row]:
    """Open the decision page file at 1,600 x 1,000; the plans it offers (VALIDATED), as the lake has them."""
    browser.set_viewport_size(SCREEN)
    browser.goto(lake_report.decide.as_uri())
    return [p for p in lake_report.plans if p["status"] == "VALIDATED"]


def test_the_decision_page_filters_ticks_and_confirms_with_the_counts(
    lake_report: Lakeside, page: tuple[Page, list[str]]
) -> None:
    browser, fetched = page
    validated = open_decision(lake_report, browser)
    changing = [p for p in validated if changes(p)]
    expect(browser.get_by_test_id("headline")).to_contain_text(f"{len(changing)} groups change")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.screenshot(path=str(ARTIFACTS / "decide-file-first-screen.png"))
    rows = browser.locator("#choices tbody tr:not([hidden])")
    # Every offered plan but the no-change ones when the page opens (here: all of them; KIP-441 moves in each).
    assert sorted(rows.evaluate_all("rs => rs.map(r => r.dataset.group)")) == sorted(p["group_id"] for p in validated)
    target = sorted(changing, key=lambda p: str(p["group_id"]))[0]
    browser.get_by_role("searchbox", name="group").fill(str(target["group_id"]))
    assert rows.evaluate_all("rs => rs.map(r => r.dataset.group)") == [target["group_id"]]
    browser.get_by_role("button", name="select all shown").click()
    browser.get_by_role("button", name="Approve selected…").click()
    moves = int(target["moves"] or 0)
    expect(browser.locator("#confirm-text")).to_contain_text(f"Approve 1 plan, {moves} move{'s' if moves != 1 else ''}")
    browser.get_by_role("button", name="Confirm").click()  # a file cannot answer: it says so
    expect(browser.get_by_test_id("state")).to_contain_text("open the page from Airflow")
    assert fetched == []


def test_changes_and_keeps_are_shown_first_and_leaving_out_a_keep_plan_is_named_with_kip441s_moves(
    lake_report: Lakeside, page: tuple[Page, list[str]]
) -> None:
    browser, fetched = page
    validated = open_decision(lake_report, browser)
    changing = sorted(str(p["group_id"]) for p in validated if changes(p))
    keeps = sorted(str(p["group_id"]) for p in validated if not changes(p))
    settings_only = [str(p["group_id"]) for p in validated if p["settings_changes"] == SETTING and not p["moves"]]
    assert len(keeps) == 1 and len(settings_only) == 1, "the fixture makes one keep-plan and one settings-only plan"
    rows = browser.locator("#choices tbody tr:not([hidden])")

    def shown() -> list[str]:
        return sorted(rows.evaluate_all("rs => rs.map(r => r.dataset.group)"))

    # The filter a person sees first: the plans that differ from what Kafka would do. The settings-only plan is a
    # change (no "keeps" or "nothing to do" note), and the keep-plan is beside it.
    assert browser.get_by_role("radio", name="changes and keeps").is_checked()
    assert shown() == sorted(changing + keeps)
    ledger = browser.locator(f"#choices tr[data-group='{settings_only[0]}']")
    assert ledger.get_attribute("data-kind") == "change" and settings_only[0] in changing
    expect(ledger).to_contain_text("settings change: num_standby_replicas 0 -> 1 (override)")
    keep = browser.locator(f"#choices tr[data-group='{keeps[0]}']")
    expect(keep.locator("th")).to_contain_text("keeps")
    keep.scroll_into_view_if_needed()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.screenshot(path=str(ARTIFACTS / "decide-changes-and-keeps.png"))
    # The words the dialog must show, from the Python side (the Markdown approval page and the scope table).
    t = triage(build_report(lake_report.lake, SNAPSHOT).rows)
    # Changes only: the keep-plan is left out, and both the selection and the dialog say what KIP-441 may do there.
    browser.get_by_role("radio", name="changes only").check()
    assert shown() == changing
    browser.get_by_role("button", name="select all shown").click()
    expect(browser.locator("#selection-warning")).to_have_text(t.changing.left_to_kip441)
    browser.get_by_role("button", name="Approve selected…").click()
    expect(browser.locator("#confirm-text")).to_have_text(t.changing.approving())
    warning = browser.locator("#confirm-warning")
    expect(warning).to_have_text("1 keep-plan not selected: KIP-441 may move 2 tasks there.")  # seeded: 0 + 2
    assert f"{browser.locator('#confirm-text').inner_text()} {warning.inner_text()}" == t.changing.confirmation()
    assert t.changing.approving().startswith(f"Approve {len(changing)} plans, ")
    browser.screenshot(path=str(ARTIFACTS / "decide-confirm-keep-left-out.png"))
    browser.get_by_role("button", name="Cancel").click()
    # Changes and keeps: nothing is left to KIP-441, no warning.
    browser.get_by_role("button", name="clear selection").click()
    browser.get_by_role("radio", name="changes and keeps").check()
    browser.get_by_role("button", name="select all shown").click()
    expect(browser.locator("#selection-warning")).to_have_text("")
    browser.get_by_role("button", name="Approve selected…").click()
    expect(browser.locator("#confirm-text")).to_have_text(t.differing.confirmation())
    expect(warning).to_be_hidden()
    browser.screenshot(path=str(ARTIFACTS / "decide-confirm-changes-and-keeps.png"))
    browser.get_by_role("button", name="Cancel").click()
    browser.get_by_role("radio", name="everything").check()
    assert shown() == sorted(str(p["group_id"]) for p in validated)
    # Rejecting everything leaves the keep-plan's group to KIP-441 too: the same warning.
    browser.get_by_role("button", name="Reject all…").click()
    expect(browser.locator("#confirm-text")).to_have_text(f"Reject all {len(validated)} plans: nothing is published.")
    expect(warning).to_have_text(f"{t.changing.left_to_kip441}.")
    browser.get_by_role("button", name="Cancel").click()
    assert fetched == []


def test_a_realized_plan_shows_its_estimate_beside_what_it_took(
    spark: SparkSession, tmp_path: Path, page: tuple[Page, list[str]]
) -> None:
    lake = planned_lake(spark, tmp_path / "lake", groups=2)
    plan = sorted(lake.read("plans", SNAPSHOT).collect(), key=lambda p: -int(p["restore_offsets"] or 0))[0]
    published, realized = 1_795_000_000_000, 1_795_000_036_000
    done = (
        lake.read("plans", SNAPSHOT)
        .where(f"plan_id = '{plan['plan_id']}'")
        .withColumn("status", lit("REALIZED"))
        .withColumn("published_at", lit(published).cast("bigint"))
        .withColumn("realized_at", lit(realized).cast("bigint"))
        .withColumn("restored_offsets", lit(1_234).cast("bigint"))  # as observe records it
        .withColumn("restored_reporting", lit(3))
        .withColumn("restored_members", lit(3))
    )
    restored = ["restored_offsets", "restored_reporting", "restored_members"]
    lake.merge("plans", done, update=["status", "published_at", "realized_at", *restored])
    path = run_report(lake, SNAPSHOT, None)
    # The decision page, written at review, is written again by observe once the plan is realized.
    write_decision_page(build_report(lake, SNAPSHOT), path.parent, 1_795_000_000_000, "12 h")
    decide = refresh_decision_page(build_report(lake, SNAPSHOT), path.parent)
    assert decide is not None
    browser, _ = page
    browser.set_viewport_size(SCREEN)
    browser.goto(f"{path.as_uri()}#group-{plan['group_id']}")
    outcome = browser.locator(f"details.group[data-group='{plan['group_id']}'] [data-testid=outcome]")
    expect(outcome).to_contain_text("it took at most 36 s: published 2026-11-18 11:06 UTC")
    expect(outcome).to_contain_text("Estimated ")
    expect(outcome).to_contain_text("the group restored 1,234 offsets (all 3 instances reported)")
    outcome.scroll_into_view_if_needed()
    browser.screenshot(path=str(ARTIFACTS / "report-estimate-vs-actual.png"))

    browser.goto(decide.as_uri())
    afterwards = browser.get_by_test_id("afterwards")
    row = afterwards.locator(f"tr[data-group='{plan['group_id']}']")
    expect(row).to_contain_text("REALIZED")
    expect(row).to_contain_text("took at most 36 s")
    expect(row.get_by_test_id("restored")).to_contain_text(
        f"estimated {int(plan['restore_offsets']):,} offsets; restored 1,234 offsets (all 3 instances reported)"
    )
    expect(afterwards.locator("tbody tr")).to_have_count(1)  # only published plans have an outcome
    afterwards.scroll_into_view_if_needed()
    browser.screenshot(path=str(ARTIFACTS / "decide-estimate-vs-actual.png"))
