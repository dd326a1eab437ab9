"""Lake retention: `rebalance-planner vacuum` sets the history and file windows on every table and vacuums within
them (delta-rs only, no engine)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from jobs.cli.main import main
from jobs.lakehouse.lake import RETENTION


def test_vacuum_sets_retention_and_keeps_files_inside_the_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    lake = tmp_path / "lake"
    table = lake / "snapshots"
    write_deltalake(str(table), pa.table({"snapshot_id": ["s1"], "captured_at": [1]}))
    write_deltalake(str(table), pa.table({"snapshot_id": ["s2"], "captured_at": [2]}), mode="overwrite")
    monkeypatch.setenv("RBP_LAKE_ROOT", str(lake))
    assert main(["vacuum", "--dry-run"]) == 0
    # The overwritten file is younger than the 7-day window: kept, so readers and time travel still find it.
    assert "snapshots: 0 file(s) would be removed" in capsys.readouterr().out
    configuration = DeltaTable(str(table)).metadata().configuration
    assert {k: configuration.get(k) for k in RETENTION} == RETENTION
    assert main(["vacuum"]) == 0
    assert sorted(DeltaTable(str(table), version=0).to_pyarrow_table().column("snapshot_id").to_pylist()) == ["s1"]
