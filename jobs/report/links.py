"""Where Airflow serves the reports and the Data Docs (the rebalance_reports plugin), under its base URL."""

from __future__ import annotations

URL_PREFIX = "/rebalance"


def report_url(base_url: str, snapshot_id: str) -> str:
    """A snapshot's report as the plugin serves it."""
    return f"{base_url.rstrip('/')}{URL_PREFIX}/reports/{snapshot_id}.html"


def data_docs_url(base_url: str) -> str:
    """The Data Docs' index as the plugin serves it."""
    return f"{base_url.rstrip('/')}{URL_PREFIX}/data-docs/index.html"
