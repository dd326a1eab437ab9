"""``make core``: compile the planner core with mypyc, in place, and record the sources it was built from.

The same typed sources, compiled to C extensions beside them: plan_group runs 1.2-1.5x as fast with the same
results. ``assignor.native`` loads the build only while the record matches the sources.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.machinery
import sys
import tempfile
import warnings
from pathlib import Path

from mypyc.build import mypycify
from setuptools import setup

from assignor.native import (
    COMPILED_MODULES,
    DIGEST_FILE,
    STAT_FILE,
    compiled_extensions,
    digest_record,
    source_digests,
    source_stats,
)

ROOT = Path(__file__).resolve().parents[2]
# mypyc puts the modules' shared code in one extension named after the group: assignor/core__mypyc, inside the
# package, so every process that finds assignor finds it too.
GROUP = "assignor.core"


def built_files(root: Path) -> list[Path]:
    """Every file a build leaves in the tree: the modules' extensions, the group's runtime and the record."""
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    package = root / "assignor"
    found = compiled_extensions(package)
    found += [p for p in package.iterdir() if p.name.startswith("core__mypyc.") and p.name.endswith(suffixes)]
    return found + [p for p in (package / DIGEST_FILE, package / STAT_FILE) if p.exists()]


def clean(root: Path) -> None:
    """Remove a build, so the package runs its sources."""
    for path in built_files(root):
        path.unlink()


def build(root: Path) -> None:
    """Compile COMPILED_MODULES under ``root`` in place and write the record last, so a failed build loads nothing."""
    clean(root)
    stats, digests = source_stats(root / "assignor"), source_digests(root / "assignor")
    with (
        tempfile.TemporaryDirectory(prefix="rbp-mypyc-") as scratch,
        contextlib.chdir(root),
        warnings.catch_warnings(),
    ):
        # setuptools reads pyproject.toml's [tool.setuptools] here too and calls that support beta; it is not used.
        warnings.simplefilter("ignore")
        # mypyc reads the project's mypy settings from pyproject.toml in the working directory.
        modules = mypycify([f"assignor/{name}.py" for name in COMPILED_MODULES], opt_level="3", group_name=GROUP)
        setup(
            name="assignor-core",
            ext_modules=modules,
            script_args=["--quiet", "build_ext", "--inplace", "--build-temp", scratch, "--build-lib", scratch],
        )
    if source_digests(root / "assignor") != digests or source_stats(root / "assignor") != stats:
        clean(root)
        raise SystemExit("compile_core: sources changed while compiling; run it again")
    (root / "assignor" / DIGEST_FILE).write_text(digest_record(digests))
    (root / "assignor" / STAT_FILE).write_text(digest_record(stats))  # the same line format: <status>  <file>


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clean", action="store_true", help="remove the build instead")
    parser.add_argument("--root", type=Path, default=ROOT, help="the project to compile (default: this one)")
    args = parser.parse_args()
    if args.clean:
        clean(args.root)
    else:
        build(args.root)
        print(f"compiled {len(COMPILED_MODULES)} modules of assignor/ with mypyc", file=sys.stderr)


if __name__ == "__main__":
    main()
