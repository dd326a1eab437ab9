"""Who may sign (jobs/orchestration/signer.py): Airflow's cluster policy keeps every task but the planning DAG's
publish off the signer's queue, and the signer worker refuses any workload but that task from the DAG's own file.
Real Airflow objects: the DAGs folder parsed by Airflow's DagBag with the policy loaded from the entry point, and
the workloads the Edge executor hands its workers."""

from __future__ import annotations

import subprocess
import sys
import uuid
from datetime import UTC, datetime
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from airflow.exceptions import AirflowClusterPolicyViolation
from airflow.executors.workloads import BundleInfo, ExecuteTask, TaskInstanceDTO
from airflow.sdk import DAG, task

from jobs.orchestration.edge_worker import main, worker_argv
from jobs.orchestration.signer import (
    PLANNING_BUNDLE,
    PLANNING_DAG,
    PLANNING_DAG_FILE,
    SIGNER_QUEUE,
    task_policy,
)
from jobs.orchestration.signer_worker import guard_edge_worker, workload_refusal

DAGS = Path(__file__).resolve().parents[2] / "dags"


def workload(
    dag_id: str, task_id: str, rel_path: str = PLANNING_DAG_FILE, bundle: str = PLANNING_BUNDLE
) -> ExecuteTask:
    ti = TaskInstanceDTO(
        id=uuid.uuid4(), task_id=task_id, dag_id=dag_id, run_id="manual__1", try_number=1,
        dag_version_id=uuid.uuid4(), map_index=-1, queue=SIGNER_QUEUE, pool_slots=1, priority_weight=1,
    )  # fmt: skip
    return ExecuteTask(
        token="t", ti=ti, dag_rel_path=Path(rel_path), bundle_info=BundleInfo(name=bundle, version=None),
        log_path="x.log",
    )  # fmt: skip


def test_the_policy_is_registered_with_airflow_through_the_entry_point() -> None:
    hooks = {e.name: e.value for e in entry_points(group="airflow.policy")}
    assert hooks.get("rebalance_signer") == "jobs.orchestration.signer"


def test_the_planning_dags_publish_runs_on_the_signer_queue_and_nothing_else_does() -> None:
    from airflow.dag_processing.dagbag import DagBag  # noqa: PLC0415 (Airflow's parser, loads the policy)

    bag = DagBag(dag_folder=str(DAGS))
    assert not bag.import_errors, bag.import_errors
    queues = {(d, t.task_id): t.queue for d, dag in bag.dags.items() for t in dag.tasks}
    assert queues[(PLANNING_DAG, "publish")] == SIGNER_QUEUE
    assert [k for k, q in queues.items() if q == SIGNER_QUEUE] == [(PLANNING_DAG, "publish")]


def test_airflows_parser_refuses_a_dag_file_whose_task_asks_for_the_signer_queue(tmp_path: Path) -> None:
    from airflow.dag_processing.dagbag import DagBag  # noqa: PLC0415

    (tmp_path / "steal.py").write_text(
        "from datetime import datetime\n"
        "from airflow.sdk import dag, task\n"
        "@dag(schedule=None, start_date=datetime(2026, 1, 1))\n"
        "def steal_the_key():\n"
        f"    @task(queue={SIGNER_QUEUE!r})\n"
        "    def read_key(): ...\n"
        "    read_key()\n"
        "steal_the_key()\n"
    )
    bag = DagBag(dag_folder=str(tmp_path))
    assert "steal_the_key" not in bag.dags
    (error,) = bag.import_errors.values()
    assert "AirflowClusterPolicyViolation: task steal_the_key.read_key asks for the queue 'rbp-signer'" in error


def test_another_task_asking_for_the_signer_queue_is_refused_when_parsed() -> None:
    with DAG("someone_elses", start_date=datetime(2026, 1, 1, tzinfo=UTC), schedule=None):

        @task(queue=SIGNER_QUEUE)
        def steal() -> None: ...

        stolen = steal().operator  # type: ignore[attr-defined]
    with pytest.raises(AirflowClusterPolicyViolation, match=r"someone_elses\.steal asks for the queue 'rbp-signer'"):
        task_policy(stolen)
    # A publish task of another DAG is not the planning DAG's publish either.
    with DAG("lookalike", start_date=datetime(2026, 1, 1, tzinfo=UTC), schedule=None):

        @task(queue=SIGNER_QUEUE)
        def publish() -> None: ...

        lookalike = publish().operator  # type: ignore[attr-defined]
    with pytest.raises(AirflowClusterPolicyViolation, match=r"lookalike\.publish"):
        task_policy(lookalike)


def test_the_policy_puts_the_planning_publish_on_the_signer_queue_even_when_left_out() -> None:
    with DAG(PLANNING_DAG, start_date=datetime(2026, 1, 1, tzinfo=UTC), schedule=None):

        @task
        def publish() -> None: ...

        op = publish().operator  # type: ignore[attr-defined]
    assert op.queue != SIGNER_QUEUE
    task_policy(op)
    assert op.queue == SIGNER_QUEUE


@pytest.mark.parametrize(
    ("dag_id", "task_id", "rel_path", "bundle", "refusal"),
    [
        (PLANNING_DAG, "publish", PLANNING_DAG_FILE, PLANNING_BUNDLE, None),
        (PLANNING_DAG, "plan", PLANNING_DAG_FILE, PLANNING_BUNDLE, "not rebalance_planning.plan"),
        ("someone_elses", "publish", PLANNING_DAG_FILE, PLANNING_BUNDLE, "not someone_elses.publish"),
        (PLANNING_DAG, "publish", "evil/rebalance_planning.py", PLANNING_BUNDLE, "not 'evil/rebalance_planning.py'"),
        (PLANNING_DAG, "publish", PLANNING_DAG_FILE, "their-git-bundle", "in 'their-git-bundle'"),
    ],
)  # fmt: skip
def test_the_signer_runs_only_the_planning_publish_from_the_dags_own_file(
    dag_id: str, task_id: str, rel_path: str, bundle: str, refusal: str | None
) -> None:
    reason = workload_refusal(workload(dag_id, task_id, rel_path, bundle))
    assert reason is None if refusal is None else refusal in str(reason)


def test_the_edge_worker_guarded_fails_a_refused_workload_with_its_reason_and_launches_the_publish(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Airflow's own Edge worker class, wrapped as the signer runs it; its real launch is replaced by a recorder."""
    from airflow.providers.edge3.cli.worker import EdgeWorker  # noqa: PLC0415
    from airflow.providers.edge3.worker_api.datamodels import EdgeJobFetched  # noqa: PLC0415

    launched: list[str] = []

    def recorded(self: EdgeWorker, job: EdgeJobFetched, w: ExecuteTask, log: Path) -> object:
        launched.append(w.ti.task_id)
        return "ran"

    monkeypatch.setattr(EdgeWorker, "_launch_job", recorded)
    guard_edge_worker()
    worker = EdgeWorker.__new__(EdgeWorker)  # the guard needs none of the worker's connections

    def fetched(w: ExecuteTask) -> EdgeJobFetched:
        return EdgeJobFetched(
            dag_id=w.ti.dag_id, task_id=w.ti.task_id, run_id=w.ti.run_id, map_index=-1, try_number=1,
            command=w, concurrency_slots=1,
        )  # fmt: skip

    evil = workload("someone_elses", "steal")
    job = worker._launch_job(fetched(evil), evil, tmp_path / "steal.log")
    try:
        assert isinstance(job.process, subprocess.Popen)
        assert job.process.wait(timeout=60) == 1 and not job.is_success
        refused = "refused by the signer: the signer runs only ['rebalance_planning.publish'], not someone_elses.steal"
        assert refused in job.failure_details()
    finally:
        job.cleanup()
    publish = workload(PLANNING_DAG, "publish")
    assert worker._launch_job(fetched(publish), publish, tmp_path / "publish.log") == "ran"  # type: ignore[comparison-overlap]
    assert launched == ["publish"]


def test_the_signer_serves_its_queue_only_and_the_worker_what_it_is_given() -> None:
    with pytest.raises(SystemExit, match="serves the queue 'rbp-signer' only"):
        main(["--signer", "--queues", "default"])
    assert worker_argv(["--signer", "-H", "s"]) == ["airflow", "edge", "worker", "--queues", SIGNER_QUEUE, "-H", "s"]
    assert worker_argv(["--queues", "default"]) == ["airflow", "edge", "worker", "--queues", "default"]
    # The module starts as a program (python -m, as the workers' containers run it) and shows the worker's options.
    shown = subprocess.run(
        [sys.executable, "-m", "jobs.orchestration.edge_worker", "--signer", "--help"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert shown.returncode == 0 and "--edge-hostname" in shown.stdout, shown.stderr[-800:]


def test_a_pid_file_left_by_a_killed_worker_is_cleared_before_the_worker_starts(tmp_path: Path) -> None:
    """A restarted container's worker gets the PID its killed predecessor wrote; Airflow's worker then refuses."""
    pid = tmp_path / "edge-worker.pid"
    pid.write_text("1\n")
    shown = subprocess.run(
        [sys.executable, "-m", "jobs.orchestration.edge_worker", "--pid", str(pid), "--help"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert shown.returncode == 0 and not pid.exists(), shown.stderr[-800:]
