"""Child processes that never outlive us: their own process group, a parent-death signal, group-wide stop."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

_PR_SET_PDEATHSIG = 1
PR_SET_THP_DISABLE = 41


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def die_with_parent(death_signal: signal.Signals = signal.SIGTERM) -> None:
    """Ask the kernel to signal this process when its parent dies (a child-side call: preexec or initializer)."""
    # If the parent dies, even by SIGKILL, the kernel sends the signal: no orphan keeps running.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, death_signal, 0, 0, 0)


def without_huge_pages() -> bool:
    """Turn transparent huge pages off for this process and every child it starts from now on; False where the
    kernel refuses (older than 3.15, or a sandbox that filters prctl)."""
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0)) == 0


def spawn(
    args: Sequence[str],
    *,
    stdin: IO[bytes] | int | None = None,
    stdout: IO[bytes] | int | None = subprocess.DEVNULL,
    stderr: IO[bytes] | int | None = subprocess.STDOUT,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    death_signal: signal.Signals = signal.SIGTERM,
) -> subprocess.Popen[bytes]:
    """Start a child in its own process group that receives ``death_signal`` (SIGINT for a child that ignores
    SIGTERM) when this process dies."""
    # The parent-death signal is set by util-linux's setpriv, which then execs the child: a preexec_fn would make
    # Python fork() instead of vfork(), and a fork() runs gRPC's fork handlers (pyspark's Spark Connect client
    # loads gRPC), which abort the child now and then before it reaches exec.
    setpriv = shutil.which("setpriv")
    command = [setpriv, "--pdeathsig", death_signal.name.removeprefix("SIG"), "--", *args] if setpriv else list(args)
    process = subprocess.Popen(
        command,
        stdin=stdin,  # PIPE for children that exit at EOF on stdin: a second way to never outlive us
        stdout=stdout,
        stderr=stderr,
        env=dict(env) if env is not None else None,
        cwd=cwd,
        start_new_session=True,  # Ctrl-C in a terminal reaches us, and we stop the child's whole group
        preexec_fn=None if setpriv else functools.partial(die_with_parent, death_signal),  # noqa: PLW1509 (prctl only)
    )
    if setpriv:
        _await_exec(process, setpriv)
    return process


def _await_exec(process: subprocess.Popen[bytes], setpriv: str, timeout_s: float = 10.0) -> None:
    """Return once setpriv has set the parent-death signal and exec'd the child (or the child ended): if we died
    before that, the signal would be armed after our death, and never sent."""
    # The child's command line is ours until it execs setpriv, then setpriv's, then the child's own (a script's
    # shows its interpreter first): only the last means the signal is armed. Checking "not setpriv's" alone
    # returned early, before the first exec, on a loaded machine.
    cmdline = Path(f"/proc/{process.pid}/cmdline")
    ours = Path("/proc/self/cmdline").read_bytes()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        try:
            now = cmdline.read_bytes()
        except OSError:  # gone already
            return
        if now and now != ours and now.split(b"\0", 1)[0] != setpriv.encode():
            return
        time.sleep(0.001)  # setpriv execs within a millisecond or two: a short poll, not a synchronisation


def stop_group(process: subprocess.Popen[Any], timeout_s: float = 20.0, sig: int = signal.SIGTERM) -> int:
    """Signal the child's process group, wait, then SIGKILL what is left; return the exit status."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, sig)
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            pass
        except ProcessLookupError:
            process.wait()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # leftovers of the group (grandchildren) go too
    return process.wait()


class _HiddenMain:
    """What the outermost open main_script_hidden took from ``__main__``, and how many are open."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open = 0
        self.module: Any = None
        self.taken: dict[str, Any] = {}
        self.spec: Any = None


_hidden_main = _HiddenMain()


@contextlib.contextmanager
def main_script_hidden() -> Iterator[None]:
    """While open, a spawned child does not re-run the parent's ``__main__`` (multiprocessing does, for a main with
    a file or a module name): for a benchmark script or Airflow's task runner that means seconds of imports the
    children never use, or a runner that refuses to start without its database. Threads may overlap: the first to
    open hides ``__file__`` and ``__spec__``, the last to close puts them back."""
    hidden = _hidden_main
    with hidden.lock:
        if hidden.open == 0:
            hidden.module = main = sys.modules["__main__"]
            hidden.taken = {k: main.__dict__.pop(k) for k in ("__file__",) if k in main.__dict__}
            hidden.spec = getattr(main, "__spec__", None)
            main.__spec__ = None
        hidden.open += 1
    try:
        yield
    finally:
        with hidden.lock:
            hidden.open -= 1
            if hidden.open == 0:
                hidden.module.__dict__.update(hidden.taken)
                hidden.module.__spec__ = hidden.spec
                hidden.module, hidden.taken, hidden.spec = None, {}, None
