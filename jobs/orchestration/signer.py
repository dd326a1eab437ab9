"""Who may sign: the planning DAG's publish task, on the signer queue, run from this project's own DAG file.

In the deployment (docker/) every task runs on an Edge worker; only the worker serving SIGNER_QUEUE holds the plan
signing key. Two checks keep other code off it: Airflow's cluster policy (task_policy, registered through the
``airflow.policy`` entry point) refuses any other task that asks for the queue when its DAG is parsed, and the
signer worker itself (signer_worker.py) refuses any workload that signer_refusal names, whatever put it there.
Pure apart from the hook marker: no Spark, no pipeline.
"""

from __future__ import annotations

from typing import Any

from airflow.policies import hookimpl

from jobs.orchestration.decision import PUBLISH_TASK

SIGNER_QUEUE = "rbp-signer"
PLANNING_DAG = "rebalance_planning"
PLANNING_DAG_FILE = "rebalance_planning.py"  # relative to the DAGs folder, as Airflow names it in a workload
PLANNING_BUNDLE = "dags-folder"  # Airflow's bundle for the DAGs folder: the image's read-only copy
SIGNING_TASKS = frozenset({(PLANNING_DAG, PUBLISH_TASK)})


class SignerQueueViolation(ValueError):
    """A task that does not sign asked for the signer's queue."""


def policy_problem(dag_id: str, task_id: str, queue: str) -> str | None:
    """Why a task may not be parsed with ``queue`` (None: it may): only the signing tasks use the signer queue."""
    if queue == SIGNER_QUEUE and (dag_id, task_id) not in SIGNING_TASKS:
        return (
            f"task {dag_id}.{task_id} asks for the queue {SIGNER_QUEUE!r}, which is reserved for "
            f"{', '.join(f'{d}.{t}' for d, t in sorted(SIGNING_TASKS))} (the only worker holding the signing key)"
        )
    return None


@hookimpl
def task_policy(task: Any) -> None:
    """Airflow's cluster policy: the signing tasks go to the signer queue; any other task asking for it is refused."""
    dag_id = task.dag_id
    if (dag_id, task.task_id) in SIGNING_TASKS:
        task.queue = SIGNER_QUEUE
        return
    problem = policy_problem(dag_id, task.task_id, task.queue)
    if problem:
        from airflow.exceptions import AirflowClusterPolicyViolation  # noqa: PLC0415 (only when refusing)

        raise AirflowClusterPolicyViolation(problem)


def signer_refusal(dag_id: str, task_id: str, dag_rel_path: str, bundle_name: str | None) -> str | None:
    """Why the signer worker must not run a workload (None: it may): anything but the signing tasks from the
    planning DAG's own file in the DAGs folder's bundle."""
    if (dag_id, task_id) not in SIGNING_TASKS:
        return f"the signer runs only {sorted(f'{d}.{t}' for d, t in SIGNING_TASKS)}, not {dag_id}.{task_id}"
    if dag_rel_path != PLANNING_DAG_FILE or bundle_name != PLANNING_BUNDLE:
        return (
            f"{dag_id}.{task_id} must come from {PLANNING_DAG_FILE} in the {PLANNING_BUNDLE!r} bundle, "
            f"not {dag_rel_path!r} in {bundle_name!r}"
        )
    return None
