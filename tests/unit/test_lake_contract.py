"""The lake's contract check (jobs.lakehouse.contract), on Delta tables written with delta-rs: a conforming lake
passes, and each way a table can break schemas/tables is named."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake
from deltalake.schema import Field, Schema

from jobs.lakehouse.contract import check_lake, check_table, main
from jobs.lakehouse.lake import delta_type
from jobs.lakehouse.tables import Column, TableSchema, table_names, table_schema

SCHEMA = TableSchema(
    name="t",
    keys=("id", "step"),
    columns=(
        Column("id", "string", nullable=False),
        Column("step", "int", nullable=False),
        Column("moves", "bigint", nullable=True),
        Column("tags", "map<string, bigint>", nullable=True),
    ),
)
GOOD = {
    "id": pa.array(["a", "a", "b"], pa.string()),
    "step": pa.array([0, 1, 0], pa.int32()),
    "moves": pa.array([1, None, 3], pa.int64()),
    "tags": pa.array([[("x", 1)], None, []], pa.map_(pa.string(), pa.int64())),
}


def write(path: Path, columns: dict[str, pa.Array]) -> Path:
    write_deltalake(str(path), pa.table(columns))
    return path


def test_a_table_as_the_contract_says_passes(tmp_path: Path) -> None:
    check = check_table(write(tmp_path / "t", GOOD), SCHEMA)
    assert check.problems == () and check.rows == 3 and check.version == 0


def test_a_repeated_key_and_a_null_in_a_never_null_column_are_named(tmp_path: Path) -> None:
    rows = {**GOOD, "id": pa.array(["a", "a", None], pa.string()), "step": pa.array([0, 0, 0], pa.int32())}
    problems = check_table(write(tmp_path / "t", rows), SCHEMA).problems
    assert "column id is never null by contract, 1 row(s) have null" in problems
    assert "1 key(s) on more than one row (id, step), e.g. [('a', 0)]" in problems


def test_a_missing_column_a_wrong_type_and_an_extra_column_are_named(tmp_path: Path) -> None:
    rows = {k: v for k, v in GOOD.items() if k != "tags"}
    rows |= {"moves": pa.array(["1", "2", "3"], pa.string()), "spare": pa.array([1, 2, 3], pa.int64())}
    problems = check_table(write(tmp_path / "t", rows), SCHEMA).problems
    assert problems == (
        "column moves is string, the contract says long",
        "column tags (map<string, bigint>) is missing",
        "columns outside the contract: spare",
    )


def test_every_table_as_the_lake_creates_it_passes_and_absent_ones_are_listed(tmp_path: Path) -> None:
    names = table_names()
    created, skipped = names[:-1], names[-1]
    for name in created:  # as Lake.ensure creates them: delta-rs, from the schema file, every column nullable
        fields = [Field(c.name, delta_type(c.type), nullable=True) for c in table_schema(name).columns]
        DeltaTable.create(str(tmp_path / name), Schema(fields))
    check = check_lake(tmp_path)
    assert check.problems == {} and check.absent == (skipped,)
    assert sorted(t.name for t in check.tables) == sorted(created)


def test_the_command_exits_1_on_a_broken_lake(tmp_path: Path) -> None:
    name = table_names()[0]
    write(tmp_path / name, {"not_a_column": pa.array([1], pa.int64())})
    assert main([str(tmp_path), "--table", name]) == 1
    assert main([str(tmp_path), "--table", table_names()[1]]) == 0  # absent only: nothing broken
