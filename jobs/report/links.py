"""Where Airflow serves the reports and the Data Docs (the rebalance_reports plugin), under its base URL."""

from __future__ import annotations

from urllib.parse import quote

URL_PREFIX = "/rebalance"


def report_url(base_url: str, snapshot_id: str) -> str:
    """A snapshot's report as the plugin serves it."""
    return f"{base_url.rstrip('/')}{URL_PREFIX}/reports/{snapshot_id}.html"


def data_docs_url(base_url: str) -> str:
    """The Data Docs' index as the plugin serves it."""
    return f"{base_url.rstrip('/')}{URL_PREFIX}/data-docs/index.html"


def decide_url(base_url: str, dag_id: str, run_id: str) -> str:
    """A run's decision page as the plugin serves it."""
    return f"{base_url.rstrip('/')}{URL_PREFIX}/decide/{quote(dag_id, safe='')}/{quote(run_id, safe='')}"
