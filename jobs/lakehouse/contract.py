"""A lake checked against its contract, schemas/tables: read with delta-rs alone (no engine), so it runs wherever
the lake is mounted, e.g. in a deployment's container after a night: `python -m jobs.lakehouse.contract LAKE_ROOT`."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.schema import ArrayType, MapType, PrimitiveType

from jobs.lakehouse.lake import delta_type
from jobs.lakehouse.tables import TableSchema, table_names, table_schema

MAX_SHOWN = 3  # keys of duplicated rows named per table: enough to find them, short enough to read


@dataclass(frozen=True)
class TableCheck:
    """One table's outcome: its Delta version and row count, and every way it breaks the contract."""

    name: str
    version: int
    rows: int
    problems: tuple[str, ...]


@dataclass(frozen=True)
class LakeCheck:
    """Every table of a lake that exists, checked; ``absent``: schema files with no table under the root."""

    tables: tuple[TableCheck, ...]
    absent: tuple[str, ...] = field(default_factory=tuple)

    @property
    def problems(self) -> dict[str, tuple[str, ...]]:
        return {t.name: t.problems for t in self.tables if t.problems}


def type_name(kind: PrimitiveType | MapType | ArrayType | object) -> str:
    """A Delta type as one comparable name (``map<string,long>``); nullability of elements is not part of it,
    because Spark and delta-rs write it differently for the same column."""
    if isinstance(kind, ArrayType):
        return f"array<{type_name(kind.element_type)}>"
    if isinstance(kind, MapType):
        return f"map<{type_name(kind.key_type)},{type_name(kind.value_type)}>"
    if isinstance(kind, PrimitiveType):
        return str(kind.type)
    return repr(kind)


def check_table(path: Path, schema: TableSchema) -> TableCheck:
    """The Delta table at ``path`` against ``schema``: the same columns with the same types, no null in a column
    the contract says is never null, no two rows with the same key."""
    table = DeltaTable(str(path))
    present = {f.name: type_name(f.type) for f in table.schema().fields}
    problems = []
    for column in schema.columns:
        expected = type_name(delta_type(column.type))
        if column.name not in present:
            problems.append(f"column {column.name} ({column.type}) is missing")
        elif present[column.name] != expected:
            problems.append(f"column {column.name} is {present[column.name]}, the contract says {expected}")
    extra = sorted(set(present) - set(schema.column_names))
    if extra:
        problems.append(f"columns outside the contract: {', '.join(extra)}")
    readable = [c for c in schema.column_names if c in present]
    data = table.to_pyarrow_table(columns=readable)
    for column in schema.columns:
        if not column.nullable and column.name in present and (nulls := data.column(column.name).null_count):
            problems.append(f"column {column.name} is never null by contract, {nulls} row(s) have null")
    keys = [k for k in schema.keys if k in present]
    if keys and data.num_rows:
        counted = data.group_by(keys).aggregate([([], "count_all")])
        repeated = counted.filter(pc.greater(counted.column("count_all"), 1))
        if repeated.num_rows:
            shown = [tuple(row[k] for k in keys) for row in repeated.slice(0, MAX_SHOWN).to_pylist()]
            problems.append(f"{repeated.num_rows} key(s) on more than one row ({', '.join(keys)}), e.g. {shown}")
    return TableCheck(schema.name, table.version(), data.num_rows, tuple(problems))


def check_lake(root: Path, names: Iterable[str] | None = None) -> LakeCheck:
    """Every table under ``root`` that has a schema file (or only ``names``), checked against its schema."""
    wanted = sorted(names) if names is not None else sorted(table_names())
    existing = [n for n in wanted if (root / n / "_delta_log").is_dir()]
    checks = tuple(check_table(root / n, table_schema(n)) for n in existing)
    return LakeCheck(checks, tuple(n for n in wanted if n not in existing))


def summary(check: LakeCheck) -> Mapping[str, object]:
    """The outcome as JSON-ready data: per table its version, rows and problems; the absent tables."""
    return {
        "tables": {t.name: {"version": t.version, "rows": t.rows, "problems": list(t.problems)} for t in check.tables},
        "absent": list(check.absent),
    }


def main(argv: list[str] | None = None) -> int:
    """Check a lake against schemas/tables; print the outcome as JSON; exit 1 if a table breaks the contract."""
    parser = argparse.ArgumentParser(prog="python -m jobs.lakehouse.contract", description=main.__doc__)
    parser.add_argument("root", type=Path, help="the lake root (RBP_LAKE_ROOT)")
    parser.add_argument("--table", action="append", help="only this table (repeatable; default: every schema file)")
    args = parser.parse_args(argv)
    if not args.root.is_dir():
        parser.error(f"no lake at {args.root}: not a directory")
    check = check_lake(args.root, args.table)
    print(json.dumps(summary(check), sort_keys=True), flush=True)
    return 1 if check.problems else 0


if __name__ == "__main__":
    sys.exit(main())
