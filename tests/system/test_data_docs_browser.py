"""The GX Data Docs a validate run built, served by the rebalance_reports plugin's app over real HTTP and opened in
headless Chromium with every other origin cut off: the pages are styled by the vendored bootstrap, their scripts run,
nothing is requested from another origin and the Content-Security-Policy (no 'unsafe-inline' for scripts: each page's
own inline scripts and handlers by hash) refuses nothing. Screenshots at
1,600 x 1,000 go to var/test-artifacts/."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from playwright.sync_api import ConsoleMessage, Page, Request, Route, sync_playwright
from pyspark.sql import SparkSession

from jobs.orchestration.report_plugin import reports_app
from jobs.pipeline.data_docs_assets import assets_current
from jobs.settings import Settings
from tests.support.report_lake import planned_lake

ARTIFACTS = Path(__file__).resolve().parents[2] / "var" / "test-artifacts"


@pytest.fixture(scope="module")
def data_docs(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The Data Docs site of three planned and validated groups."""
    root = tmp_path_factory.mktemp("docs")
    assert assets_current(Settings().data_docs_assets_dir), "`make data-docs-assets` installs the Data Docs' assets"
    planned_lake(spark, root / "lake", groups=3)
    return root / "data_docs"


@pytest.fixture
def served(data_docs: Path) -> Iterator[str]:
    """The plugin's app (without Airflow's login) on a free local port: its origin."""
    server = uvicorn.Server(
        uvicorn.Config(reports_app(data_docs.parent / "reports", data_docs), port=0, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the reports app did not start"
        time.sleep(0.05)  # polling the server's own flag with a deadline
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def test_data_docs_open_offline_styled_from_their_own_origin(served: str, data_docs: Path) -> None:
    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is needed for the browser tests: `make browser` installs it"
    elsewhere: list[str] = []
    refused: list[str] = []
    failed: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1600, "height": 1000})

            def offline(route: Route, request: Request) -> None:
                # No network but this origin: a request anywhere else is recorded and never leaves the machine.
                if request.url.startswith((served + "/", "data:")):
                    route.continue_()
                else:
                    elsewhere.append(request.url)
                    route.abort()

            def console(message: ConsoleMessage) -> None:
                if "Content Security Policy" in message.text or message.type == "error":
                    refused.append(message.text)

            page.route("**/*", offline)
            page.on("console", console)
            page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
            ARTIFACTS.mkdir(parents=True, exist_ok=True)

            page.goto(f"{served}/data-docs/index.html")
            page.wait_for_load_state("networkidle")
            _assert_styled(page)
            page.screenshot(path=str(ARTIFACTS / "data-docs-index.png"))

            run = next(iter(sorted((data_docs / "validations" / "plans").rglob("*.html"))))
            page.goto(f"{served}/data-docs/{run.relative_to(data_docs).as_posix()}")
            page.wait_for_load_state("networkidle")
            _assert_styled(page)
            page.get_by_role("heading", name="Overview").first.wait_for()
            # GX's own inline script and its onclick handlers run, each allowed by its hash (no 'unsafe-inline').
            assert page.evaluate("typeof showAllValidations === 'function'")
            page.evaluate("document.querySelector(\"[onclick='hideSucceededValidations()']\").click()")
            page.evaluate("document.querySelector(\"[onclick='showAllValidations()']\").click()")
            page.screenshot(path=str(ARTIFACTS / "data-docs-validation.png"))
        finally:
            browser.close()
    assert elsewhere == [] and refused == [] and failed == [], (elsewhere, refused, failed)


def _assert_styled(page: Page) -> None:
    """bootstrap's CSS applies (its navbar is a flex box), the vendored scripts ran, the icon font loads."""
    assert page.locator("nav.navbar").first.evaluate("e => getComputedStyle(e).display") == "flex"
    assert page.evaluate("window.jQuery && jQuery.fn.jquery") == "3.7.1"
    assert page.evaluate("typeof jQuery.fn.bootstrapTable === 'function' && typeof jQuery.fn.modal === 'function'")
    assert page.evaluate("typeof vegaEmbed === 'function'")
    assert page.evaluate("document.fonts.load('900 16px \"Font Awesome 6 Free\"').then(faces => faces.length)") > 0
