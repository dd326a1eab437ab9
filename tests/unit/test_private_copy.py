"""The reference-app jar's private copy: one per folder and build, never a half-written file."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from jobs.local.jvm import private_copy


def test_fleets_in_one_folder_share_one_copy_and_a_rebuild_gets_its_own(tmp_path: Path) -> None:
    source = tmp_path / "build" / "app.jar"
    source.parent.mkdir()
    source.write_bytes(b"first build")
    shared = tmp_path / "fleets" / ".jars"

    first, again = private_copy(source, shared), private_copy(source, shared)
    assert first == again and first.read_bytes() == b"first build"
    assert [p.name for p in shared.iterdir()] == [first.name], "one copy, no partial file left"

    source.write_bytes(b"second build, rewritten in place")
    stat = source.stat()
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # a rebuild within the clock's tick
    rebuilt = private_copy(source, shared)
    assert rebuilt != first and rebuilt.read_bytes() == b"second build, rewritten in place"
    assert first.read_bytes() == b"first build", "JVMs started on the first copy keep reading it"


def test_writers_at_once_all_get_the_whole_copy_and_leave_no_partial_file(tmp_path: Path) -> None:
    source = tmp_path / "app.jar"
    source.write_bytes(os.urandom(4_000_000))
    shared = tmp_path / ".jars"
    with ThreadPoolExecutor(8) as pool:
        copies = list(pool.map(lambda _: private_copy(source, shared), range(8)))
    assert len(set(copies)) == 1 and copies[0].read_bytes() == source.read_bytes()
    assert [p.name for p in shared.iterdir()] == [copies[0].name]
