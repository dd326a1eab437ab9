"""Faults, live: the stack's stateful services restarted under it, between runs and during a planning run, and what
must hold afterwards."""

from __future__ import annotations

import ssl
import subprocess
import time

import httpx
import pytest

from jobs.orchestration.decision import APPROVE_ALL
from jobs.polling import wait_until
from tests.deploy.conftest import Stack, StackAirflow, record
from tests.deploy.test_dag_run import LAKE_CHECK, PLANNING, lake_rows, snapshot_of
from tests.deploy.test_security import app_password, kafka_probe, scram


def restart(stack: Stack, service: str) -> None:
    subprocess.run(["podman", "restart", "-t", "20", stack.container(service)], check=True, capture_output=True)


def healthy(stack: Stack, service: str) -> bool:
    subprocess.run(["podman", "healthcheck", "run", stack.container(service)], capture_output=True, check=False)
    state = subprocess.run(
        ["podman", "inspect", "--format", "{{.State.Health.Status}}", stack.container(service)],
        capture_output=True,
        text=True,
        check=True,
    )
    return state.stdout.strip() == "healthy"


def test_airflow_recovers_after_postgres_restarts(stack: Stack, admin: tuple[str, str], ca: ssl.SSLContext) -> None:
    restart(stack, "postgres")
    started = time.monotonic()

    def logged_in() -> bool:
        try:
            login = httpx.post(
                f"{stack.url}/auth/token", json={"username": admin[0], "password": admin[1]}, timeout=10, verify=ca
            )
            if login.status_code not in (200, 201):
                return False
            token = login.json()["access_token"]
            dags = httpx.get(
                f"{stack.url}/api/v2/dags", headers={"Authorization": f"Bearer {token}"}, timeout=10, verify=ca
            )
            return dags.status_code == 200
        except httpx.TransportError:
            return False

    wait_until(logged_in, 300, "Airflow to answer logins again after PostgreSQL restarted", poll_s=2)

    def health() -> dict[str, dict[str, str]]:
        return httpx.get(f"{stack.url}/api/v2/monitor/health", timeout=10, verify=ca).json()  # type: ignore[no-any-return]

    wait_until(
        lambda: health()["scheduler"]["status"] == "healthy",
        300,
        "the scheduler to report healthy again",
        poll_s=3,
    )
    record(f"Airflow recovered {time.monotonic() - started:.0f} s after PostgreSQL restarted")


def test_kafka_restarts_with_its_users_and_acls_in_force(stack: Stack) -> None:
    restart(stack, "kafka")
    started = time.monotonic()
    wait_until(lambda: healthy(stack, "kafka"), 300, "Kafka healthy after its restart", poll_s=3)
    app = scram("rbp-demo-fleet", app_password(stack))
    # The SCRAM users and the ACLs live in KRaft's metadata log in the kafka-data volume: both survive.
    assert kafka_probe(stack, app, "produce", "_rebalance_plans") == "TOPIC_AUTHORIZATION_FAILED"
    assert kafka_probe(stack, app, "produce", "_rebalance_reports") == "written"
    record(f"Kafka answered again {time.monotonic() - started:.0f} s after its restart")


def kill_and_start(stack: Stack, service: str) -> None:
    """A crash: SIGKILL to the container (its processes with it), then started again unless its restart policy
    already did."""
    subprocess.run(["podman", "kill", "-s", "KILL", stack.container(service)], check=True, capture_output=True)

    def state() -> str:
        inspected = subprocess.run(
            ["podman", "inspect", "--format", "{{.State.Status}}", stack.container(service)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        return inspected.stdout.strip()

    wait_until(lambda: state() in ("exited", "stopped", "running"), 60, f"{service} to be down or back", poll_s=1)
    if state() != "running":
        subprocess.run(["podman", "start", stack.container(service)], check=True, capture_output=True)


def first_running(airflow: StackAirflow, run_id: str, tasks: tuple[str, ...], timeout_s: float) -> str:
    """The first of ``tasks`` seen running in the run; AssertionError if the run fails first."""
    seen: list[str] = []

    def running() -> bool:
        states = airflow.task_states(PLANNING, run_id)
        failed = sorted(t for t, s in states.items() if s in ("failed", "upstream_failed"))
        assert not failed, f"task(s) {failed} failed: {states}"
        seen.extend(t for t in tasks if states.get(t) == "running")
        return bool(seen)

    wait_until(running, timeout_s, f"one of {tasks} to run", poll_s=1)
    return seen[0]


@pytest.mark.timeout(3600)
def test_a_planning_run_completes_through_kafka_restarting_and_the_scheduler_killed(
    stack: Stack, airflow: StackAirflow
) -> None:
    """Kafka restarted while extract reads the reports, the scheduler's container killed (LocalExecutor: the
    running stage dies with it) while a Spark stage runs: the retries complete the run, it is approved and
    published, each group is planned once and the lake still passes its contract (no row written twice)."""
    approver = next(user for user in airflow.passwords if user != "admin")
    started = time.monotonic()
    run_id = airflow.trigger(PLANNING)
    first_running(airflow, run_id, ("extract",), timeout_s=600)
    restart(stack, "kafka")
    record(f"faulted run: Kafka restarted {time.monotonic() - started:.0f} s after the trigger, extract running")
    stage = first_running(airflow, run_id, ("lags", "plan", "validate"), timeout_s=1500)
    kill_and_start(stack, "airflow-scheduler")
    record(f"faulted run: scheduler killed and started {time.monotonic() - started:.0f} s after the trigger, "
           f"{stage} running")  # fmt: skip
    airflow.wait_for_approval(PLANNING, run_id, "approval", timeout_s=2400, settle_s=30)
    airflow.answer(PLANNING, run_id, "approval", [APPROVE_ALL], {}, user=approver)
    assert airflow.wait_for_run(PLANNING, run_id, timeout_s=900) == "success", airflow.task_states(PLANNING, run_id)
    tries = {
        str(t["task_id"]): int(t["try_number"])
        for t in airflow.api("GET", f"/dags/{PLANNING}/dagRuns/{run_id}/taskInstances")["task_instances"]
    }
    record(f"faulted run: success after {time.monotonic() - started:.0f} s; tries {dict(sorted(tries.items()))}")
    assert tries[stage] > 1, tries  # the killed stage really ran again
    snapshot = snapshot_of(airflow, run_id)
    planned = sorted(str(r["group_id"]) for r in lake_rows(stack, "plans", "snapshot_id", "group_id")
                     if r["snapshot_id"] == snapshot)  # fmt: skip
    assert planned == ["group-1", "group-2", "group-3"], planned  # each group once: no plan from the killed attempt
    checked = subprocess.run(
        ["podman", "exec", "-i", stack.container("airflow-scheduler"), "python", "-"],
        input=LAKE_CHECK, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert checked.returncode == 0, (checked.stdout[-3000:], checked.stderr[-2000:])
