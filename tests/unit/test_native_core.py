"""assignor.native's choice of build, on a package folder made for the test (no compiler involved)."""

from __future__ import annotations

import ast
import importlib.machinery
import os
import shutil
import sys
from pathlib import Path

import pytest

from assignor import native
from assignor.native import (
    COMPILED_MODULES,
    DIGEST_FILE,
    STAT_FILE,
    CoreBuild,
    digest_record,
    select_build,
    source_digests,
    source_stats,
)

PACKAGE = Path(native.__file__).parent


@pytest.fixture
def package(tmp_path: Path) -> Path:
    folder = tmp_path / "core"
    folder.mkdir()
    for name in COMPILED_MODULES:
        shutil.copy(PACKAGE / f"{name}.py", folder)
    return folder


def _fake_extension(folder: Path, name: str) -> None:
    (folder / f"{name}{importlib.machinery.EXTENSION_SUFFIXES[0]}").write_bytes(b"")


def _select(folder: Path) -> CoreBuild:
    before = list(sys.meta_path)
    try:
        return select_build("rbp_test_core", folder)
    finally:
        sys.meta_path[:] = before


def test_sources_alone_are_the_pure_build(package: Path) -> None:
    assert _select(package) is CoreBuild.PURE


def test_a_build_recorded_from_these_sources_loads(package: Path) -> None:
    _fake_extension(package, "flow")
    (package / DIGEST_FILE).write_text(digest_record(source_digests(package)))
    assert _select(package) is CoreBuild.COMPILED


@pytest.mark.parametrize("record", ["edited", "missing", "unreadable"])
def test_a_build_whose_record_differs_falls_back_to_the_sources(package: Path, record: str) -> None:
    _fake_extension(package, "flow")
    if record == "edited":
        (package / DIGEST_FILE).write_text(digest_record(source_digests(package)))
        with (package / "standby.py").open("a") as source:
            source.write("\n# edited\n")
    elif record == "unreadable":
        (package / DIGEST_FILE).mkdir()
    with pytest.warns(RuntimeWarning, match="make core") as warned:
        assert _select(package) is CoreBuild.STALE
    if record == "edited":
        assert "older than standby.py" in str(warned[0].message)


def _record_build(folder: Path) -> None:
    """What make core leaves: an extension and both records of the sources it was built from."""
    _fake_extension(folder, "flow")
    (folder / DIGEST_FILE).write_text(digest_record(source_digests(folder)))
    (folder / STAT_FILE).write_text(digest_record(source_stats(folder)))


def test_sources_as_built_load_the_build_without_being_read(package: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _record_build(package)

    def no_hashing(package_dir: Path) -> dict[str, str]:
        raise AssertionError("import hashed the sources although their status matched the build's record")

    monkeypatch.setattr(native, "source_digests", no_hashing)
    assert _select(package) is CoreBuild.COMPILED


def test_a_source_touched_but_unchanged_keeps_the_build(package: Path) -> None:
    _record_build(package)
    (package / "standby.py").write_bytes((package / "standby.py").read_bytes())  # a new modification time
    assert _select(package) is CoreBuild.COMPILED


def test_a_source_edited_after_the_build_is_never_run_compiled(package: Path) -> None:
    _record_build(package)
    with (package / "honor.py").open("a") as source:
        source.write("\n# edited\n")
    with pytest.warns(RuntimeWarning, match="older than honor.py"):
        assert _select(package) is CoreBuild.STALE


def test_a_same_size_edit_with_its_modification_time_set_back_is_never_run_compiled(package: Path) -> None:
    _record_build(package)
    source = package / "honor.py"
    before, text = source.stat(), source.read_bytes()
    source.write_bytes(text.replace(b"def ", b"def_", 1))  # the same size, other content
    os.utime(source, ns=(before.st_atime_ns, before.st_mtime_ns))  # as cp -p, tar or touch -r would leave it
    assert source.stat().st_size == before.st_size and source.stat().st_mtime_ns == before.st_mtime_ns
    with pytest.warns(RuntimeWarning, match="older than honor.py"):
        assert _select(package) is CoreBuild.STALE


def test_the_record_is_sha256sum_output(package: Path) -> None:
    text = digest_record(source_digests(package))
    lines = text.splitlines()
    assert len(lines) == len(COMPILED_MODULES)
    assert all(len(line.split("  ")[0]) == 64 and line.endswith(".py") for line in lines)


def test_compiled_modules_use_no_decorator_that_needs_an_instance_dict() -> None:
    # mypyc's classes have no __dict__: functools.cached_property would recompute on every read there, silently.
    needing = {"cached_property", "lru_cache", "cache"}
    found = []
    for name in COMPILED_MODULES:
        tree = ast.parse((PACKAGE / f"{name}.py").read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for decorator in node.decorator_list:
                    target = decorator.func if isinstance(decorator, ast.Call) else decorator
                    label = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                    if label in needing:
                        found.append(f"{name}.py:{node.lineno} {label}")
    assert found == []
