"""Airflow's REST API as publish reads it: the approval's HITL record, fetched with the signer's own read-only login
(RBP_AIRFLOW_API_USER, a Viewer: it can read the answer but not give one). The trust store is the process's
(SSL_CERT_FILE names the deployment's CA in docker/)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from jobs.orchestration.decision import APPROVAL_TASK

MAX_PASSWORD_BYTES = 4096


class AirflowApiError(RuntimeError):
    """Airflow's REST API could not be reached, refused the login, or answered without the approval's record."""


@dataclass(frozen=True)
class AirflowLogin:
    """Where the api-server answers and the read-only login publish uses there."""

    url: str
    user: str
    password_file: Path

    def password(self) -> str:
        try:
            raw = self.password_file.read_bytes()[: MAX_PASSWORD_BYTES + 1]
        except OSError as err:
            raise AirflowApiError(f"RBP_AIRFLOW_API_PASSWORD_FILE {self.password_file}: {err.strerror}") from None
        where = f"RBP_AIRFLOW_API_PASSWORD_FILE {self.password_file}"
        if len(raw) > MAX_PASSWORD_BYTES:
            raise AirflowApiError(f"{where} is over {MAX_PASSWORD_BYTES} bytes")
        try:
            password = raw.decode("utf-8").strip()
        except UnicodeDecodeError:
            raise AirflowApiError(f"{where} is not UTF-8") from None
        if not password:
            raise AirflowApiError(f"{where} is empty")
        return password


def _json(response: httpx.Response, what: str) -> dict[str, Any]:
    if response.status_code >= 400:
        raise AirflowApiError(f"Airflow refused {what}: HTTP {response.status_code} {response.text[:300]}")
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise AirflowApiError(f"Airflow answered {what} without a JSON object")
    return body


def approval_answer(login: AirflowLogin, dag_id: str, run_id: str, timeout_s: float = 30) -> dict[str, Any]:
    """The HITL record of the run's approval task (who answered, when, what), as the api-server keeps it."""
    try:
        with httpx.Client(base_url=login.url.rstrip("/"), timeout=timeout_s) as client:
            token = _json(
                client.post("/auth/token", json={"username": login.user, "password": login.password()}),
                f"the login of {login.user!r}",
            ).get("access_token")
            if not isinstance(token, str):
                raise AirflowApiError(f"Airflow's login of {login.user!r} returned no access_token")
            path = (
                f"/api/v2/dags/{quote(dag_id, safe='')}/dagRuns/{quote(run_id, safe='')}"
                f"/taskInstances/{APPROVAL_TASK}/-1/hitlDetails"
            )
            response = client.get(path, headers={"Authorization": f"Bearer {token}"})
            return _json(response, f"the approval record of run {run_id!r}")
    except httpx.HTTPError as err:
        raise AirflowApiError(f"Airflow's REST API at {login.url} did not answer: {type(err).__name__}: {err}") from err
