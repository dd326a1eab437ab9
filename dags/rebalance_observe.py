"""Frequent observation: what every live instance holds now, and which published plans are realized or expired."""

# ruff: noqa: PLC0415 -- tasks import jobs.orchestration.tasks (Spark, the stages) when they run, not when the file is parsed
from __future__ import annotations

from datetime import UTC, datetime, timedelta

from airflow.sdk import dag, task

from jobs.settings import Settings

SETTINGS = Settings()  # parse time: the schedule (empty: triggered runs only) and the stage timeout


@dag(
    schedule=SETTINGS.observe_schedule or None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    default_args={
        "retries": 2,
        "retry_delay": timedelta(seconds=20),
        "retry_exponential_backoff": 2.0,
        "execution_timeout": timedelta(seconds=SETTINGS.stage_timeout_s),
    },
    tags=["rebalance"],
    doc_md=__doc__,
)
def rebalance_observe() -> None:
    """Reads the reports and plans topics; appends observed assignment_history; marks plans REALIZED, EXPIRED or
    WITHDRAWN and records fallbacks (docs/plan-lifecycle.md)."""

    @task
    def observe() -> dict[str, int]:
        from jobs.orchestration import tasks as o

        return o.observe(o.runtime())

    observe()


rebalance_observe()
