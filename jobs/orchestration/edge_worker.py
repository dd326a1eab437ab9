"""Airflow's Edge worker as the deployment runs it: ``python -m jobs.orchestration.edge_worker [--signer] [options]``.

The options are ``airflow edge worker``'s. Its PID file is removed before it starts: a container restarted after a
kill gives the new worker the PID the old one wrote, and the provider then refuses to start. With ``--signer`` it
serves the signer's queue only, through the guard of signer_worker.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

from jobs.orchestration.signer import SIGNER_QUEUE


def worker_argv(args: list[str]) -> list[str]:
    """The ``airflow`` command line for ``args`` (with ``--signer``: the signer queue, which may not be overridden)."""
    if "--signer" not in args:
        return ["airflow", "edge", "worker", *args]
    rest = [a for a in args if a != "--signer"]
    if any(a in ("-q", "--queues") or a.startswith("--queues=") for a in rest):
        raise SystemExit(f"the signer serves the queue {SIGNER_QUEUE!r} only; do not pass --queues")
    return ["airflow", "edge", "worker", "--queues", SIGNER_QUEUE, *rest]


def main(argv: list[str] | None = None) -> None:
    """Start the worker in this process (the container's main process, so a stop reaches it)."""
    args = sys.argv[1:] if argv is None else argv
    # The provider reads argv at import to tell a worker from other airflow commands: set it first.
    sys.argv = worker_argv(args)
    if "--signer" in args:
        from jobs.orchestration.signer_worker import guard_edge_worker  # noqa: PLC0415

        guard_edge_worker()
    from airflow.providers.edge3.cli.signalling import pid_file_path  # noqa: PLC0415

    pid_at = sys.argv[sys.argv.index("--pid") + 1] if "--pid" in sys.argv else None
    # Only one worker runs per container: a PID file found at start is the killed predecessor's.
    Path(pid_file_path(pid_at)).unlink(missing_ok=True)
    from airflow.__main__ import main as airflow_main  # noqa: PLC0415

    airflow_main()  # type: ignore[no-untyped-call]


if __name__ == "__main__":
    main()
