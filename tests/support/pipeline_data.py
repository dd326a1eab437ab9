"""In-memory bronze/silver frames built from assignor GroupStates, for pipeline tests on any Spark engine."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import replace

from pyspark.sql import DataFrame, SparkSession

from assignor import GroupState, compute_lags
from jobs.lakehouse.tables import table_schema
from tests.support.strategies import build_group

SNAPSHOT = "s-test"


def random_groups(seed: int, count: int) -> dict[str, GroupState]:
    rng = random.Random(seed)
    groups = {}
    for i in range(count):
        subs = rng.randint(1, 3)
        groups[f"g{i}"] = build_group(
            rng,
            rng.randint(1, 6),
            [rng.randint(0, 6) for _ in range(subs)],
            [rng.random() < 0.8 for _ in range(subs)],
            with_history=rng.random() < 0.9,
        )
    return groups


def held_state_only(group: GroupState) -> GroupState:
    """The group as the pipeline sees it from plugin reports: offset sums only for the tasks each instance holds."""
    return replace(
        group,
        clients=tuple(
            replace(c, task_offset_sums={
                t: s for t, s in c.task_offset_sums.items() if t in c.previous_active | c.previous_standby
            })
            for c in group.clients
        ),
    )  # fmt: skip


def report_rows(
    groups: Mapping[str, GroupState],
    snapshot_id: str = SNAPSHOT,
    *,
    as_lags: bool = False,
    own: Mapping[str, Mapping[str, object]] | None = None,
) -> list[tuple[object, ...]]:
    """member_reports rows (schema column order), one fresh report per client; ``as_lags``: the state as the
    Kafka Streams plugin reports it (lags, no offset sums); ``own``: group -> the settings its members report
    (columns by name; absent: unknown)."""
    names = table_schema("member_reports").column_names
    rows: list[tuple[object, ...]] = []
    for group_id, group in sorted(groups.items()):
        lags = compute_lags(group)
        for c in group.clients:
            sums = {str(t): s for t, s in c.task_offset_sums.items()}
            row = {
                "snapshot_id": snapshot_id, "captured_at": 1_000, "group_id": group_id, "process_id": c.process_id,
                "reported_at": 900, "stale": False, "report_key": f"{group_id}/{c.process_id}", "schema_version": 1,
                "member_id": "m", "client_id": "c", "host": "h", "capacity": c.capacity,
                "client_tags": dict(c.client_tags), "protocol_version": 1, "generation": 1,
                "active_tasks": sorted(map(str, c.previous_active)),
                "standby_tasks": sorted(map(str, c.previous_standby)), "warmup_tasks": [],
                "task_offset_sums": {} if as_lags else sums, "topology": "{}", "plan_id": None,
                "fallback_reason": None, "origin": "kafka-streams" if as_lags else "python-runtime",
                "task_lags": {str(t): lag for t, lag in lags[c.process_id].items()} if as_lags else None,
                "task_offset_sums_error": "changelog end offsets not listed within 2000 ms" if as_lags else None,
            }  # fmt: skip
            row |= dict((own or {}).get(group_id, {}))
            rows.append(tuple(row.get(n) for n in names))
    return rows


def group_frames(
    spark: SparkSession, groups: Mapping[str, GroupState], snapshot_id: str = SNAPSHOT, *, as_lags: bool = False
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
        spark.createDataFrame(report_rows(groups, snapshot_id, as_lags=as_lags), table_schema("member_reports").ddl),
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
