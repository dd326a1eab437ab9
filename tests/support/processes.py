"""Child processes of tests that cannot hang a run: on a missed deadline every Python thread's stack is shown."""

from __future__ import annotations

import os
import signal
import subprocess

# Children started with this in their environment write every thread's Python stack to stderr on SIGABRT.
FAULTHANDLER_ENV = {"PYTHONFAULTHANDLER": "1"}


def with_faulthandler(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) plus what makes a child dump its stacks on SIGABRT."""
    return {**(os.environ if env is None else env), **FAULTHANDLER_ENV}


def wait_or_abort(process: subprocess.Popen[bytes], timeout_s: float, what: str) -> int:
    """The child's exit code; if it does not end within ``timeout_s``, SIGABRT (its stacks reach its stderr even
    with the main thread stuck in native code, where SIGINT is never handled), then SIGKILL, then AssertionError."""
    try:
        return process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)
        raise AssertionError(f"{what} did not end within {timeout_s:g} s (its stacks are in its stderr)") from None
