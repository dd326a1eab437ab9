"""The suite's xdist scheduling when a worker dies (tests/support/xdist_groups.py): an inner pytest on two workers over
a few small modules, one of whose tests takes its worker down mid-group, must end with a summary, the test named as
failed, the rest of its group run on the replacement and a non-zero exit, never wait forever."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]
INNER_ARGS = ("-p", "xdist.plugin", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider", "-rA")
DEADLINE_S = 120.0  # the inner runs take seconds; a hang would otherwise hold the outer run until its own timeout
# The inner suite's conftest wires the groups exactly as tests/conftest.py does.
CONFTEST = """
from tests.support import xdist_groups


def pytest_configure(config):
    xdist_groups.install(config)
"""
DIES = """
import os


def test_before():
    pass


def test_dies():
    os._exit(1)  # as faulthandler_exit_on_timeout ends a worker


def test_after():
    pass
"""
# The rehearsal's way to die: stuck past faulthandler_timeout, with faulthandler_exit_on_timeout (pyproject: 15 min).
STUCK = """
import threading


def test_before():
    pass


def test_dies():
    threading.Event().wait(60)


def test_after():
    pass
"""
FAULTHANDLER_EXIT = ("-o", "faulthandler_timeout=3", "-o", "faulthandler_exit_on_timeout=true")


def small_suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """Four passing two-test modules and ``test_a_dies``, whose middle test ends its worker's process."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the inner pytest imports tests.support from this checkout
    # Only xdist (INNER_ARGS) of the plugins installed here: a third of the time each inner process takes to start.
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    # When this run is itself on xdist, its worker's variables would make the inner pytest think it is a worker too.
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)
    pytester.makeconftest(CONFTEST)
    for name in ("test_m1", "test_m2", "test_m3", "test_m4"):
        pytester.makepyfile(**{name: "def test_one():\n    pass\n\n\ndef test_two():\n    pass\n"})
    pytester.makepyfile(test_a_dies=DIES)


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """The inner pytest on two workers with our groups; ``timeout`` kills it and fails this test if it hangs."""
    return pytester.runpytest_subprocess(*INNER_ARGS, *args, timeout=DEADLINE_S)


def test_a_dead_worker_fails_its_test_and_its_group_goes_on_on_the_replacement(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """test_a_dies sorts first: its worker exits in the first group handed out, while the other is busy; test_z_dies
    last, after its worker completed groups, is stuck until faulthandler ends its worker: the case that hung (xdist 3.8
    put completed groups back in the queue)."""
    small_suite(pytester, monkeypatch)
    pytester.makepyfile(test_z_dies=STUCK)
    result = run(pytester, *FAULTHANDLER_EXIT)
    result.assert_outcomes(passed=12, failed=2)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    passed = {line.split()[1] for line in result.outlines if line.startswith("PASSED ")}
    failed = [line for line in result.outlines if line.startswith("FAILED ")]
    for module in ("test_a_dies", "test_z_dies"):
        assert {f"{module}.py::test_before", f"{module}.py::test_after"} <= passed
        dies = [line for line in failed if line.startswith(f"FAILED {module}.py::test_dies - worker 'gw")]
        assert len(dies) == 1, failed  # reported once, not run again on the replacement
        assert "crashed while running" in dies[0]


def test_with_no_restart_left_the_tests_a_crash_left_unrun_fail_by_name(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    small_suite(pytester, monkeypatch)
    result = run(pytester, "--max-worker-restart", "0")
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.fnmatch_lines(["*worker gw* crashed and worker restarting disabled*"])
    result.stdout.fnmatch_lines(["FAILED test_a_dies.py::test_after - not run*"])
    result.stdout.fnmatch_lines(
        ["not run: a worker died (gw? in test_a_dies.py::test_dies) and no worker was left to run it"]
    )
    outcomes = result.parseoutcomes()
    assert outcomes["failed"] >= 2  # the test it died in, and at least the rest of its group
    assert outcomes["failed"] + outcomes.get("passed", 0) == 11  # every test is accounted for


def test_a_replacement_that_collected_other_tests_gets_none_and_the_run_still_ends(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first worker dies in test_a_dies, and every replacement collects one test more. Whether test_z_dies then
    takes the other worker down depends on the schedule: that worker may have been given it, or may already have been
    shut down with the queue empty while test_z_dies waited on the dead one. Either way the run ends, every test is
    accounted for, and what no worker could run fails by name."""
    small_suite(pytester, monkeypatch)
    pytester.makepyfile(test_z_dies=STUCK)
    pytester.makepyfile(
        test_extra="import os\n\nif os.environ['PYTEST_XDIST_WORKER'] not in {'gw0', 'gw1'}:\n\n"
        "    def test_on_replacements():\n        pass\n"
    )
    result = run(pytester, *FAULTHANDLER_EXIT)
    assert result.ret == pytest.ExitCode.TESTS_FAILED, result.stdout.str()
    result.stdout.no_fnmatch_line("*INTERNALERROR*")
    result.stdout.fnmatch_lines(["*Different tests were collected between gw? and gw2*"])
    result.stdout.fnmatch_lines(["FAILED test_a_dies.py::test_dies - worker 'gw?' crashed while running*"])
    result.stdout.fnmatch_lines(["FAILED test_z_dies.py::test_after - not run*"])
    if any(line.startswith("FAILED test_z_dies.py::test_dies - worker 'gw") for line in result.outlines):
        result.stdout.fnmatch_lines(["*Different tests were collected between gw? and gw3*"])
    else:
        result.stdout.fnmatch_lines(["FAILED test_z_dies.py::test_dies - not run*"])
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes["failed"] == 14, outcomes  # what the first workers collected


# SIGINT to the whole process group, as a terminal's Ctrl-C sends it, to a pytest started with SIGINT ignored (a
# script's background job: `make test &`); SIGTERM to the controller alone (a CI timeout, kill).
@pytest.mark.parametrize(
    ("stop", "to_group", "says"),
    [(signal.SIGINT, True, "KeyboardInterrupt"), (signal.SIGTERM, False, "SIGTERM")],
    ids=["SIGINT-to-group", "SIGTERM-to-controller"],
)
def test_a_run_stopped_after_a_crash_ends_with_its_summary(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, stop: signal.Signals, to_group: bool, says: str
) -> None:
    small_suite(pytester, monkeypatch)
    started = pytester.path / "stuck.started"
    # The test after the one that ends its worker is stuck: it runs on the replacement, so once it has started, the
    # controller has taken in the death (and reported it).
    stuck_after = f"""
import os
import pathlib
import threading


def test_before():
    pass


def test_dies():
    os._exit(1)


def test_after():
    pathlib.Path({str(started)!r}).touch()
    threading.Event().wait(600)  # stuck until stopped
"""
    pytester.makepyfile(test_a_dies=stuck_after)
    code = "import signal, sys, pytest\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
    code += f"sys.exit(pytest.main({list(INNER_ARGS)!r}))"
    log = pytester.path / "inner.log"
    with (
        log.open("wb") as out,
        subprocess.Popen(
            [sys.executable, "-c", code],
            cwd=pytester.path,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        ) as process,
    ):
        deadline = time.monotonic() + DEADLINE_S
        while not started.exists():
            assert process.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"the stuck test never started:\n{log.read_text()}"
            time.sleep(0.05)  # polling for a file the inner test writes, with a deadline
        if to_group:
            os.killpg(process.pid, stop)
        else:
            process.send_signal(stop)
        try:
            process.wait(timeout=DEADLINE_S)
        finally:
            with contextlib.suppress(ProcessLookupError):  # whatever of its group is left (a stuck worker)
                os.killpg(process.pid, signal.SIGKILL)
    text = log.read_text()
    assert process.returncode == pytest.ExitCode.INTERRUPTED, text
    assert says in text, text
    assert re.search(r"FAILED test_a_dies\.py::test_dies - worker 'gw\d+' crashed while running", text), text
    assert re.search(r"\d+ failed.* in [\d.]+s", text), text  # the summary line
