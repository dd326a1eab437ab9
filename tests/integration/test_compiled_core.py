"""The mypyc build of the planner core (make core): the same decisions as its sources, and never loaded stale.

Both builds run here in copies of assignor/. The compiled copy takes the tree's own build when it is current (make
test builds it first: `make core`, ~40 s, is not repeated) and compiles the copy itself otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from assignor.native import DIGEST_FILE, STAT_FILE, compiled_extensions, digest_record, source_digests
from jobs.local.compile_core import built_files

ROOT = Path(__file__).resolve().parents[2]
SEEDS = 12


def _copy_sources(root: Path) -> Path:
    shutil.copytree(
        ROOT / "assignor",
        root / "assignor",
        ignore=shutil.ignore_patterns("*.so", "compiled.sha256", "compiled.stat", "__pycache__", "java"),
    )
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


def _run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Python with ``root``'s assignor ahead of the project's (tests and bench still come from the project)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(root), str(ROOT))), "PYTHONHASHSEED": "0"}
    return subprocess.run(
        [sys.executable, "-W", "default", *args],
        check=False,
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def _corpus(root: Path) -> tuple[dict[str, str], list[str]]:
    done = _run(root, "-m", "tests.support.plan_corpus", str(SEEDS))
    assert done.returncode == 0, done.stderr
    header, *records = done.stdout.splitlines()
    return json.loads(header), records


def _tree_build_is_current() -> bool:
    """The tree's compiled core exists and its record matches its sources (what assignor.native checks too)."""
    package = ROOT / "assignor"
    recorded = (package / DIGEST_FILE).read_text() if (package / DIGEST_FILE).is_file() else ""
    return bool(compiled_extensions(package)) and recorded == digest_record(source_digests(package))


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = _copy_sources(tmp_path_factory.mktemp("compiled"))
    if _tree_build_is_current():
        # The stat record is left behind: the copies' times differ, so the copy is checked by its digests.
        for built in built_files(ROOT):
            if built.name != STAT_FILE:
                shutil.copy2(built, root / "assignor" / built.name)
        return root
    done = subprocess.run(
        [sys.executable, "-m", "jobs.local.compile_core", "--root", str(root)],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return root


def test_the_compiled_core_decides_exactly_as_its_sources(compiled: Path, tmp_path: Path) -> None:
    pure = _copy_sources(tmp_path / "pure")
    compiled_header, compiled_records = _corpus(compiled)
    pure_header, pure_records = _corpus(pure)
    assert compiled_header["core"] == "COMPILED" and compiled_header["flow"].endswith(".so")
    assert pure_header["core"] == "PURE" and pure_header["flow"].endswith("flow.py")
    assert len(compiled_records) > 600
    differing = [(c, p) for c, p in zip(compiled_records, pure_records, strict=True) if c != p]
    assert differing == []


def test_an_edited_source_runs_as_python_and_the_warning_names_it(compiled: Path, tmp_path: Path) -> None:
    edited = tmp_path / "edited"
    shutil.copytree(compiled, edited)
    with (edited / "assignor" / "flow.py").open("a") as source:
        source.write("\n# edited after the build\n")
    done = _run(
        edited,
        "-c",
        "import assignor, assignor.flow, assignor.target; "
        "print(assignor.CORE_BUILD.name, assignor.flow.__file__, assignor.target.__file__)",
    )
    assert done.returncode == 0, done.stderr
    build, flow, target = done.stdout.split()
    # target.py itself is unchanged, but its compiled code calls the compiled flow directly: neither may load.
    assert (build, Path(flow).name, Path(target).name) == ("STALE", "flow.py", "target.py")
    assert "older than flow.py" in done.stderr and "make core" in done.stderr
