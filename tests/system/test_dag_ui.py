"""The planning DAG under `airflow standalone` (scheduler, dag-processor, api-server): an unanswered approval times
out and rejects every plan; a person approves in the Airflow UI with headless Chromium and the plans are published."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import sync_playwright

from jobs.local.airflow import LocalAirflow
from jobs.local.broker import EmbeddedBroker
from jobs.orchestration.decision import APPROVE_ALL, TIMEOUT_USER
from tests.support.airflow_harness import DAG_ID, plan_rows, published_plans, rbp_env, seed_groups, snapshot_of
from tests.support.kafka_isolation import isolated

REPORTS, PLANS = "_rebalance_reports", "_rebalance_plans"
ARTIFACTS = Path(__file__).resolve().parents[2] / "var" / "test-artifacts"


@pytest.fixture(scope="module")
def standalone(
    tmp_path_factory: pytest.TempPathFactory, kafka: EmbeddedBroker
) -> Iterator[tuple[LocalAirflow, EmbeddedBroker, Path]]:
    home = tmp_path_factory.mktemp("airflow-standalone")
    lake = home / "lake"
    with isolated(kafka) as broker:
        seed_groups(broker.bootstrap, REPORTS)
        with LocalAirflow(home, extra_env=rbp_env(broker.bootstrap, lake)).start("standalone") as airflow:
            airflow.wait_for_dag(DAG_ID)
            yield airflow, broker, lake


def chromium() -> str:
    path = shutil.which("chromium")
    assert path, "Debian's chromium is needed for the browser test: `make test` installs it (apt-get install chromium)"
    return path


def test_an_unanswered_approval_times_out_and_rejects_every_plan(
    standalone: tuple[LocalAirflow, EmbeddedBroker, Path],
) -> None:
    airflow, broker, lake = standalone
    run_id = airflow.trigger(DAG_ID, {"approval_timeout_s": 3})
    assert airflow.wait_for_run(DAG_ID, run_id, timeout_s=600) == "success"
    states = airflow.task_states(DAG_ID, run_id)
    assert states["approval"] == "success" and states["publish"] == "success"
    plans = plan_rows(lake, snapshot_of(airflow, run_id))
    for group in ("orders", "payments"):
        assert plans[group]["status"] == "REJECTED"
        assert plans[group]["approved_by"] == TIMEOUT_USER
        assert plans[group]["reason"] == f"rejected by {TIMEOUT_USER}: no decision within 3 s"
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
