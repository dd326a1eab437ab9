"""The formats every part reads: JSON Schemas of records, Delta table schemas, GX suites; shipped as package data."""

from __future__ import annotations

import json
from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import Any


def schema_file(relative: str) -> Traversable:
    """A file or folder of this package, e.g. `schema_file("tables")` or `schema_file("plan.schema.json")`."""
    return files(__name__).joinpath(relative)


def read_json(relative: str) -> Any:
    """The parsed JSON of one file of this package."""
    return json.loads(schema_file(relative).read_text(encoding="utf-8"))


def json_files(folder: str) -> list[Traversable]:
    """The `.json` files of one folder of this package, sorted by name."""
    return sorted((f for f in schema_file(folder).iterdir() if f.name.endswith(".json")), key=lambda f: f.name)
