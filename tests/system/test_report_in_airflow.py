"""The rebalance_reports plugin under `airflow standalone`: the reports and the Data Docs are served to people
logged into Airflow (the approval page links there), refused to anyone else, and listed in Airflow's navigation."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx
from playwright.sync_api import sync_playwright

from jobs.local.airflow import LocalAirflow
from jobs.report.links import data_docs_url, report_url
from jobs.report.render import render_report
from tests.support.report_views import report, row

ARTIFACTS = Path(__file__).resolve().parents[2] / "var" / "test-artifacts"


def test_reports_are_served_inside_airflow_to_logged_in_people_only(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "s.html").write_text(render_report(report([row(1), row(2)])), encoding="utf-8")
    (tmp_path / "data_docs").mkdir()
    (tmp_path / "data_docs" / "index.html").write_text("<h1>Data Docs of the suites</h1>", encoding="utf-8")
    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is needed for the browser tests: `make browser` installs it"
    with LocalAirflow(tmp_path / "airflow", extra_env={"RBP_LAKE_ROOT": str(lake)}).start("standalone") as airflow:
        url = report_url(airflow.url, "s")
        assert httpx.get(url, timeout=30).status_code == 401  # no session, no report
        assert httpx.get(data_docs_url(airflow.url), timeout=30).status_code == 401  # nor the Data Docs
        served = httpx.get(url, headers={"Authorization": f"Bearer {airflow.token()}"}, timeout=30)
        assert served.status_code == 200 and "Rebalance plans — snapshot" in served.text
        outside = httpx.get(
            f"{airflow.url}/rebalance/reports/..%2Fairflow%2Fairflow.cfg",
            headers={"Authorization": f"Bearer {airflow.token()}"},
            timeout=30,
        )
        assert outside.status_code == 404  # only the reports directory's own files
        plugins = airflow.api("GET", "/plugins")["plugins"]
        assert any(p["name"] == "rebalance_reports" for p in plugins)

        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            try:
                page = browser.new_page(viewport={"width": 1366, "height": 768})
                page.goto(f"{airflow.url}/")
                page.get_by_label("Username").fill("admin")
                page.get_by_label("Password").fill(airflow.password())
                page.get_by_role("button", name="Sign in").click()
                page.wait_for_url(lambda u: "/auth/login" not in u)
                page.goto(f"{airflow.url}/rebalance/reports/")  # the UI's session cookie is enough
                page.get_by_role("link", name="snapshot s").click()
                page.get_by_role("heading", name="The fleet").wait_for()
                page.screenshot(path=str(ARTIFACTS / "report-in-airflow.png"))
                page.goto(data_docs_url(airflow.url))
                page.get_by_role("heading", name="Data Docs of the suites").wait_for()
            finally:
                browser.close()
