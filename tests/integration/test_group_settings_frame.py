"""Each group's settings resolved from member_reports rows on an engine: what its fresh members report (stale ones
left out), a per-group override over the fleet-wide one, and the same answer for groups that report alike."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession

from assignor import AssignmentConfigs
from jobs.lakehouse.tables import table_schema
from jobs.pipeline.group_settings import configs_of, resolve, resolve_groups
from jobs.settings import Kip441Overrides

pytestmark = pytest.mark.engines


def report(
    group_id: str, process_id: str, standbys: int | None, lag: int | None, *, stale: bool = False
) -> tuple[Any, ...]:
    columns = dict.fromkeys(table_schema("member_reports").column_names)
    columns |= {"snapshot_id": "s", "group_id": group_id, "process_id": process_id, "stale": stale}
    columns |= {"num_standby_replicas": standbys, "acceptable_recovery_lag": lag}
    return tuple(columns.values())


def test_each_group_gets_its_own_settings_and_alike_groups_get_equal_ones(spark: SparkSession) -> None:
    rows = [
        *(report(f"same-{i}", p, 1, 100) for i in range(3) for p in ("a", "b")),
        report("mixed", "a", 0, 100),
        report("mixed", "b", 2, None),
        report("stale", "a", 1, 100),
        report("stale", "b", 0, 5, stale=True),  # a stale member's settings are not the group's
        report("unknown", "a", None, None),
        report("overridden", "a", 1, 100),
    ]
    reports = spark.createDataFrame(rows, table_schema("member_reports").ddl)
    overrides = Kip441Overrides.model_validate(
        {"*": {"max_warmup_replicas": 3}, "overridden": {"num_standby_replicas": 0}}
    )
    groups = resolve_groups(reports, overrides)

    fleet = {"max_warmup_replicas": 3}
    expected = {
        **{
            f"same-{i}": resolve({"num_standby_replicas": [1], "acceptable_recovery_lag": [100]}, fleet)
            for i in range(3)
        },
        "mixed": resolve({"num_standby_replicas": [0, 2], "acceptable_recovery_lag": [100]}, fleet),
        "stale": resolve({"num_standby_replicas": [1], "acceptable_recovery_lag": [100]}, fleet),
        "unknown": resolve({}, fleet),
        "overridden": resolve(
            {"num_standby_replicas": [1], "acceptable_recovery_lag": [100]}, {**fleet, "num_standby_replicas": 0}
        ),
    }
    assert groups == expected
    assert groups["mixed"].values["num_standby_replicas"] == 2 and groups["mixed"].unexplained_text
    assert groups["overridden"].changes_text == "num_standby_replicas 1 -> 0 (override)"
    configs = configs_of(groups)
    assert configs == {g: s.configs() for g, s in expected.items()}
    assert configs["same-0"] == AssignmentConfigs(
        num_standby_replicas=1, acceptable_recovery_lag=100, max_warmup_replicas=3
    )
