"""JVM classpaths from Maven Central: each is a pom in a package (this one's by default), fetched once with `mvn`."""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from importlib.resources import as_file, files
from pathlib import Path

from jobs.settings import env_jvm_dir

log = logging.getLogger(__name__)

# As Settings.jvm_dir: RBP_JVM_DIR, else RBP_HOME/jvm (read at import: these are default arguments, and the Makefile
# and tests set the variables before any import), so make, the CLI and the tests share one download.
DEFAULT_JVM_DIR = env_jvm_dir()
_STAMP = ".pom.sha256"


class JvmArtifactsError(RuntimeError):
    """Maven could not provide the jars (no `mvn`, no registry, or an unknown artifact)."""


def private_tmpdir(folder: Path) -> str:
    """The JVM option putting ``java.io.tmpdir`` in ``folder``, emptied first. Native libraries (lz4-java's) are
    unpacked there and removed only on a clean exit: a killed JVM would otherwise leave them in /tmp for good."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return f"-Djava.io.tmpdir={folder.resolve()}"


def private_copy(source: Path, folder: Path) -> Path:
    """A copy of ``source`` in ``folder``, named by its size and modification time and made once: every fleet under
    one folder shares it. A rebuild rewrites the jar in place (a hard link would change under running JVMs), and a copy
    per fleet cost ~100 MB each, which filled a CI machine's disk."""
    stat = source.stat()
    target = folder / f"{source.stem}-{stat.st_size}-{stat.st_mtime_ns}{source.suffix}"
    if not target.exists():
        folder.mkdir(parents=True, exist_ok=True)
        # A file of its own per writer (threads and processes may copy at once), renamed whole: a reader never sees
        # half a jar, and a copy that fails leaves nothing behind.
        handle, name = tempfile.mkstemp(prefix=f".{target.name}.", dir=folder)
        os.close(handle)
        try:
            shutil.copyfile(source, name)
            os.replace(name, target)
        finally:
            Path(name).unlink(missing_ok=True)
    return target


def _pom_text(name: str, package: str) -> str:
    return (files(package) / name / "pom.xml").read_text(encoding="utf-8")


def classpath_dir(name: str, jvm_dir: Path = DEFAULT_JVM_DIR, package: str = "jobs.local") -> Path:
    """The folder of jars for the pom `<package>/<name>/pom.xml` (e.g. jobs/local/kafka/pom.xml), fetched with mvn
    unless already current. Tests keep their own poms in tests.support."""
    target = jvm_dir / name
    digest = hashlib.sha256(_pom_text(name, package).encode()).hexdigest()
    stamp = target / _STAMP
    if stamp.is_file() and stamp.read_text(encoding="utf-8").strip() == digest:
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JvmArtifactsError(f"the {name} jars are not in {target} and `mvn` is not on PATH to fetch them")
    staging = jvm_dir / f".{name}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    print(f"fetching the {name} jars from Maven Central into {target} ...", file=sys.stderr, flush=True)
    with as_file(files(package) / name / "pom.xml") as pom:
        command = [mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies", "-DincludeScope=runtime"]
        done = subprocess.run(
            [*command, f"-DoutputDirectory={staging.resolve()}"], capture_output=True, text=True, check=False
        )
    if done.returncode != 0:
        tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-5:])
        raise JvmArtifactsError(f"mvn could not fetch the {name} jars (exit {done.returncode}): {tail}")
    (staging / _STAMP).write_text(digest + "\n", encoding="utf-8")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)  # readers see the old folder or the complete new one, never half a download
    log.info("%s jars ready in %s (%d files)", name, target, len(list(target.glob("*.jar"))))
    return target


def main(argv: list[str] | None = None) -> int:
    """`python -m jobs.local.jvm kafka [--jvm-dir DIR]`: what `make` runs to fetch the jars."""
    parser = argparse.ArgumentParser(prog="python -m jobs.local.jvm", description=main.__doc__)
    parser.add_argument("names", nargs="+", help="pom folders under jobs/local (e.g. kafka)")
    parser.add_argument("--jvm-dir", type=Path, default=DEFAULT_JVM_DIR)
    args = parser.parse_args(argv)
    try:
        for name in args.names:
            classpath_dir(name, args.jvm_dir)
    except JvmArtifactsError as err:
        print(f"jobs.local.jvm: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
