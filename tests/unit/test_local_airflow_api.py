"""The local Airflow's REST client: a read that times out on a starved api-server is tried again; a write is not
(it may have been applied), and a read that never gets through fails naming the call."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import httpx
import pytest

from jobs.local.airflow import PASSWORDS_FILE, SIGNER_LOGIN_FILE, SIGNER_USER, AirflowError, LocalAirflow


def _flaky(monkeypatch: pytest.MonkeyPatch, failures: int) -> list[str]:
    """httpx.request that times out ``failures`` times, then answers 200 with a body; the calls it saw."""
    calls: list[str] = []

    def request(method: str, url: str, **_: Any) -> httpx.Response:
        calls.append(method)
        if len(calls) <= failures:
            raise httpx.ReadTimeout("timed out")
        return httpx.Response(200, json={"state": "success"}, request=httpx.Request(method, url))

    monkeypatch.setattr(httpx, "request", request)
    return calls


def _airflow(tmp_path: Path) -> LocalAirflow:
    return LocalAirflow(tmp_path, port=1, log_ports=(2, 3), _tokens={"admin": "token"})


def test_a_read_that_times_out_is_tried_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _flaky(monkeypatch, failures=2)
    assert _airflow(tmp_path).api("GET", "/dags/d/dagRuns/r") == {"state": "success"}
    assert calls == ["GET"] * 3


def test_a_read_that_never_gets_through_names_the_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _flaky(monkeypatch, failures=10)
    with pytest.raises(AirflowError, match=r"GET /dags/d: ReadTimeout after 3 attempt"):
        _airflow(tmp_path).api("GET", "/dags/d")
    assert len(calls) == 3


def test_a_write_is_not_repeated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _flaky(monkeypatch, failures=1)
    with pytest.raises(AirflowError, match=r"PATCH /dags/d: ReadTimeout after 1 attempt"):
        _airflow(tmp_path).api("PATCH", "/dags/d", {"is_paused": False})
    assert calls == ["PATCH"]


def test_the_home_and_the_passwords_file_are_the_users_alone(tmp_path: Path) -> None:
    """Airflow appends its generated passwords to the file, keeping its mode: made 0600 first, and a world-readable
    one from an earlier start is closed too; until Airflow fills it, asking for a password is a named error."""
    home = tmp_path / "airflow"
    airflow = LocalAirflow(home, port=1, log_ports=(2, 3))
    airflow.secure_home()
    passwords = home / PASSWORDS_FILE
    assert (stat.S_IMODE(home.stat().st_mode), stat.S_IMODE(passwords.stat().st_mode)) == (0o700, 0o600)
    assert passwords.stat().st_uid == os.getuid()
    with pytest.raises(AirflowError, match="no password for 'admin' yet"):
        airflow.password()
    # Publish's own login is made before Airflow starts (Airflow keeps a password it finds) and kept apart, 0600.
    signer = airflow.password(SIGNER_USER)
    login = home / SIGNER_LOGIN_FILE
    assert login.read_text(encoding="utf-8") == signer and stat.S_IMODE(login.stat().st_mode) == 0o600
    env = airflow.env()
    assert env["RBP_AIRFLOW_API_PASSWORD_FILE"] == str(login) and env["RBP_AIRFLOW_API_USER"] == SIGNER_USER
    assert env["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS"].endswith(f",{SIGNER_USER}:viewer")
    passwords.write_text(f'{{"admin": "s3cret", "{SIGNER_USER}": "{signer}"}}\n', encoding="utf-8")
    passwords.chmod(0o644)
    airflow.secure_home()
    assert stat.S_IMODE(passwords.stat().st_mode) == 0o600 and airflow.password() == "s3cret"
    assert airflow.password(SIGNER_USER) == signer == login.read_text(encoding="utf-8")
    with pytest.raises(AirflowError, match="no password for 'approver'"):
        airflow.password("approver")
