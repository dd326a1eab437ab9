"""Importing the light parts of the package (task ids, wire formats, the runtime) never loads the solvers' numerics."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import assignor

REPO = Path(__file__).resolve().parents[2]

# Run in a fresh interpreter: this test process has long since imported scipy through other tests.
_PROBE = """
import importlib, json, pkgutil, sys
import assignor, assignor.task, assignor.protocol, assignor.runtime
for package in (assignor.protocol, assignor.runtime):
    for module in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
        importlib.import_module(module.name)
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("scipy", "numpy"))))
"""


def _numeric_modules_after(probe: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout.splitlines()[-1])
    return loaded


def test_task_ids_wire_formats_and_runtime_load_no_scipy_or_numpy() -> None:
    assert _numeric_modules_after(_PROBE) == []


def test_planning_still_loads_the_solver_when_it_solves() -> None:
    # The counterpart: the probe above would see scipy if anything on those paths imported it.
    probe = (
        "import json, sys\n"
        "from assignor import AssignmentConfigs, ClientState, GroupState, TaskId, plan_group\n"
        "tasks = frozenset(TaskId(0, p) for p in range(4))\n"
        "group = GroupState([ClientState('a', capacity=2), ClientState('b')], tasks, frozenset(), {})\n"
        "plan_group(group, AssignmentConfigs())\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('scipy', 'numpy'))))\n"
    )
    assert "scipy.optimize" in _numeric_modules_after(probe)


def test_package_root_keeps_every_public_name() -> None:
    for name in assignor.__all__:
        assert getattr(assignor, name) is not None, name
    assert set(assignor.__all__) <= set(dir(assignor))
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = assignor.no_such_name
