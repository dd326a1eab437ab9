"""frame_of_columns builds the same frame as createDataFrame on rows, on both engines: nulls, maps and booleans kept,
each column typed by the DDL, and a column without values named."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession

from jobs.lakehouse.columns import frame_of_columns

pytestmark = pytest.mark.engines

DDL = "id string, n bigint, ok boolean, sources map<string,string>, note string"


def test_columns_make_the_frame_rows_make(spark: SparkSession) -> None:
    rows = [
        ("a", 1, True, {"x": "default"}, None),
        ("b", None, False, {}, "changed"),
        ("c", 2**40, True, None, ""),
    ]
    columns: dict[str, list[Any]] = {
        "id": [r[0] for r in rows],
        "n": [r[1] for r in rows],
        "ok": [r[2] for r in rows],
        "sources": [None if r[3] is None else list(r[3].items()) for r in rows],
        "note": [r[4] for r in rows],
    }
    built = frame_of_columns(spark, columns, DDL)
    expected = spark.createDataFrame(rows, DDL)
    assert built.schema.simpleString() == expected.schema.simpleString()
    assert sorted(built.collect()) == sorted(expected.collect())


def test_a_column_without_values_is_named(spark: SparkSession) -> None:
    with pytest.raises(KeyError, match="note"):
        frame_of_columns(spark, {"id": ["a"], "n": [1], "ok": [True], "sources": [None]}, DDL)
