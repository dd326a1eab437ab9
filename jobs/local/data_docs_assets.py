"""The Data Docs' styles and scripts (jobs.pipeline.data_docs_assets) from the npm registry with `npm pack`, each
tarball checked against its pinned sha512 before a file is taken: what `make data-docs-assets` runs."""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import logging
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path, PurePosixPath

from jobs.pipeline.data_docs_assets import PACKAGES, STAMP, NpmPackage, assets_current, manifest_digest

log = logging.getLogger(__name__)

NPM_TIMEOUT_S = 300
_LICENSES = ("LICENSE", "LICENSE.txt", "LICENSE.md", "package.json")  # package.json names the license if no file


class DataDocsAssetsError(RuntimeError):
    """npm could not provide a package, or a tarball is not the pinned one."""


def install(target: Path) -> Path:
    """Every pinned package's paths in ``target`` (``<name>@<version>/<path>``), fetched unless already current."""
    if assets_current(target):
        return target
    npm = shutil.which("npm")
    if npm is None:
        raise DataDocsAssetsError(f"the Data Docs assets are not in {target} and `npm` is not on PATH to fetch them")
    staging = target.parent / f".{target.name}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    (staging / ".tarballs").mkdir(parents=True)
    print(f"fetching the Data Docs assets from the npm registry into {target} ...", file=sys.stderr, flush=True)
    for package in PACKAGES:
        _unpack(_pack(npm, package, staging / ".tarballs"), package, staging / package.folder)
    shutil.rmtree(staging / ".tarballs")
    (staging / STAMP).write_text(manifest_digest() + "\n", encoding="utf-8")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)  # readers see the old folder or the complete new one
    log.info("Data Docs assets ready in %s (%d packages)", target, len(PACKAGES))
    return target


def _pack(npm: str, package: NpmPackage, into: Path) -> Path:
    """The package's tarball from the registry, refused unless its sha512 is the pinned one."""
    spec = f"{package.name}@{package.version}"
    try:  # a registry that stops answering must not hang `make test`
        done = subprocess.run(
            [npm, "pack", "--json", "--silent", "--pack-destination", str(into), spec],
            capture_output=True,
            text=True,
            check=False,
            timeout=NPM_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        raise DataDocsAssetsError(f"npm did not fetch {spec} within {NPM_TIMEOUT_S} s") from None
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        raise DataDocsAssetsError(f"npm could not fetch {spec} (exit {done.returncode}): {tail}")
    try:
        tarball = into / PurePosixPath(str(json.loads(done.stdout)[0]["filename"])).name
    except (ValueError, LookupError, TypeError) as err:
        raise DataDocsAssetsError(f"npm pack {spec} printed no tarball name: {done.stdout[:200]!r}") from err
    digest = "sha512-" + base64.b64encode(hashlib.sha512(tarball.read_bytes()).digest()).decode()
    if digest != package.integrity:
        raise DataDocsAssetsError(f"{spec}: the registry's tarball has {digest}, expected {package.integrity}")
    return tarball


def _unpack(tarball: Path, package: NpmPackage, folder: Path) -> None:
    """The package's listed paths and license file from its tarball (regular files only, names checked)."""
    wanted = [f"package/{p}" for p in package.paths]
    taken: set[str] = set()
    with tarfile.open(tarball, "r:gz") as archive:
        for member in archive.getmembers():
            name = PurePosixPath(member.name)
            inside = str(name.relative_to("package")) if name.parts[:1] == ("package",) else ""
            listed = member.name in wanted or any(p.endswith("/") and member.name.startswith(p) for p in wanted)
            if not member.isfile() or ".." in name.parts or not (listed or inside in _LICENSES):
                continue
            source = archive.extractfile(member)
            assert source is not None  # a regular file always has content
            (folder / inside).parent.mkdir(parents=True, exist_ok=True)
            (folder / inside).write_bytes(source.read())
            taken.add(member.name)
    missing = [w for w in wanted if not any(t == w or (w.endswith("/") and t.startswith(w)) for t in taken)]
    if missing:
        raise DataDocsAssetsError(f"{package.folder}: the tarball has no {', '.join(missing)}")


def main(argv: list[str] | None = None) -> int:
    """`python -m jobs.local.data_docs_assets DIR`: what `make data-docs-assets` runs."""
    parser = argparse.ArgumentParser(prog="python -m jobs.local.data_docs_assets", description=main.__doc__)
    parser.add_argument("target", type=Path, help="the assets folder (Settings.data_docs_assets_dir)")
    args = parser.parse_args(argv)
    try:
        install(args.target)
    except DataDocsAssetsError as err:
        print(f"jobs.local.data_docs_assets: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
