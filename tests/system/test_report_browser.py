"""The HTML report in headless Chromium, opened from a file as an operator would: the first screen's numbers are
the lake's, the table sorts and filters, a group's detail opens, nothing is fetched; screenshots are kept."""

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

from jobs.report import run_report
from tests.support.report_lake import SNAPSHOT, planned_lake, seed_baselines

ARTIFACTS = Path(__file__).resolve().parents[2] / "var" / "test-artifacts"
LAPTOP = ViewportSize(width=1366, height=768)


@dataclass(frozen=True)
class Lakeside:
    """The report file and what the lake holds: the snapshot's plans and KIP-441's total moves."""

    path: Path
    plans: list[Row]
    kip441_moves: int


@pytest.fixture(scope="module")
def lake_report(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Lakeside:
    """A planned lake of 8 groups with KIP-441 baselines, its report file and its plans as the lake has them."""
    lake = planned_lake(spark, tmp_path_factory.mktemp("report") / "lake", groups=8)
    kip441_moves = sum(int(str(b[4])) for b in seed_baselines(lake, "kip441"))
    return Lakeside(run_report(lake, SNAPSHOT, None), lake.read("plans", SNAPSHOT).collect(), kip441_moves)


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
