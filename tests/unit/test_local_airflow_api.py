"""The local Airflow's REST client: a read that times out on a starved api-server is tried again; a write is not
(it may have been applied), and a read that never gets through fails naming the call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from jobs.local.airflow import AirflowError, LocalAirflow


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
