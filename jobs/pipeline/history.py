"""Stage 8a, history: who held a task of a group at a time (or a Delta version), and through which plan."""

from __future__ import annotations

from datetime import UTC, datetime

from pyspark.sql import DataFrame
from pyspark.sql import functions as sf

from assignor.protocol.bounded import INT64_MAX, OutOfBounds, parse_int
from jobs.lakehouse.lake import Lake
from jobs.pipeline.stage import StageInputError

OWNER_COLUMNS = ["task_id", "role", "process_id", "plan_id", "source", "event_time"]


def parse_as_of(text: str) -> int:
    """Epoch milliseconds from digits (epoch ms) or an ISO 8601 time (UTC when no offset is given)."""
    if text.isascii() and text.isdigit():  # str.isdigit alone takes other scripts' digits, which int() reads
        try:
            return parse_int(text, 0, INT64_MAX, "--as-of epoch milliseconds")
        except OutOfBounds as err:
            raise StageInputError(str(err)) from None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise StageInputError(f"--as-of must be epoch milliseconds or an ISO 8601 time, got {text!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def owners_at(history: DataFrame, group_id: str, task_id: str | None = None, as_of: int | None = None) -> DataFrame:
    """Who held the group's tasks at ``as_of`` (None: latest): per instance its last observed report, and the
    last published plan; each row says through which plan (OWNER_COLUMNS)."""
    rows = history.where(sf.col("group_id") == group_id)
    if as_of is not None:
        rows = rows.where(sf.col("event_time") <= as_of)
    observed = rows.where(sf.col("source") == "observed")
    last_report = observed.groupBy("process_id").agg(sf.max("event_time").alias("event_time"))
    held = observed.join(last_report, ["process_id", "event_time"])
    published = rows.where(sf.col("source") == "published")
    last_plan = published.agg(sf.max("event_time").alias("event_time"))
    planned = published.join(last_plan, "event_time")
    owners = held.select(*OWNER_COLUMNS).unionByName(planned.select(*OWNER_COLUMNS))
    if task_id is not None:
        owners = owners.where(sf.col("task_id") == task_id)
    return owners.orderBy("task_id", "source", "role", "process_id")


def run_history(
    lake: Lake, group_id: str, task_id: str | None = None, as_of: int | None = None, version: int | None = None
) -> DataFrame:
    """owners_at over assignment_history, optionally as the table was at a Delta version (time travel)."""
    if version is not None and not 0 <= version <= lake.version("assignment_history"):
        raise StageInputError(
            f"--version {version} does not exist: assignment_history is at version {lake.version('assignment_history')}"
        )
    return owners_at(lake.read("assignment_history", version=version), group_id, task_id, as_of)
