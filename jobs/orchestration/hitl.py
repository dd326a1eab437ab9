"""The plan approval step of the planning DAG: Airflow's human-in-the-loop operator, wired to the pure decision model
(decision.py). Imported when the DAG file is parsed, so it imports nothing of the pipeline (no Spark, no assignor)
until the answer is recorded."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.providers.standard.operators.hitl import HITLOperator
from airflow.sdk.execution_time.hitl import HITLUser

from jobs.orchestration.decision import OFFER_PARAM, approver


class PlanApprovalOperator(HITLOperator):
    """Asks a person to approve the run's plans; the wait's timeout comes from the review step (param or setting)."""

    def __init__(self, *, review_task_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.review_task_id = review_task_id

    def execute(self, context: Any) -> Any:
        review = context["ti"].xcom_pull(task_ids=self.review_task_id) or {}
        # Set per run, not at parse time: a person may shorten or lengthen the wait when triggering.
        self.response_timeout = timedelta(seconds=float(review.get("approval_timeout_s", 43_200)))
        # Airflow itself then refuses answers from anyone else (its auth manager's is_authorized_hitl_task).
        allowed = [approver(a) for a in review.get("approvers") or ()]
        self.assigned_users = [HITLUser(id=a.id, name=a.name) for a in allowed] or None
        # The offer's digest goes into Airflow's record of the question and comes back with the answer: publish signs
        # only if the review's record still makes that offer (confirmation.py).
        from jobs.orchestration.confirmation import offer_digest, offered_entries  # noqa: PLC0415

        self.params[OFFER_PARAM] = offer_digest(*offered_entries(review))
        return super().execute(context)

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        """Record the decision here, from the trigger's event (Airflow's HITL record of who answered what): the
        answer never crosses XCom, which any task of the deployment can write."""
        answer = super().execute_complete(context, event)
        from jobs.orchestration import tasks  # noqa: PLC0415 (Spark and the stages load only when a task runs)

        reviewed = context["ti"].xcom_pull(task_ids=self.review_task_id)
        triggered_by = getattr(context.get("dag_run"), "triggering_user_name", None)
        return tasks.decide(tasks.runtime(context["params"]), reviewed, dict(answer), triggered_by)
