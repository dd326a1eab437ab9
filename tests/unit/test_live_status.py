"""What `status` makes of reports: the newest generation's instances, the plan's step, when the group looks for a
plan next; and what `setup` counts as a wrong topic config. Pure functions, no broker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from assignor.protocol.state_report import StateReport
from jobs.cli.operations import setting_rows
from jobs.kafka_topics import TopicSpec
from jobs.live.groups import describe_reports
from jobs.live.status import PublishedPlan, duration, group_statuses, step_of
from jobs.provisioning import MAX_MESSAGE_BYTES, config_drift, product_topics
from jobs.settings import Settings
from tests.support.pipeline_kafka import report, stateful_topology

NOW = 1_790_000_000_000


def typed(body: dict[str, Any], **extra: Any) -> StateReport:
    return StateReport.from_json({**body, **extra})


def orders(pid: str, active: list[str], generation: int = 3, **extra: Any) -> StateReport:
    body = report("orders", pid, active=active, topology=stateful_topology("orders", 4), reported_at=NOW - 5_000)
    return typed({**body, "generation": generation, "origin": "python-runtime"}, **extra)


def test_members_are_the_newest_generation_and_older_reports_are_counted() -> None:
    (group,) = describe_reports([orders("a", ["0_0", "0_1"]), orders("b", ["0_2"]), orders("gone", ["0_3"], 2)])
    assert [i.process_id for i in group.instances] == ["a", "b"]
    assert group.older_reports == 1 and group.source == "python-runtime" and group.protocol == "classic"


def test_schedule_fields_outside_their_bounds_read_as_unknown() -> None:
    reports = [
        orders("a", ["0_0"], next_rebalance_at=NOW + 30_000, plan_check_interval_ms=300_000),
        orders("b", ["0_1"], next_rebalance_at=-1, plan_check_interval_ms=10**20),
    ]
    (group,) = describe_reports(reports)
    assert group.next_rebalance_at == NOW + 30_000 and group.plan_check_interval_ms == 300_000
    (status,) = group_statuses([group], {}, None, NOW)
    assert status.next_check == "rebalance in 30s; plan check every 5m00s"
    assert status.report_age_ms == 5_000 and status.step == "-"


def test_the_step_is_the_last_one_the_instances_hold() -> None:
    a, b = orders("a", ["0_0", "0_1"], plan_id="p1"), orders("b", ["0_2", "0_3"], plan_id="p1")
    (group,) = describe_reports([a, b])
    first = frozenset({("a", "0_0", "ACTIVE"), ("a", "0_1", "ACTIVE"), ("b", "0_2", "ACTIVE"), ("a", "0_3", "ACTIVE")})
    moved = frozenset({("a", "0_0", "ACTIVE"), ("a", "0_1", "ACTIVE"), ("b", "0_2", "ACTIVE"), ("b", "0_3", "ACTIVE")})
    assert step_of(group.instances, [first, moved]) == "2/2 (target)"
    assert step_of(group.instances, [moved, first]) == "1/2"
    warming = moved | {("a", "0_2", "WARMUP")}
    assert step_of(group.instances, [warming, first]) == "actives of 1/2"
    assert step_of(group.instances, [first]) == "between steps (of 1)"
    assert step_of(group.instances, None) == "unknown"
    published = {"orders": PublishedPlan("p2", 7, False, NOW)}
    (status,) = group_statuses([group], published, {}, NOW)
    assert status.plan_id == "p1" and status.published_plan_id == "p2" and status.step == "unknown"


def test_durations_read_as_people_say_them() -> None:
    shown = [duration(ms) for ms in (0, 59_999, 245_000, 7_800_000, 270_000_000)]
    assert shown == ["0s", "59s", "4m05s", "2h10m", "3d3h"]


def test_setup_keeps_stricter_configs_and_fixes_weaker_ones() -> None:
    reports, _ = product_topics("_r", "_p")
    wanted = {"cleanup.policy": "compact", "max.message.bytes": str(MAX_MESSAGE_BYTES)}
    stricter = {**wanted, "segment.ms": "600000", "min.cleanable.dirty.ratio": "0.05", "max.message.bytes": "8388608"}
    assert config_drift(reports, stricter) == {}
    weaker = {**stricter, "cleanup.policy": "compact,delete", "max.message.bytes": "1048588", "segment.ms": "604800000"}
    assert config_drift(reports, weaker) == {
        "cleanup.policy": ("compact,delete", "compact"),
        "max.message.bytes": ("1048588", str(MAX_MESSAGE_BYTES)),
        "segment.ms": ("604800000", "3600000"),
    }
    assert config_drift(TopicSpec("_x", compacted=True), {"segment.ms": "x" * 100})["segment.ms"][0] == "x" * 100


def test_settings_lists_every_variable_with_secrets_masked() -> None:
    settings = Settings(kafka_config={"sasl.username": "pipeline", "sasl.password": "hunter2"}, home=Path("/data/rbp"))
    rows = {name: (value, default) for name, value, default, _ in setting_rows(settings)}
    assert "hunter2" not in rows["RBP_KAFKA_CONFIG"][0] and '"sasl.username": "pipeline"' in rows["RBP_KAFKA_CONFIG"][0]
    assert rows["RBP_LAKE_ROOT"] == ("/data/rbp/lake", "/data/rbp/lake")
    assert rows["RBP_JVM_DIR"][1] == "/data/rbp/jvm" and rows["RBP_KAFKA_CONFIG"][1] == "{}"
    assert {"RBP_HOME", "SPARK_REMOTE", "RBP_NUM_STANDBY_REPLICAS", "RBP_PLANS_TOPIC"} <= set(rows)
