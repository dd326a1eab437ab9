"""The reports app behind Airflow's login: every route, the Data Docs included, refuses an unauthenticated
request, and no path leaves the reports or Data Docs folders (Airflow itself runs in tests/system)."""

from __future__ import annotations

import socket
from base64 import b64encode
from hashlib import sha256
from pathlib import Path

import pytest
from fastapi import Depends, HTTPException
from fastapi.testclient import TestClient

from jobs.orchestration.report_plugin import reports_app


def _refuse() -> None:
    raise HTTPException(status_code=401, detail="not logged in")


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    reports, docs = tmp_path / "reports", tmp_path / "data_docs"
    (docs / "validations").mkdir(parents=True)
    reports.mkdir()
    (reports / "s.html").write_text("<h1>report</h1>", encoding="utf-8")
    (docs / "index.html").write_text("<h1>docs</h1>", encoding="utf-8")
    (docs / "validations" / "run.html").write_text("<h1>run</h1>", encoding="utf-8")
    (tmp_path / "secret.cfg").write_text("password", encoding="utf-8")
    return reports, docs


def test_every_route_refuses_an_unauthenticated_request(folders: tuple[Path, Path]) -> None:
    client = TestClient(reports_app(*folders, [Depends(_refuse)]))
    for url in (
        "/reports/",
        "/reports/s.html",
        "/data-docs/",
        "/data-docs/index.html",
        "/data-docs/validations/run.html",
        "/decide/rebalance_planning/r1",
        "/decide/rebalance_planning/r1/state",
    ):
        assert client.get(url).status_code == 401, url
    answer = {"option": "approve", "groups": ["orders"]}
    assert client.post("/decide/rebalance_planning/r1", json=answer).status_code == 401


def test_files_are_served_from_their_folders_only(folders: tuple[Path, Path]) -> None:
    client = TestClient(reports_app(*folders))
    assert "report" in client.get("/reports/s.html").text
    assert "docs" in client.get("/data-docs/").text  # a folder serves its index.html
    assert "run" in client.get("/data-docs/validations/run.html").text
    for url in (
        "/data-docs/..%2Fsecret.cfg",
        "/data-docs/validations/..%2F..%2Fsecret.cfg",
        "/reports/..%2Fsecret.cfg",
    ):
        response = client.get(url)
        assert response.status_code == 404 and "password" not in response.text, url


def test_the_decision_routes_answer_502_when_airflow_does_not_answer_and_never_echo_the_token(
    folders: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as s:  # a port nothing listens on: the connection is refused for real
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("AIRFLOW__API__BASE_URL", f"http://127.0.0.1:{port}")
    client = TestClient(reports_app(*folders))
    token = {"Authorization": "Bearer secret-token-123"}
    answer = {"option": "approve", "groups": ["orders"]}
    for response in (
        client.get("/decide/rebalance_planning/r1", headers=token),
        client.get("/decide/rebalance_planning/r1/state", headers=token),
        client.post("/decide/rebalance_planning/r1", json=answer, headers=token),
    ):
        assert response.status_code == 502, response.text
        assert response.json()["detail"] == "Airflow did not answer: ConnectError"
        assert "secret-token-123" not in response.text


def test_data_docs_carry_a_same_origin_content_security_policy(folders: tuple[Path, Path]) -> None:
    client = TestClient(reports_app(*folders))
    for url in ("/data-docs/", "/data-docs/validations/run.html"):
        response = client.get(url)
        policy = {d.split()[0]: d.split()[1:] for d in response.headers["content-security-policy"].split("; ") if d}
        assert policy["default-src"] == ["'self'"], url
        assert policy["script-src"] == ["'self'"], url  # no other origin, no eval, no inline script of its own
        assert policy["object-src"] == ["'none'"] and policy["frame-ancestors"] == ["'self'"], url
        assert policy["font-src"] == ["'self'"] and policy["connect-src"] == ["'self'"], url  # the vendored fonts
        assert response.headers["x-content-type-options"] == "nosniff", url
    assert client.get("/data-docs/missing.html").status_code == 404


def test_a_data_docs_page_runs_only_its_own_inline_scripts_and_handlers_by_hash(folders: tuple[Path, Path]) -> None:
    page = folders[1] / "validations" / "run.html"
    page.write_text(
        "<script>\r\nvar a = 1;\r\n</script><script src='static/x.js'></script>"
        "<button onclick=\"clear('t&amp;1')\">x</button><style>p{}</style>",
        encoding="utf-8",
    )
    client = TestClient(reports_app(*folders))
    policy = {
        d.split()[0]: d.split()[1:]
        for d in client.get("/data-docs/validations/run.html").headers["content-security-policy"].split("; ")
    }
    # The hashes of the text as the browser's DOM holds it: line ends normalized, the attribute's entity decoded.
    expected = {
        f"'sha256-{b64encode(sha256(code.encode()).digest()).decode()}'" for code in ("\nvar a = 1;\n", "clear('t&1')")
    }
    assert set(policy["script-src"]) == {"'self'", "'unsafe-hashes'", *expected}
    assert "'unsafe-inline'" not in policy["script-src"]
    page.write_text("<h1>changed</h1>", encoding="utf-8")  # a rewritten page gets its own policy, not a cached one
    assert "sha256" not in client.get("/data-docs/validations/run.html").headers["content-security-policy"]
