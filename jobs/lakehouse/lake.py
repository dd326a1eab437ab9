"""The Delta lake: create tables from their schema files, read them (also as of a version), MERGE into them."""

from __future__ import annotations

import logging
import shutil
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from functools import reduce
from pathlib import Path
from typing import Any

from deltalake import DeltaTable
from deltalake.schema import ArrayType, Field, MapType, PrimitiveType, Schema
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as sf

from jobs.lakehouse.tables import TableSchema, table_schema

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MergeOutcome:
    """What one MERGE changed; ``version`` is the table's version afterwards (unchanged when nothing was new)."""

    table: str
    inserted: int
    updated: int
    version: int

    @property
    def changed(self) -> bool:
        return self.inserted + self.updated > 0

    @classmethod
    def total(cls, table: str, parts: Sequence[MergeOutcome], version: int) -> MergeOutcome:
        """Several MERGEs into ``table`` (a stage's buckets) as one; ``version``: the table's after the last."""
        return cls(table, sum(p.inserted for p in parts), sum(p.updated for p in parts), version)


_PRIMITIVES = {"string": "string", "bigint": "long", "int": "integer", "boolean": "boolean", "double": "double"}


def delta_type(ddl: str) -> PrimitiveType | MapType | ArrayType:
    """A schema file's column type (Spark DDL) as delta-rs spells it."""
    ddl = ddl.replace(" ", "")
    if ddl.startswith("map<") and ddl.endswith(">"):
        key, value = ddl[4:-1].split(",", 1)
        return MapType(delta_type(key), delta_type(value), value_contains_null=True)
    if ddl.startswith("array<") and ddl.endswith(">"):
        return ArrayType(delta_type(ddl[6:-1]), contains_null=True)
    if ddl not in _PRIMITIVES:
        raise ValueError(f"column type {ddl!r} has no delta-rs equivalent here")
    return PrimitiveType(_PRIMITIVES[ddl])


def _keys_match(keys: Sequence[str], left: str, right: str) -> Column:
    # Null-safe: a null key (e.g. an observed row without a plan) must match itself, or re-runs would re-insert it.
    return reduce(lambda a, b: a & b, [sf.col(f"{left}.{k}").eqNullSafe(sf.col(f"{right}.{k}")) for k in keys])


class DuplicateKeys(ValueError):
    """One write holds two different rows for the same key: a bug upstream of the lake, never merged."""


def _sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def staged_copy(frame: DataFrame, path: Path, schema: str | None = None) -> DataFrame:
    """``frame`` written to ``path`` as Parquet and read back with ``schema`` (default: the frame's; an empty frame
    writes no file to take it from). Uncompressed: staging lives minutes, and compressing millions of rows costs
    CPU the stage needs."""
    frame.write.mode("overwrite").option("compression", "uncompressed").parquet(str(path))
    return frame.sparkSession.read.schema(schema or frame.schema).parquet(str(path))


@dataclass(frozen=True)
class Scope:
    """The part of a table one write's rows lie in: one snapshot, optionally only the groups from ``first``
    (inclusive) to ``before`` (exclusive; None: unbounded). A MERGE within a scope reads only that part of its
    target, so its cost follows the write, not the table's history or the rest of the fleet."""

    snapshot_id: str
    first: str | None = None
    before: str | None = None

    @property
    def columns(self) -> tuple[str, ...]:
        bounded = self.first is not None or self.before is not None
        return ("snapshot_id", "group_id") if bounded else ("snapshot_id",)

    def of(self, frame: DataFrame, alias: str | None = None) -> DataFrame:
        """``frame``'s rows inside the scope (``alias``: the columns' qualifier, if any)."""
        return frame.where(self.column(alias))

    def column(self, alias: str | None = None) -> Column:
        def col(name: str) -> Column:
            return sf.col(f"{alias}.{name}" if alias else name)

        inside = col("snapshot_id") == self.snapshot_id
        if self.first is not None:
            inside = inside & (col("group_id") >= self.first)
        if self.before is not None:
            inside = inside & (col("group_id") < self.before)
        return inside

    def sql(self, alias: str) -> str:
        """The scope as a SQL condition on ``alias``'s columns."""
        parts = [f"{alias}.`snapshot_id` = {_sql_string(self.snapshot_id)}"]
        if self.first is not None:
            parts.append(f"{alias}.`group_id` >= {_sql_string(self.first)}")
        if self.before is not None:
            parts.append(f"{alias}.`group_id` < {_sql_string(self.before)}")
        return " AND ".join(parts)


def _key_hash(keys: Sequence[str]) -> Column:
    """One 64-bit hash of a row's key columns (equal keys, nulls included, hash alike)."""
    return sf.xxhash64(*keys).alias("_rbp_key_hash")


class OutsideScope(ValueError):
    """A write within a scope holds rows outside it: a bug in the caller, never merged."""


_MATCHED = "_rbp_matched"  # marks the target's side of a MERGE's outer join: null where a source key is new


@dataclass(frozen=True)
class _Census:
    """What a MERGE's staged rows hold, counted in one Spark job: new and changed rows, whether a key may repeat and
    how many rows lie outside the write's scope (each was a query of its own, and queries are most of the cost)."""

    inserted: int
    updated: int
    maybe_repeated: bool  # two rows share a key's hash: the same key, or (rarely) two keys merge tells apart
    outside: int

    @classmethod
    def of(cls, staged: DataFrame, keys: Sequence[str], within: Scope | None) -> _Census:
        # Rows grouped by one 64-bit hash of their key, not by the key's columns: grouping a fleet's plan_assignments
        # (5 million rows at 10,000 groups) by five strings was most of the census. Equal keys hash alike, null keys
        # included, so a repeated key is never missed. A null scope test is not outside.
        out = sf.lit(0) if within is None else sf.when(~within.column(), 1).otherwise(0)
        per_key = staged.groupBy(_key_hash(keys)).agg(
            sf.count(sf.lit(1)).alias("n"),
            sf.sum(sf.when(sf.col("is_new"), 1).otherwise(0)).alias("new"),
            sf.sum(sf.when(sf.col("is_new"), 0).otherwise(1)).alias("old"),
            sf.sum(out).alias("out"),
        )
        row = per_key.agg(sf.max("n"), sf.sum("new"), sf.sum("old"), sf.sum("out")).collect()[0]
        most, new, old, outside = (int(v or 0) for v in row)  # an empty staging sums to nulls
        return cls(new, old, most > 1, outside)


# Idempotent writes (Delta's SetTransaction): every write of a table carries the application id below and, as its
# version, the table version it was computed from plus one. A write computed from the same table version by a
# killed attempt and by its retry is the same logical write: whichever commits second is skipped (the engine
# finds the id's version already committed) or refused (ConcurrentTransactionException), never applied twice.
TXN_APP_PREFIX = "rbp-lake/"
TXN_APP_ID_CONF = "spark.databricks.delta.write.txnAppId"
TXN_VERSION_CONF = "spark.databricks.delta.write.txnVersion"
# Retention, set on every table: how long the log keeps history (time travel, DESCRIBE HISTORY), how long files a
# commit removed stay for readers and VACUUM, and how long a write id is remembered (longer than any attempt runs).
RETENTION = {
    "delta.logRetentionDuration": "interval 30 days",
    "delta.deletedFileRetentionDuration": "interval 7 days",
    "delta.setTransactionRetentionDuration": "interval 7 days",
}
DEFAULT_STAGING_GRACE_S = 3_600.0


def retain(table: DeltaTable) -> None:
    """Set the retention properties (RETENTION) on ``table`` unless it has them."""
    present = table.metadata().configuration
    missing = {k: v for k, v in RETENTION.items() if present.get(k) != v}
    if missing:
        table.alter.set_table_properties(missing, raise_if_not_exists=False)


def vacuum(path: Path, dry_run: bool = False) -> list[str]:
    """VACUUM the Delta table at ``path`` within its retention (files older than
    delta.deletedFileRetentionDuration that no kept version reads) and drop log entries past
    delta.logRetentionDuration; the files removed (or that would be). Run under the lake's writer lock."""
    table = DeltaTable(str(path))
    retain(table)
    removed = table.vacuum(dry_run=dry_run, enforce_retention_duration=True)
    if not dry_run:
        table.cleanup_metadata()
    log.info("%s: vacuum %s %d file(s)", path.name, "would remove" if dry_run else "removed", len(removed))
    return list(removed)


def txn_app_id(name: str) -> str:
    """The idempotent-write application id of table ``name``."""
    return TXN_APP_PREFIX + name


class Lake:
    """Tables under one root directory, read and written through one Spark session."""

    STAGING = "_staging"  # intermediate files of a stage; a stage cut short leaves them, the next one clears them

    def __init__(self, spark: SparkSession, root: Path, staging_grace_s: float = DEFAULT_STAGING_GRACE_S) -> None:
        self.spark = spark
        self.root = Path(root).resolve()
        self.staging_grace_s = staging_grace_s

    def path(self, name: str) -> Path:
        return self.root / name

    def staging(self, kind: str) -> Path:
        """A fresh directory for a stage's intermediate files (the caller removes it)."""
        return self.root / self.STAGING / f"{kind}-{uuid.uuid4().hex}"

    def clear_staging(self) -> None:
        """Remove what stages cut short left behind, once older than ``staging_grace_s``; only while holding the
        writer lock. Younger files stay: a killed stage's MERGE may still be reading them in a remote engine, and
        deleting them under it could make it commit part of its rows (docs/operations.md, "The lake")."""
        staging = self.root / self.STAGING
        if not staging.is_dir():
            return
        cutoff = time.time() - self.staging_grace_s
        for entry in staging.iterdir():
            try:
                if entry.stat().st_mtime < cutoff:
                    shutil.rmtree(entry, ignore_errors=True)
            except FileNotFoundError:
                continue

    def delete(self, name: str, column: str, values: Sequence[str]) -> int:
        """Delete the rows whose ``column`` is one of ``values`` (one Delta commit, none when nothing matches);
        the number of rows deleted."""
        if not values or not self.exists(name):
            return 0
        present = self.read(name).where(sf.col(column).isin(list(values))).limit(1).count()
        if not present:
            return 0
        predicate = f"{column} IN ({', '.join(_sql_string(v) for v in sorted(set(values)))})"
        metrics = DeltaTable(str(self.path(name))).delete(predicate)
        deleted = int(metrics.get("num_deleted_rows", 0))
        log.info("%s: %d row(s) deleted where %s", name, deleted, predicate[:200])
        return deleted

    def exists(self, name: str) -> bool:
        return (self.path(name) / "_delta_log").is_dir()

    def ensure(self, name: str) -> tuple[TableSchema, int]:
        """Create the table, empty, from its schema file unless it exists; add columns the file gained since and
        the retention properties; the schema and the table's version afterwards (its log read once)."""
        schema = table_schema(name)
        if not self.exists(name):
            self.root.mkdir(parents=True, exist_ok=True)
            # delta-rs writes the first commit (protocol and schema, no files) itself: what the engine's empty
            # append wrote, without a Spark job (seconds each on Apache Spark, for every table a lake starts with).
            fields = [Field(c.name, delta_type(c.type), nullable=True) for c in schema.columns]  # DDL: all nullable
            DeltaTable.create(str(self.path(name)), Schema(fields), mode="ignore")
            log.info("created table %s", self.path(name))
        table = DeltaTable(str(self.path(name)))
        self._migrate(table, name, schema)
        retain(table)
        return schema, table.version()  # delta-rs moves the table to each commit it makes

    def _migrate(self, table: DeltaTable, name: str, schema: TableSchema) -> None:
        """Add the schema file's new columns to an existing table (old rows read them as null)."""
        present = {field.name for field in table.schema().fields}
        missing = [c for c in schema.columns if c.name not in present]
        if not missing:
            return
        required = [c.name for c in missing if not c.nullable]
        if required:
            raise ValueError(f"table {name} lacks required columns {required}: a new column must be nullable")
        table.alter.add_columns([Field(c.name, delta_type(c.type), nullable=True) for c in missing])
        log.info("table %s gained columns %s", name, ", ".join(c.name for c in missing))

    def read(self, name: str, snapshot_id: str | None = None, version: int | None = None) -> DataFrame:
        """The table's rows in schema column order, optionally one snapshot's, optionally as of a Delta version."""
        schema = table_schema(name)
        if not self.exists(name):  # reading creates nothing: an absent table reads as empty
            return self.spark.createDataFrame([], schema=schema.ddl)
        if version is None:
            self._migrate(DeltaTable(str(self.path(name))), name, schema)
        reader = self.spark.read.format("delta")
        if version is not None:
            reader = reader.option("versionAsOf", version)
        frame = reader.load(str(self.path(name))).select(*schema.column_names)
        return frame if snapshot_id is None else frame.where(sf.col("snapshot_id") == snapshot_id)

    def version(self, name: str) -> int:
        """The table's current Delta version (-1 when it does not exist)."""
        return DeltaTable(str(self.path(name))).version() if self.exists(name) else -1

    def history(self, name: str) -> list[dict[str, Any]]:
        """Delta commits, newest first (delta-rs: Sail has no DESCRIBE HISTORY)."""
        return DeltaTable(str(self.path(name))).history() if self.exists(name) else []

    def conform(self, name: str, rows: DataFrame) -> DataFrame:
        """``rows`` with exactly the table's columns, cast to its types; missing nullable columns become null."""
        schema = table_schema(name)
        present = set(rows.columns)
        missing = [c.name for c in schema.columns if c.name not in present and not c.nullable]
        if missing:
            raise ValueError(f"rows for table {name} lack required columns: {', '.join(missing)}")
        return rows.select(
            *[
                (sf.col(c.name) if c.name in present else sf.lit(None)).cast(c.type).alias(c.name)
                for c in schema.columns
            ]
        )

    def merge(
        self, name: str, rows: DataFrame, update: Sequence[str] = (), within: Scope | None = None
    ) -> MergeOutcome:
        """MERGE ``rows`` on the table's keys: insert new keys; for matched keys update ``update`` columns
        that differ. Only changed rows are written, so a re-run commits no new version; when all of them are new
        they are appended (one commit either way).

        ``within``: every row lies in this scope and so does every row of the table with one of their keys (true
        when the keys hold the scope's columns, and for plan ids, which name their snapshot and group): only that
        part of the table is read to find what changed, and the MERGE matches only there when the keys hold the
        scope's columns. OutsideScope, with nothing merged, for a new row outside it."""
        # What the rows are compared with, pinned: the write's id says which version it was computed from.
        schema, read_version = self.ensure(name)
        txn = (txn_app_id(name), read_version + 1)
        source = self.conform(name, rows).alias("s")
        target = self.read(name, version=read_version).alias("t")
        keys = schema.keys
        if within is not None:
            absent = [c for c in within.columns if c not in schema.column_names]
            if absent:
                raise ValueError(f"table {name} has no column {absent[0]!r}: it cannot be merged within {within}")
            target = within.of(self.read(name, version=read_version)).alias("t")
        if update:
            # One outer join finds both the new keys (no target row: the marker is null) and the changed rows,
            # instead of an anti join and an inner join each reading source and target.
            target = target.withColumn(_MATCHED, sf.lit(True)).alias("t")
            is_new = sf.col(f"t.{_MATCHED}").isNull()
            differs = reduce(lambda a, b: a | b, [~sf.col(f"s.{c}").eqNullSafe(sf.col(f"t.{c}")) for c in update])
            new = (
                source.join(target, _keys_match(keys, "s", "t"), "left")
                .where(is_new | differs)
                .select("s.*", is_new.alias("is_new"))
            )
        else:
            new = source.join(target, _keys_match(keys, "s", "t"), "left_anti").select(
                "s.*", sf.lit(True).alias("is_new")
            )
        # Materialize the source once: a MERGE whose source is recomputed against its own target misbehaves.
        work = self.staging(f"merge-{name}")
        staging = work / "rows"
        try:
            # An empty result writes no file, so the schema comes from the table, not from the files.
            staged = staged_copy(new, staging, f"{schema.ddl}, is_new boolean")
            census = _Census.of(staged, keys, within)
            if census.maybe_repeated and self._repeated_keys(staged, keys, sample=1):
                staged = self._without_copies(staged, staging, name, keys, f"{schema.ddl}, is_new boolean")
                census = _Census.of(staged, keys, within)
            if census.outside and within is not None:
                outside = staged.where(~within.column()).select(*keys).limit(3).collect()
                raise OutsideScope(
                    f"{name}: rows outside {within}, e.g. {[r.asDict() for r in outside]}; nothing was merged"
                )
            inserted, updated = census.inserted, census.updated
            if inserted or updated:
                self._commit(name, staged.drop("is_new"), keys, update, within, txn, append=not updated)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        outcome = MergeOutcome(name, inserted, updated, self.version(name))
        log.info("%s: %d inserted, %d updated, version %d", name, inserted, updated, outcome.version)
        return outcome

    def merge_nothing(self, name: str) -> MergeOutcome:
        """What ``merge`` of no rows does (the table made or migrated, nothing committed), without asking the
        engine: for callers holding their rows in memory, where an empty write would still cost Spark jobs."""
        _, version = self.ensure(name)
        return MergeOutcome(name, 0, 0, version)

    def _commit(
        self, name: str, staged: DataFrame, keys: Sequence[str], update: Sequence[str], within: Scope | None,
        txn: tuple[str, int], *, append: bool,
    ) -> None:  # fmt: skip
        """The engine-side write of the staged rows, one Delta commit carrying the idempotent-write id ``txn``."""
        app_id, txn_version = txn
        if append:
            # Every staged key is absent from the table (read just now; stages write under the lake's writer
            # lock): MERGE's NOT MATCHED INSERT would add exactly these rows, but join the whole table to find
            # that out again, as many rows as the table holds. One append commits the same rows.
            writer = staged.write.format("delta").mode("append")
            writer.option("txnAppId", app_id).option("txnVersion", str(txn_version)).save(str(self.path(name)))
            return
        view = f"rbp_merge_{uuid.uuid4().hex}"
        staged.createOrReplaceTempView(view)
        on = " AND ".join(f"t.`{k}` <=> s.`{k}`" for k in keys)
        if within is not None and set(within.columns) <= set(keys):
            on += " AND " + within.sql("t")  # lets the engine skip the table's files outside the scope
        sets = ", ".join(f"t.`{c}` = s.`{c}`" for c in update)
        matched = f"WHEN MATCHED THEN UPDATE SET {sets} " if update else ""
        # A MERGE takes its write id from the session (delta-spark); set for this statement only.
        self.spark.conf.set(TXN_APP_ID_CONF, app_id)
        self.spark.conf.set(TXN_VERSION_CONF, str(txn_version))
        try:
            self.spark.sql(
                f"MERGE INTO delta.`{self.path(name)}` AS t USING {view} AS s ON {on} "
                f"{matched}WHEN NOT MATCHED THEN INSERT *"
            ).collect()
        finally:
            self.spark.conf.unset(TXN_APP_ID_CONF)
            self.spark.conf.unset(TXN_VERSION_CONF)
            self.spark.catalog.dropTempView(view)

    @staticmethod
    def _repeated_keys(rows: DataFrame, keys: Sequence[str], sample: int = 3) -> list[dict[str, Any]]:
        """Up to ``sample`` keys that occur more than once in ``rows``."""
        repeated = rows.groupBy(*keys).count().where(sf.col("count") > 1).limit(sample).collect()
        return [{k: r[k] for k in keys} for r in repeated]

    def _without_copies(self, staged: DataFrame, staging: Path, name: str, keys: Sequence[str], ddl: str) -> DataFrame:
        """``staged`` with exact copies dropped (harmless: the same row twice); DuplicateKeys if a key still
        repeats, because two different rows for one key cannot both be right."""
        distinct = staging.with_name("distinct")
        staged = staged_copy(staged.dropDuplicates(), distinct, ddl)
        clashing = self._repeated_keys(staged, keys)
        if clashing:
            raise DuplicateKeys(
                f"{name}: one write holds different rows for the same key ({', '.join(keys)}), e.g. {clashing}; "
                "nothing was merged"
            )
        log.warning("%s: exact duplicate rows in one write were merged once", name)
        return staged
