"""The local Airflow (the demo's and the tests'): every port its processes listen on is on 127.0.0.1."""

from __future__ import annotations

import os
from pathlib import Path

import psutil

from jobs.local.airflow import LocalAirflow


def listening(pgid: int) -> set[tuple[str, int]]:
    """(address, port) of every TCP socket listened on by a process of the process group."""
    found = set()
    for process in psutil.process_iter():
        try:
            if os.getpgid(process.pid) != pgid:
                continue
            found |= {(c.laddr.ip, c.laddr.port) for c in process.net_connections("tcp") if c.status == "LISTEN"}
        except (psutil.Error, ProcessLookupError):
            continue  # exited meanwhile
    return found


def test_standalone_airflow_listens_on_loopback_only(tmp_path: Path) -> None:
    with LocalAirflow(tmp_path / "airflow").start(timeout_s=600) as airflow:
        assert airflow.process is not None
        sockets = listening(os.getpgid(airflow.process.pid))
        assert ("127.0.0.1", airflow.port) in sockets, sockets
        # No log server (8793/8794 by default, every interface) and nothing else on a non-loopback address.
        assert {address for address, _ in sockets} == {"127.0.0.1"}, sockets
        assert airflow.api("GET", "/dags")["total_entries"] >= 0  # the parts run: a login and a REST call work
