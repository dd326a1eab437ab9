"""The planning DAG under `airflow standalone` (scheduler, dag-processor, api-server): an unanswered approval times
out and rejects every plan; a person approves in the Airflow UI with headless Chromium and the plans are published;
a person decides on the decision page (filter, tick, confirm), an unknown group is refused before Airflow is answered.
The rebalance_reports plugin serves reports and Data Docs to logged-in people only. The standalone is the session's
one, shared with test_dag_run (one Airflow start, ~40 s, for both modules).

Screenshots at 1,600 x 1,000 go to var/test-artifacts/ (decide-*.png, airflow-*.png)."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path
from urllib.parse import quote

import httpx
import psutil
import pytest
from playwright.sync_api import Page, expect, sync_playwright

from jobs.local.airflow import PASSWORDS_FILE, LocalAirflow
from jobs.local.broker import EmbeddedBroker
from jobs.orchestration.decision import APPROVE_ALL, APPROVE_SELECTED, TIMEOUT_USER
from jobs.report.links import data_docs_url, decide_url, report_url
from jobs.report.render import render_report
from tests.support.airflow_harness import DAG_ID, SharedAirflow, plan_rows, published_plans, snapshot_of
from tests.support.browser import chromium, login
from tests.support.report_views import report, row

PLANS = "_rebalance_plans"
ARTIFACTS = Path(__file__).resolve().parents[2] / "var" / "test-artifacts"
SCREEN = {"width": 1600, "height": 1000}


# One Airflow for this module and test_dag_run (conftest's airflow_standalone; each start costs 35-47 s): one worker
# runs both modules in turn.
pytestmark = pytest.mark.xdist_group("airflow")


@pytest.fixture(autouse=True)
def fresh_reports(airflow_standalone: SharedAirflow) -> None:
    """Every run plans from reports made now, not at the shared Airflow's start (see SharedAirflow.refresh_reports)."""
    airflow_standalone.refresh_reports()


@pytest.fixture(scope="module")
def standalone(airflow_standalone: SharedAirflow) -> tuple[LocalAirflow, EmbeddedBroker, Path]:
    """The session's `airflow standalone` on the seeded broker, and the lake its triggered runs write."""
    return airflow_standalone.airflow, airflow_standalone.broker, airflow_standalone.lake


def listening(pgid: int) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket listened on by a process of the process group."""
    found = set()
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) != pgid:
                continue
            found |= {(c.laddr.ip, c.laddr.port) for c in process.net_connections("tcp") if c.status == "LISTEN"}
        except (psutil.Error, ProcessLookupError):
            continue  # exited meanwhile
    return found


def test_every_local_airflow_listener_is_on_loopback(standalone: tuple[LocalAirflow, EmbeddedBroker, Path]) -> None:
    airflow = standalone[0]
    assert airflow.process is not None
    sockets = listening(os.getpgid(airflow.process.pid))
    assert ("127.0.0.1", airflow.port) in sockets, sockets
    # No log server (8793/8794 by default, every interface) and nothing else on a non-loopback address.
    assert {address for address, _ in sockets} == {"127.0.0.1"}, sockets


def test_the_generated_passwords_are_the_users_alone(standalone: tuple[LocalAirflow, EmbeddedBroker, Path]) -> None:
    """Airflow wrote its generated admin password into the file LocalAirflow made 0600, in a home only the user
    enters: no other account on the machine reads the demo's login (or its database)."""
    airflow = standalone[0]
    passwords = airflow.home / PASSWORDS_FILE
    assert airflow.password()  # written by Airflow, not an empty placeholder
    assert (stat.S_IMODE(airflow.home.stat().st_mode), stat.S_IMODE(passwords.stat().st_mode)) == (0o700, 0o600)
    assert passwords.stat().st_uid == os.getuid()


def test_reports_are_served_inside_airflow_to_logged_in_people_only(
    standalone: tuple[LocalAirflow, EmbeddedBroker, Path],
) -> None:
    # First in the module: the Data Docs written here are the DAG runs' own once the next tests have run.
    airflow, _, lake = standalone
    home = lake.parent  # the Airflow home: the reports and Data Docs sit beside the lake, airflow.cfg in it
    (home / "reports").mkdir(exist_ok=True)
    (home / "reports" / "s.html").write_text(render_report(report([row(1), row(2)])), encoding="utf-8")
    (home / "data_docs").mkdir(exist_ok=True)
    (home / "data_docs" / "index.html").write_text("<h1>Data Docs of the suites</h1>", encoding="utf-8")
    url = report_url(airflow.url, "s")
    assert httpx.get(url, timeout=30).status_code == 401  # no session, no report
    assert httpx.get(data_docs_url(airflow.url), timeout=30).status_code == 401  # nor the Data Docs
    served = httpx.get(url, headers={"Authorization": f"Bearer {airflow.token()}"}, timeout=30)
    assert served.status_code == 200 and "Rebalance plans — snapshot" in served.text
    assert (home / "airflow.cfg").is_file()  # what the path below reaches for, outside the reports directory
    outside = httpx.get(
        f"{airflow.url}/rebalance/reports/..%2Fairflow.cfg",
        headers={"Authorization": f"Bearer {airflow.token()}"},
        timeout=30,
    )
    assert outside.status_code == 404  # only the reports directory's own files
    plugins = airflow.api("GET", "/plugins")["plugins"]
    assert any(p["name"] == "rebalance_reports" for p in plugins)

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1366, "height": 768})
            _login(page, airflow)
            page.goto(f"{airflow.url}/rebalance/reports/")  # the UI's session cookie is enough
            page.get_by_role("link", name="snapshot s").click()
            page.get_by_role("heading", name="The fleet").wait_for()
            page.screenshot(path=str(ARTIFACTS / "report-in-airflow.png"))
            page.goto(data_docs_url(airflow.url))
            page.get_by_role("heading", name="Data Docs of the suites").wait_for()
        finally:
            browser.close()


def test_an_unanswered_approval_times_out_and_rejects_every_plan(
    standalone: tuple[LocalAirflow, EmbeddedBroker, Path],
) -> None:
    airflow, broker, lake = standalone
    # Long enough for the task to have settled in awaiting_input before the sweep resumes it: a timeout that fires
    # while the first run is still ending trips Airflow 3.3's state race (the task is marked FAILED under load).
    run_id = airflow.trigger(DAG_ID, {"approval_timeout_s": 20})
    assert airflow.wait_for_run(DAG_ID, run_id, timeout_s=600) == "success"
    states = airflow.task_states(DAG_ID, run_id)
    assert states["approval"] == "success" and states["publish"] == "success"
    plans = plan_rows(lake, snapshot_of(airflow, run_id))
    for group in ("orders", "payments"):
        assert plans[group]["status"] == "REJECTED"
        assert plans[group]["approved_by"] == TIMEOUT_USER
        assert plans[group]["reason"] == f"rejected by {TIMEOUT_USER}: no decision within 20 s"
    published = published_plans(broker.bootstrap, PLANS)
    assert not any(p["snapshot_id"] == plans["orders"]["snapshot_id"] for p in published.values())


def test_a_person_approves_the_plans_in_the_airflow_ui(standalone: tuple[LocalAirflow, EmbeddedBroker, Path]) -> None:
    airflow, broker, lake = standalone
    run_id = airflow.trigger(DAG_ID, {"groups": ["orders"]})
    airflow.wait_for_approval(DAG_ID, run_id, "approval", timeout_s=600)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1100})
            page.goto(f"{airflow.url}/")
            page.get_by_label("Username").fill("admin")
            page.get_by_label("Password").fill(airflow.password())
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_url(lambda url: "/auth/login" not in url)
            page.goto(f"{airflow.url}/dags/{DAG_ID}/runs/{quote(run_id)}/tasks/approval/required_actions")
            page.get_by_text("| group |", exact=False).or_(page.get_by_role("table")).first.wait_for()
            page.get_by_role("cell", name="orders").first.wait_for()
            page.screenshot(path=str(ARTIFACTS / "airflow-approval.png"), full_page=True)
            page.get_by_role("button", name=APPROVE_ALL).click()
            assert airflow.wait_for_run(DAG_ID, run_id, timeout_s=600) == "success"
            page.goto(f"{airflow.url}/dags/{DAG_ID}/runs/{quote(run_id)}")
            page.get_by_text("publish").first.wait_for()
            page.screenshot(path=str(ARTIFACTS / "airflow-run-finished.png"), full_page=True)
        finally:
            browser.close()
    plans = plan_rows(lake, snapshot_of(airflow, run_id))
    assert plans["orders"]["status"] == "PUBLISHED"
    assert plans["orders"]["approved_by"] == "admin"  # the user logged into the UI
    assert plans["payments"]["status"] == "REJECTED"  # outside the run's group filter
    assert published_plans(broker.bootstrap, PLANS)["orders"]["plan_id"] == plans["orders"]["plan_id"]


def _login(page: Page, airflow: LocalAirflow) -> None:
    login(page, airflow.url, airflow.password())


def test_a_person_decides_on_the_decision_page_and_an_unknown_group_is_refused_before_the_answer(
    standalone: tuple[LocalAirflow, EmbeddedBroker, Path],
) -> None:
    airflow, broker, lake = standalone
    run_id = airflow.trigger(DAG_ID, {})
    airflow.wait_for_approval(DAG_ID, run_id, "approval", timeout_s=600)
    hitl = f"/dags/{DAG_ID}/dagRuns/{quote(run_id)}/taskInstances/approval/-1/hitlDetails"
    subject = airflow.api("GET", hitl)["subject"]
    assert subject.startswith("Rebalance ") and ": 2 plans, 2 change, " in subject and ", longest " in subject
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport=SCREEN)  # type: ignore[arg-type]
            _login(page, airflow)
            page.goto(decide_url(airflow.url, DAG_ID, run_id))
            expect(page.get_by_test_id("headline")).to_contain_text("2 groups change", timeout=30_000)
            expect(page.get_by_test_id("state")).to_contain_text("Awaiting a decision", timeout=30_000)
            page.screenshot(path=str(ARTIFACTS / "decide-first-screen.png"))
            rows = page.locator("#choices tbody tr:not([hidden])")
            assert sorted(rows.evaluate_all("rs => rs.map(r => r.dataset.group)")) == ["orders", "payments"]

            # A filter narrows what "select all shown" ticks; the confirmation carries the counts.
            page.get_by_role("searchbox", name="group").fill("ord*")
            assert rows.evaluate_all("rs => rs.map(r => r.dataset.group)") == ["orders"]
            page.get_by_role("button", name="select all shown").click()
            expect(page.get_by_test_id("selection")).to_contain_text("1 plan selected")
            page.get_by_role("button", name="Approve selected…").click()
            confirm = page.locator("#confirm-text")
            expect(confirm).to_contain_text("Approve 1 plan, ")
            expect(confirm).to_contain_text("reject the other 1 plan")
            page.screenshot(path=str(ARTIFACTS / "decide-confirm.png"))
            page.get_by_role("button", name="Cancel").click()
            page.get_by_role("button", name="clear selection").click()

            # A pasted group without a validated plan: refused by the plugin, Airflow's one answer is not spent.
            page.get_by_text("paste group ids, add a note").click()
            page.get_by_label("group ids to approve").fill("orders\nnope")
            page.get_by_role("button", name="Approve selected…").click()
            page.get_by_role("button", name="Confirm").click()
            expect(page.get_by_test_id("state")).to_contain_text(
                "Not sent: groups without a validated plan in this run: nope", timeout=30_000
            )
            page.screenshot(path=str(ARTIFACTS / "decide-refused.png"))
            assert airflow.api("GET", hitl)["response_received"] is False

            # Approve the changing groups, timed from opening the page: with no keep-plan in this run, the filter the
            # page opens on ("changes and keeps") shows exactly them.
            started = time.monotonic()
            page.goto(decide_url(airflow.url, DAG_ID, run_id))
            clicks = ("select all shown", "Approve selected…", "Confirm")
            for name in clicks:
                page.get_by_role("button", name=name).click()
            expect(page.get_by_test_id("state")).to_contain_text("Decided by admin", timeout=60_000)
            decided_s = time.monotonic() - started
            (ARTIFACTS / "decide-measure.json").write_text(
                json.dumps({"clicks_to_approve_the_changing_groups": len(clicks), "seconds_open_to_decided": decided_s})
            )

            assert airflow.wait_for_run(DAG_ID, run_id, timeout_s=600) == "success"
            page.reload()
            state = page.get_by_test_id("state")
            expect(state).to_contain_text("2 plans approved, 0 plans rejected", timeout=30_000)
            expect(state).to_contain_text("2 plans published")
            page.screenshot(path=str(ARTIFACTS / "decide-after.png"))
        finally:
            browser.close()
    answer = airflow.api("GET", hitl)
    assert answer["chosen_options"] == [APPROVE_SELECTED]
    assert answer["params_input"]["selected_groups"] == ["orders", "payments"]
    plans = plan_rows(lake, snapshot_of(airflow, run_id))
    assert plans["orders"]["status"] == "PUBLISHED" and plans["orders"]["approved_by"] == "admin"
    assert plans["payments"]["status"] == "PUBLISHED"
    assert published_plans(broker.bootstrap, PLANS)["orders"]["plan_id"] == plans["orders"]["plan_id"]
