"""The planner core's mypyc build: loaded only when it was compiled from the very sources beside it.

``make core`` (``jobs/local/compile_core.py``) compiles COMPILED_MODULES in place and records, per source, its
SHA-256 (DIGEST_FILE) and its size and change times (STAT_FILE). A compiled module shadows its ``.py`` file,
so an edited source would silently keep running the old build; the package's import compares the sources' file
status with the record (no file is read) and only where one differs hashes the sources: a source touched but
unchanged keeps the build, an edited one loads every core module from its source, with a warning.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from types import ModuleType

PACKAGE_DIR = Path(__file__).resolve().parent
DIGEST_FILE = "compiled.sha256"
STAT_FILE = "compiled.stat"
# The algorithm modules. Records that validate outside input (state, configs, task, assignment) stay interpreted:
# their checks name the bad field, where compiled classes would raise a bare TypeError first; compiling them
# gains nothing measurable (plan_group's CPU time is the same within 3 %).
COMPILED_MODULES = (
    "balance", "baselines", "broker_sticky", "candidates", "catch_up", "end_state", "estimate", "flow",
    "high_availability", "honor", "invariants", "joint_target", "lags", "movement", "placement", "planner", "standby",
    "streams_broker", "target",
)  # fmt: skip


class CoreBuild(Enum):
    """Which code the core runs."""

    COMPILED = "compiled"
    PURE = "pure Python (not compiled)"
    STALE = "pure Python (the compiled build is older than its sources)"


def source_digests(package_dir: Path = PACKAGE_DIR) -> dict[str, str]:
    """SHA-256 of each compiled module's source, by file name (the record is ``sha256sum`` output)."""
    return {
        f"{name}.py": hashlib.sha256((package_dir / f"{name}.py").read_bytes()).hexdigest() for name in COMPILED_MODULES
    }


def digest_record(digests: dict[str, str]) -> str:
    """The record's text: one ``<sha256>  <file>`` line per module, so ``sha256sum -c`` can check it too."""
    return "".join(f"{digest}  {name}\n" for name, digest in sorted(digests.items()))


def source_stats(package_dir: Path = PACKAGE_DIR) -> dict[str, str]:
    """Size, modification and status-change time (ns) of each compiled module's source, by file name: a stat each.

    The status-change time too because tools set a modification time back (cp -p, tar, touch -r), never that one."""
    found = {}
    for name in COMPILED_MODULES:
        status = (package_dir / f"{name}.py").stat()
        found[f"{name}.py"] = f"{status.st_size}:{status.st_mtime_ns}:{status.st_ctime_ns}"
    return found


def _recorded(record: Path) -> dict[str, str]:
    """A record's ``<value>  <file>`` lines by file name; empty when it cannot be read."""
    try:
        lines = record.read_text().splitlines()
    except OSError:
        return {}
    return {name: value for value, _, name in (line.partition("  ") for line in lines)}


def compiled_extensions(package_dir: Path = PACKAGE_DIR) -> list[Path]:
    """The compiled modules' extension files in ``package_dir`` (none without a build)."""
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    return [p for p in package_dir.iterdir() if p.name.endswith(suffixes) and p.name.split(".")[0] in COMPILED_MODULES]


class _SourcesFirst(importlib.abc.MetaPathFinder):
    """Finds the core modules as their ``.py`` files, ahead of the compiled extensions beside them."""

    def __init__(self, package: str, package_dir: Path) -> None:
        self.package, self.package_dir = package, package_dir

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        package, _, name = fullname.rpartition(".")
        if package != self.package or name not in COMPILED_MODULES:
            return None
        return importlib.util.spec_from_file_location(fullname, self.package_dir / f"{name}.py")


def select_build(package: str = "assignor", package_dir: Path = PACKAGE_DIR) -> CoreBuild:
    """Decide, before any core module is imported, whether the compiled build may load; a stale one never does.

    All or nothing: compiled modules call each other directly, so one stale module means none may load.
    """
    if not compiled_extensions(package_dir):
        return CoreBuild.PURE
    if _recorded(package_dir / STAT_FILE) == source_stats(package_dir):
        return CoreBuild.COMPILED  # every source as it was built: nothing to hash
    recorded, current = _recorded(package_dir / DIGEST_FILE), source_digests(package_dir)
    if recorded == current:
        return CoreBuild.COMPILED
    changed = sorted(name for name in current if recorded.get(name) != current[name])
    sys.meta_path.insert(0, _SourcesFirst(package, package_dir))
    what = ", ".join(changed) or "its module list"
    warnings.warn(
        f"{package}: the compiled planner core is older than {what} in {package_dir}; running the pure-Python "
        "sources instead (slower, same results). Run `make core` to rebuild.",
        RuntimeWarning,
        stacklevel=2,
    )
    return CoreBuild.STALE
