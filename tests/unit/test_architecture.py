"""The layout's dependency rules (docs/design.md), read from the source's imports so a change that breaks one
fails here: dags → jobs → assignor; the assignor core and its protocol do no I/O; only entry points, the demo,
tests and benchmarks reach the product-on-one-machine (`jobs/local`); settings come from the environment only at
entry points."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Libraries that talk to the world: the pure parts must not import them.
IO_LIBRARIES = {
    "kafka", "socket", "subprocess", "sqlite3", "threading", "multiprocessing", "requests", "httpx", "urllib",
    "pyspark", "deltalake", "airflow", "shutil", "tempfile", "fcntl", "signal", "asyncio",
}  # fmt: skip
# Entry points: the only places below which no code reads the environment (besides what they start).
ENVIRONMENT_READERS = {
    "jobs/settings.py",  # the one typed settings object, built from RBP_ variables
    "jobs/cli/pipeline.py",  # entry point: quiets the embedded engine's Rust log before it starts
    "jobs/cli/operations.py",  # entry point: the same, for `status` reading plan steps from the lake
    "jobs/cli/signing.py",  # entry point: `kafka-acls --scram-user USER=ENV` reads the password from the named variable
    "jobs/lakehouse/engine.py",  # sets Sail's session timeout from its parameter (Sail reads only its env)
    "jobs/local/airflow.py",  # children inherit this process's environment
    "jobs/local/spark_connect.py",
    "jobs/local/fleet.py",
}


def _modules(folder: str) -> Iterator[Path]:
    yield from sorted((ROOT / folder).rglob("*.py"))


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside a function (lazy imports count)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _breaks(folder: str, forbidden: set[str], allowed: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """Modules under ``folder`` (outside ``allowed`` prefixes) importing a forbidden package, with what."""
    broken: dict[str, list[str]] = {}
    for path in _modules(folder):
        name = str(path.relative_to(ROOT))
        if name.startswith(allowed):
            continue
        bad = sorted(m for m in _imports(path) if m.split(".")[0] in forbidden or m in forbidden)
        if bad:
            broken[name] = bad
    return broken


def test_the_assignor_core_and_protocol_do_no_io() -> None:
    assert _breaks("assignor", IO_LIBRARIES, allowed=("assignor/runtime/", "assignor/java/")) == {}


def test_the_library_never_imports_the_product_around_it() -> None:
    assert _breaks("assignor", {"jobs", "dags", "tests", "bench"}) == {}


def test_the_product_never_imports_dags_tests_or_benchmarks() -> None:
    assert _breaks("jobs", {"dags", "tests", "bench"}) == {}


def test_only_entry_points_and_the_demo_reach_the_product_on_one_machine() -> None:
    users = {
        str(p.relative_to(ROOT))
        for p in _modules("jobs")
        if any(m == "jobs.local" or m.startswith("jobs.local.") for m in _imports(p))
    }
    outside = {u for u in users if not u.startswith(("jobs/local/", "jobs/demo/"))}
    # The command line is an entry point: its `broker`, `spark-connect`, `instance` and `fleet` commands run them.
    assert outside == {"jobs/cli/local.py", "jobs/cli/runtime.py"}


def test_dags_are_wiring_over_the_orchestration_layer() -> None:
    for path in _modules("dags"):
        product = {m for m in _imports(path) if m.split(".")[0] in {"jobs", "assignor"}}
        # A DAG is an entry point too: it may build the settings it passes down.
        assert all(m.startswith("jobs.orchestration") or m == "jobs.settings" for m in product), (path.name, product)


@pytest.mark.parametrize("folder", ["assignor", "jobs"])
def test_the_environment_is_read_only_at_entry_points(folder: str) -> None:
    readers = set()
    for path in _modules(folder):
        text = path.read_text()
        if "os.environ" in text or "getenv(" in text:
            readers.add(str(path.relative_to(ROOT)))
    assert readers <= ENVIRONMENT_READERS, readers - ENVIRONMENT_READERS


def _stage_modules() -> set[str]:
    """The pipeline's stage modules: those the stage registry (the composition root) takes a ``run_*`` from."""
    registry = ast.parse((ROOT / "jobs/pipeline/registry.py").read_text())
    return {
        node.module.removeprefix("jobs.pipeline.")
        for node in ast.walk(registry)
        if isinstance(node, ast.ImportFrom)
        and node.module
        and node.module.startswith("jobs.pipeline.")
        and any(alias.name.startswith("run_") for alias in node.names)
    }


def test_no_stage_imports_another_stage() -> None:
    stages = _stage_modules()
    assert {"extract", "plan", "baselines", "validate"} <= stages  # the registry is read as it is written
    crossing = {
        (stage, imported.removeprefix("jobs.pipeline."))
        for stage in stages
        for imported in _imports(ROOT / "jobs/pipeline" / f"{stage}.py")
        if imported.removeprefix("jobs.pipeline.") in stages - {stage}
    }
    # Shared pieces (group input, the plan record, the per-group runner, ...) live in modules of their own.
    assert crossing == set()


def test_the_demo_is_split_into_modules_of_under_200_lines() -> None:
    # One module per phase of the demo (issue 31): none grows back into a single long script.
    long = {p.name: n for p in (ROOT / "jobs" / "demo").glob("*.py") if (n := len(p.read_text().splitlines())) >= 200}
    assert not long, long
