"""The deployment tier: tests against the stack tests/deploy/run.sh started (`make deploy-test`); never collected
by a plain pytest run (tests/conftest.py), because only that script brings the containers up."""

from __future__ import annotations

import os
import ssl
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from jobs.local.airflow import LocalAirflow


@dataclass(frozen=True)
class Stack:
    """The running compose project: its name, the Airflow URL published on the host, the logins run.sh made."""

    project: str
    url: str

    def container(self, service: str) -> str:
        return f"{self.project}_{service}_1"

    def run(self, service: str, *command: str, stdin: str | None = None, timeout: float = 120) -> str:
        """`podman exec` in the service's container; its stdout, or an error naming the command and stderr. The
        command is killed in the container a little before ``timeout``: ending podman's client leaves it running."""
        inside = ["timeout", "-s", "KILL", f"{max(1.0, timeout - 5):g}"]
        done = subprocess.run(
            ["podman", "exec", "-i", self.container(service), *inside, *command],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            raise AssertionError(f"{service}: {command} exited {done.returncode}: {done.stderr.strip()[-2000:]}")
        return done.stdout


@pytest.fixture(scope="session")
def stack() -> Stack:
    return Stack(project=os.environ["RBP_DEPLOY_PROJECT"], url=os.environ["RBP_DEPLOY_URL"])


@pytest.fixture(scope="session")
def ca() -> ssl.SSLContext:
    """Trusts the CA run.sh made for this deployment (docker/tls/make-certs.sh), and nothing else."""
    return ssl.create_default_context(cafile=os.environ["RBP_DEPLOY_CA"])


@pytest.fixture(scope="session")
def admin() -> tuple[str, str]:
    return os.environ["AIRFLOW_ADMIN_USERNAME"], os.environ["AIRFLOW_ADMIN_PASSWORD"]


@pytest.fixture(scope="session")
def approver() -> tuple[str, str]:
    return os.environ["RBP_APPROVER_USERNAME"], os.environ["RBP_APPROVER_PASSWORD"]


def restart(stack: Stack, service: str) -> None:
    """The service's container stopped (20 s for a clean stop) and started again: the same operation as the planning
    run's Kafka fault (test_dag_run.py). On CI, two `podman restart`s of Kafka in a row (28 Nov) left the broker
    unwritable for 300 s, while stop and start came back."""
    subprocess.run(["podman", "stop", "-t", "20", stack.container(service)], check=True, capture_output=True)
    subprocess.run(["podman", "start", stack.container(service)], check=True, capture_output=True, timeout=120)


def record(line: str) -> None:
    """One measured line for run.sh's report (var/deploy-test/report.txt), and for pytest's output."""
    print(line)
    with open(os.environ["RBP_DEPLOY_REPORT"], "a", encoding="utf-8") as report:
        report.write(line + "\n")


@dataclass
class StackAirflow(LocalAirflow):
    """The REST helpers of the local harness, pointed at the stack's api-server with the FAB logins run.sh made."""

    base_url: str = ""
    passwords: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.base_url

    def password(self, user: str = "admin") -> str:
        return self.passwords[user]


@pytest.fixture(scope="session")
def airflow(stack: Stack, admin: tuple[str, str], approver: tuple[str, str], ca: ssl.SSLContext) -> StackAirflow:
    return StackAirflow(home=Path("/nonexistent"), base_url=stack.url, passwords=dict([admin, approver]), verify=ca)
