"""Delta table schemas, read from schemas/tables/<name>.schema.json (the single source of truth for columns)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from schemas import json_files, read_json, schema_file


@dataclass(frozen=True)
class Column:
    """One column: Spark SQL type name, whether nulls are allowed, and the stage that fills it when the table names
    one (``written_by``: plans' planner columns, which the plan stage's record holds)."""

    name: str
    type: str
    nullable: bool
    written_by: str | None = None


@dataclass(frozen=True)
class TableSchema:
    """A table's columns and the keys its MERGE matches on."""

    name: str
    keys: tuple[str, ...]
    columns: tuple[Column, ...]

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def ddl(self) -> str:
        """The schema as a Spark DDL string, e.g. ``"plan_id string, step int"``."""
        return ", ".join(f"`{c.name}` {c.type}" for c in self.columns)

    def written_by(self, stage: str) -> tuple[str, ...]:
        """The columns the schema file marks ``"written_by": stage``, in table order."""
        return tuple(c.name for c in self.columns if c.written_by == stage)

    def column(self, name: str) -> Column:
        """One column; KeyError naming the table."""
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"table {self.name} has no column {name!r}")

    def select_ddl(self, names: Sequence[str]) -> str:
        """Some of the columns, in the given order, as a Spark DDL string."""
        return ", ".join(f"`{n}` {self.column(n).type}" for n in names)

    def struct_ddl(self, names: Sequence[str]) -> str:
        """Some of the columns as the fields of a Spark struct type, e.g. ``"struct<step: int, role: string>"``."""
        return "struct<" + ", ".join(f"{n}: {self.column(n).type}" for n in names) + ">"


class UnknownTable(KeyError):
    """A table name with no schema file."""


@cache
def table_schema(name: str) -> TableSchema:
    """The schema of a lake table; UnknownTable names the missing file."""
    path = f"tables/{name}.schema.json"
    if not schema_file(path).is_file():
        raise UnknownTable(f"no table schema schemas/{path}")
    doc = read_json(path)
    columns = tuple(Column(c["name"], c["type"], bool(c["nullable"]), c.get("written_by")) for c in doc["columns"])
    return TableSchema(name=doc["table"], keys=tuple(doc["keys"]), columns=columns)


def table_names() -> list[str]:
    """Every table with a schema file."""
    return [f.name.removesuffix(".schema.json") for f in json_files("tables") if f.name.endswith(".schema.json")]
