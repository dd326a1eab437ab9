"""A pytest plugin measuring CPU, not wall time: per test (setup + call + teardown), the Spark Connect server's CPU
and that of pytest with its other descendants (plan workers, brokers). Load with ``-p tests.support.cpu_meter``; the
figures go to stdout at the end and, as JSON lines, to ``$RBP_CPU_LOG`` when set. Wall times here are noise."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Generator

import psutil
import pytest

_rows: list[dict[str, object]] = []


def _total(process: psutil.Process) -> float:
    # children_*: the CPU of its children it has reaped, so a worker process that exits keeps counting.
    times = process.cpu_times()
    return float(times.user + times.system + times.children_user + times.children_system)


def _cpu() -> tuple[float, dict[int, float]]:
    """(CPU seconds of this process and every descendant, the Spark Connect servers' among them, by pid)."""
    me = psutil.Process()
    total, servers = _total(me), {}
    for child in me.children(recursive=True):
        try:
            spent = _total(child)
            if any("SparkConnectServer" in part for part in child.cmdline()):
                servers[child.pid] = spent
        except psutil.Error:  # gone between listing and reading: its parent counts it once reaped
            continue
        total += spent
    return total, servers


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    total0, servers0 = _cpu()
    wall0 = time.monotonic()
    yield
    total1, servers1 = _cpu()
    # A server started in this test counts whole; one that ended in it is lost (and then floors the total at 0).
    server = sum(spent - servers0.get(pid, 0.0) for pid, spent in servers1.items())
    _rows.append(
        {
            "test": item.nodeid,
            "server_cpu_s": round(server, 1),
            "pytest_cpu_s": round(max(total1 - total0 - server, 0.0), 1),
            "wall_s": round(time.monotonic() - wall0, 1),
            "load1": round(os.getloadavg()[0], 1),
        }
    )


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = os.environ.get("RBP_CPU_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            for row in _rows:
                out.write(json.dumps(row) + "\n")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    terminalreporter.section(
        "cpu meter (Spark Connect server cpu s / pytest and its other processes cpu s / wall s / load)"
    )
    for row in _rows:
        terminalreporter.write_line(
            f"{row['server_cpu_s']:>7} {row['pytest_cpu_s']:>7} {row['wall_s']:>7} {row['load1']:>5}  {row['test']}"
        )
