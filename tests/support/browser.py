"""Headless Chromium as a person uses Airflow: Debian's chromium and the Airflow login (shared by the browser tests
and the demo's decision benchmark)."""

from __future__ import annotations

import shutil

from playwright.sync_api import Page


def chromium() -> str:
    """Debian's chromium, which Playwright drives (its own downloaded browsers are not used)."""
    path = shutil.which("chromium")
    assert path, "Debian's chromium is needed for the browser test: `make test` installs it (apt-get install chromium)"
    return path


# The person's actions to log in: fill the user, fill the password, click "Sign in".
LOGIN_ACTIONS = 3


def login(page: Page, base_url: str, password: str, user: str = "admin") -> None:
    """Log into Airflow's UI at ``base_url`` as a person does (LOGIN_ACTIONS actions); the session cookie stays."""
    page.goto(f"{base_url}/")
    page.get_by_label("Username").fill(user)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(lambda url: "/auth/login" not in url)
