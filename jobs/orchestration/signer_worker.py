"""The signer's guard: Airflow's Edge worker made to refuse every workload but the signing tasks.

Installed by ``python -m jobs.orchestration.edge_worker --signer`` in the one container holding the plan signing key.
A refused workload never starts: the worker reports it failed, with the reason in the task's log.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from jobs.orchestration.signer import signer_refusal


def workload_refusal(workload: Any) -> str | None:
    """signer_refusal for an Edge job's workload (Airflow's ExecuteTask); anything else is refused."""
    ti = getattr(workload, "ti", None)
    if ti is None:
        return f"the signer runs task workloads only, not {type(workload).__name__}"
    bundle = getattr(workload, "bundle_info", None)
    return signer_refusal(ti.dag_id, ti.task_id, str(workload.dag_rel_path), getattr(bundle, "name", None))


def _refused(reason: str) -> tuple[subprocess.Popen[bytes], Path]:
    """A process that only reports the refusal and fails, in the shape the Edge worker monitors."""
    with tempfile.NamedTemporaryFile(prefix="rbp-signer-refused-", delete=False) as err:
        path = Path(err.name)
        process = subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.exit('refused by the signer: ' + sys.argv[1])", reason],
            stderr=err,
            start_new_session=True,
        )
    return process, path


def guard_edge_worker() -> None:
    """Wrap the Edge worker's job launch with the refusal check (the provider offers no hook for it)."""
    from airflow.providers.edge3.cli.dataclasses import Job  # noqa: PLC0415 (only in the signer's container)
    from airflow.providers.edge3.cli.worker import EdgeWorker  # noqa: PLC0415

    launch = EdgeWorker._launch_job

    def _launch_job(self: EdgeWorker, edge_job: Any, workload: Any, logfile: Path) -> Job:
        reason = workload_refusal(workload)
        if reason is None:
            return launch(self, edge_job, workload, logfile)
        process, path = _refused(reason)
        return Job(edge_job, process, logfile, stderr_file_path=path)

    EdgeWorker._launch_job = _launch_job  # type: ignore[method-assign]
