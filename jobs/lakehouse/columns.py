"""DataFrames from columns of Python values, through one Arrow table: thousands of rows built by a stage (verdicts,
settings) without the client's per-row conversion."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema


def arrow_schema(spark: SparkSession, ddl: str) -> pa.Schema:
    """A Spark DDL schema in Arrow form (the engine parses the DDL: one round trip)."""
    return to_arrow_schema(spark.createDataFrame([], ddl).schema)


def frame_of_columns(spark: SparkSession, columns: Mapping[str, Sequence[Any]], ddl: str) -> DataFrame:
    """A DataFrame of ``ddl``'s columns, each filled from the sequence ``columns`` holds under its name (all of one
    length). Spark Connect's createDataFrame on rows converts value by value in Python: ~4 µs a cell."""
    schema = arrow_schema(spark, ddl)
    missing = [name for name in schema.names if name not in columns]
    if missing:
        raise KeyError(f"no values for columns {missing} of {ddl!r}")
    table = pa.Table.from_arrays([pa.array(columns[f.name], type=f.type) for f in schema], schema=schema)
    return spark.createDataFrame(table)
