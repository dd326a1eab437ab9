"""Nightly rebalance planning: extract → lags → plan → validate → review → approval by a person → publish.

Wiring only: every task calls jobs.orchestration.tasks, imported inside the task so parsing this file stays light.
"""

# ruff: noqa: PLC0415 -- tasks import jobs.orchestration.tasks (Spark, the stages) when they run, not when the file is parsed
from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import Param, dag, get_current_context, task

from jobs.orchestration.decision import APPROVAL_TASK, OFFER_PARAM, OPTIONS, REJECT_ALL, REVIEW_TASK
from jobs.orchestration.hitl import PlanApprovalOperator
from jobs.orchestration.params import PLANNING_PARAMS
from jobs.orchestration.signer import SIGNER_QUEUE
from jobs.settings import Settings

SETTINGS = Settings()  # parse time: the schedule (empty: none) and the stage timeout; tasks build their own
RETRIES: dict[str, Any] = {
    "retries": 3,
    "retry_delay": timedelta(seconds=20),
    "retry_exponential_backoff": 2.0,
    "max_retry_delay": timedelta(minutes=10),
    # A stage that hangs fails and is retried (stages are atomic and idempotent) instead of holding the run.
    "execution_timeout": timedelta(seconds=SETTINGS.stage_timeout_s),
}


@dag(
    schedule=SETTINGS.planning_schedule or None,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    params=PLANNING_PARAMS,
    default_args=RETRIES,
    tags=["rebalance"],
    doc_md=__doc__,
)
def rebalance_planning() -> None:
    """One run plans one snapshot of every group; nothing is published without a person's approval."""

    @task
    def extract() -> str:
        from jobs.orchestration import tasks as o

        ctx = get_current_context()
        snapshot_id = o.snapshot_id_for(ctx["dag"].dag_id, ctx["run_id"], ctx["dag_run"].run_after)
        return o.extract(o.runtime(ctx["params"]), snapshot_id)

    @task
    def lags(snapshot_id: str) -> str:
        from jobs.orchestration import tasks as o

        return o.lags(o.runtime(get_current_context()["params"]), snapshot_id)

    @task
    def plan(snapshot_id: str) -> str:
        from jobs.orchestration import tasks as o

        params = get_current_context()["params"]
        return o.plan(o.runtime(params), snapshot_id, params["drain"])

    @task
    def validate(snapshot_id: str) -> str:
        from jobs.orchestration import tasks as o

        return o.validate(o.runtime(get_current_context()["params"]), snapshot_id)

    @task
    def review(snapshot_id: str) -> dict[str, Any]:
        from jobs.orchestration import tasks as o

        ctx = get_current_context()
        params, run = ctx["params"], (ctx["dag"].dag_id, ctx["run_id"])
        return o.review(o.runtime(params), snapshot_id, params["groups"], params["approval_timeout_s"], run)

    # In the deployment only the signer's worker serves this queue and holds the key (jobs/orchestration/signer.py).
    @task(queue=SIGNER_QUEUE)
    def publish(reviewed: dict[str, Any], decided: dict[str, Any]) -> int:
        from jobs.orchestration import tasks as o

        context = get_current_context()
        return o.publish_approved(o.runtime(context["params"]), reviewed, decided, context["dag_run"])

    # TaskFlow hands XComArgs to functions typed with the values they receive at run time.
    reviewed = review(validate(plan(lags(extract()))))  # type: ignore[arg-type]
    approval = PlanApprovalOperator(
        task_id=APPROVAL_TASK,
        review_task_id=REVIEW_TASK,
        # "Rebalance 2026-11-26 02:00: 114 plans, 63 change, 67 moves, longest 20 s": the counts in the list itself.
        subject="{{ ti.xcom_pull(task_ids='review')['subject'] }}",
        body="{{ ti.xcom_pull(task_ids='review')['body'] }}",
        options=OPTIONS,
        defaults=[REJECT_ALL],
        params={
            # Optional (nullable): a required field would disable the approve/reject buttons until filled in.
            "selected_groups": Param(
                None, type=["null", "array"], items={"type": "string"}, description="for 'Approve selected groups'"
            ),
            "reason": Param(None, type=["null", "string"], description="note recorded on the plans (optional)"),
            # Set when the step asks (the digest of the plans offered); answered back unchanged, publish checks it.
            OFFER_PARAM: Param(
                None, type=["null", "string"], description="the digest of the plans offered: leave it as it is"
            ),
        },
        retries=0,  # a retry would ask again; a failure to record the answer is cleared by hand and asked again
        execution_timeout=None,  # it waits for a person: approval_timeout_s bounds that, not the stage timeout
    )
    reviewed >> approval  # the approval records its own decision (see PlanApprovalOperator)
    publish(reviewed, approval.output)  # type: ignore[arg-type]


rebalance_planning()
