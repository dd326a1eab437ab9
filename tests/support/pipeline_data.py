"""In-memory bronze/silver frames built from assignor GroupStates, for pipeline tests on any Spark engine."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession

from assignor import GroupState
from jobs.lakehouse.tables import table_schema

SNAPSHOT = "s-test"


def report_rows(groups: Mapping[str, GroupState], snapshot_id: str = SNAPSHOT) -> list[tuple[object, ...]]:
    """member_reports rows (schema column order), one fresh report per client."""
    rows: list[tuple[object, ...]] = []
    for group_id, group in sorted(groups.items()):
        for c in group.clients:
            sums = {str(t): s for t, s in c.task_offset_sums.items()}
            active, standby = sorted(map(str, c.previous_active)), sorted(map(str, c.previous_standby))
            rows.append(
                (
                    *(snapshot_id, 1_000, group_id, c.process_id, 900, False, f"{group_id}/{c.process_id}", 1),
                    *("m", "c", "h", c.capacity, dict(c.client_tags), 1, 1),
                    *(active, standby, [], sums, "{}", None, None, None),
                )
            )
    return rows


def group_frames(
    spark: SparkSession, groups: Mapping[str, GroupState], snapshot_id: str = SNAPSHOT
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """(member_reports, group_tasks, changelog_offsets) for the groups; each stateful task's end offset sum
    is split over two changelog topics so the per-task sum is exercised."""
    tasks, offsets = [], []
    for group_id, group in sorted(groups.items()):
        for t in sorted(group.stateful_tasks | group.stateless_tasks):
            tasks.append((snapshot_id, group_id, str(t), t.subtopology, t.partition, t in group.stateful_tasks))
        for t in sorted(group.stateful_tasks):
            end = group.changelog_end_offset_sums.get(t)
            if end is None:
                continue  # no changelog end known: the lag stage must treat it as 0
            first = end // 3
            for topic, value in ((f"{group_id}-a-changelog", first), (f"{group_id}-b-changelog", end - first)):
                offsets.append((snapshot_id, group_id, t.subtopology, topic, t.partition, str(t), value))
    return (
        spark.createDataFrame(report_rows(groups, snapshot_id), table_schema("member_reports").ddl),
        spark.createDataFrame(tasks, table_schema("group_tasks").ddl),
        spark.createDataFrame(offsets, table_schema("changelog_offsets").ddl),
    )


# assignment_history rows (HISTORY_DDL order) of one group over time: two plans published, four reports.
HISTORY_ROWS = [
    (10, "g0", "pA", "s", "p1", "0_0", "ACTIVE", "published"),
    (10, "g0", "pA", "s", "p2", "0_0", "STANDBY", "published"),
    (20, "g0", "pB", "s", "p2", "0_0", "ACTIVE", "published"),
    (15, "g0", "pA", None, "p1", "0_0", "ACTIVE", "observed"),
    (25, "g0", "pB", None, "p2", "0_0", "ACTIVE", "observed"),
    (25, "g0", "pB", None, "p2", "0_1", "STANDBY", "observed"),
    (26, "g0", "pB", None, "p1", "0_1", "ACTIVE", "observed"),
    (30, "g1", None, None, "p9", "0_0", "ACTIVE", "observed"),
]
