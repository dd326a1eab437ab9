"""A pytest plugin measuring CPU, not wall time: per test, the pytest process's own CPU and its child processes'
(the Spark Connect JVM, brokers), setup + call + teardown. Load with ``-p tests.support.cpu_meter``; the figures
go to stdout at the end and, as JSON lines, to ``$RBP_CPU_LOG`` when set. Wall times on a shared machine are noise."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Generator

import psutil
import pytest

_rows: list[dict[str, object]] = []


def _cpu() -> tuple[float, float]:
    """(this process's user+system seconds, all live descendants' user+system seconds)."""
    me = psutil.Process()
    own = me.cpu_times()
    children = 0.0
    for child in me.children(recursive=True):
        try:
            times = child.cpu_times()
        except psutil.Error:  # gone between listing and reading
            continue
        children += times.user + times.system
    return own.user + own.system, children


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    own0, kids0 = _cpu()
    wall0 = time.monotonic()
    yield
    own1, kids1 = _cpu()
    # A child that exited during the test takes its CPU along (the delta may then be negative): floored at 0.
    _rows.append(
        {
            "test": item.nodeid,
            "pytest_cpu_s": round(own1 - own0, 1),
            "children_cpu_s": round(max(kids1 - kids0, 0.0), 1),
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
    terminalreporter.section("cpu meter (pytest cpu s / children cpu s / wall s / load1)")
    for row in _rows:
        terminalreporter.write_line(
            f"{row['pytest_cpu_s']:>7} {row['children_cpu_s']:>8} {row['wall_s']:>7} {row['load1']:>5}  {row['test']}"
        )
