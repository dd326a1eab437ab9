"""The whole pipeline on a real broker, the real engine and Delta tables on disk: extract → lags → plan →
validate → approve → publish → observe, checking the tables at every stage, and every stage idempotent."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as sf

from assignor import TaskId
from assignor.protocol.plans import ApprovedPlan, read_record
from assignor.runtime.kafka_io import read_latest_by_key
from jobs.lakehouse.lake import Lake
from jobs.lakehouse.tables import table_names
from jobs.local.broker import EmbeddedBroker
from jobs.pipeline.approve import run_approve
from jobs.pipeline.extract import run_extract
from jobs.pipeline.history import run_history
from jobs.pipeline.lags import run_lags
from jobs.pipeline.observe import run_observe
from jobs.pipeline.plan import run_plan
from jobs.pipeline.publish import run_publish
from jobs.pipeline.stage import StageInputError, StageResult
from jobs.pipeline.targets import TARGET_CHANGED, plan_targets
from jobs.pipeline.validate import load_suites, run_validate
from jobs.report import run_report
from jobs.settings import Kip441Overrides, Settings
from tests.support.pipeline_kafka import create_topics, fill_changelog, publish_reports, report, stateful_topology
from tests.support.signing import SIGNER, VERIFY_KEYS, key_file

ORDERS_ENDS = {0: [5, 6, 7, 8], 1: [3, 4, 5, 6]}  # subtopology -> end offset per partition
CLICKS_ENDS = [4, 4]


def lake_state(lake: Lake) -> dict[str, tuple[int, list[str]]]:
    """Every table's Delta version and its rows, order-free."""
    return {name: (lake.version(name), sorted(map(repr, lake.read(name).collect()))) for name in table_names()}


def twice(lake: Lake, stage: Callable[[], StageResult]) -> StageResult:
    """Run a stage, then again: the second run must write nothing and leave every row as it was."""
    first = stage()
    before = lake_state(lake)
    again = stage()
    assert not again.changed, f"{again.stage} wrote again: {again.outcomes}"
    assert lake_state(lake) == before
    return first


def seed_fleet(broker: EmbeddedBroker, settings: Settings) -> None:
    """orders: instances a and b hold everything, c just joined; clicks: settled on x and y."""
    bootstrap = broker.bootstrap
    topics = {settings.reports_topic: 1, settings.plans_topic: 1}
    topics |= {f"orders-in{s}": 4 for s in ORDERS_ENDS} | {f"orders-store{s}-changelog": 4 for s in ORDERS_ENDS}
    topics |= {"clicks-in0": 2, "clicks-store0-changelog": 2}
    create_topics(bootstrap, topics, compacted=[settings.reports_topic, settings.plans_topic])
    for s, ends in ORDERS_ENDS.items():
        fill_changelog(bootstrap, f"orders-store{s}-changelog", ends)
    fill_changelog(bootstrap, "clicks-store0-changelog", CLICKS_ENDS)
    orders = stateful_topology("orders", 2)
    tasks = [f"{s}_{p}" for s in ORDERS_ENDS for p in range(4)]
    a_active, b_active = tasks[::2], tasks[1::2]
    end_of = {f"{s}_{p}": e for s, es in ORDERS_ENDS.items() for p, e in enumerate(es)}
    clicks = stateful_topology("clicks", 1)
    publish_reports(
        bootstrap,
        settings.reports_topic,
        [
            report("orders", "a", active=a_active, standby=b_active, topology=orders,
                   offset_sums={t: -2 for t in a_active} | {t: end_of[t] for t in b_active}),
            report("orders", "b", active=b_active, standby=a_active, topology=orders,
                   offset_sums={t: -2 for t in b_active} | {t: end_of[t] for t in a_active}),
            report("orders", "c", topology=orders),
            report("clicks", "x", active=["0_0"], standby=["0_1"], topology=clicks, offset_sums={"0_0": -2, "0_1": 4}),
            report("clicks", "y", active=["0_1"], standby=["0_0"], topology=clicks, offset_sums={"0_1": -2, "0_0": 4}),
        ],
    )  # fmt: skip


@pytest.fixture
def settings(tmp_path: Path, broker: EmbeddedBroker) -> Settings:
    return Settings(
        lake_root=tmp_path / "lake",
        kafka_bootstrap=broker.bootstrap,
        plan_signing_key_file=key_file(tmp_path),
        plan_key_id=SIGNER.key_id,
        plan_verify_keys=VERIFY_KEYS.render(),  # observe checks withdrawals with the groups' keys, never the key
        kip441_overrides=Kip441Overrides.fleet(acceptable_recovery_lag=2, num_standby_replicas=1),
        planner_processes=1,
        reports_topic="reports",
        plans_topic="plans",
    )


@pytest.mark.engines  # every stage, twice, on Sail and on Apache Spark with delta-spark
def test_pipeline_end_to_end_on_a_real_broker(spark: SparkSession, broker: EmbeddedBroker, settings: Settings) -> None:
    seed_fleet(broker, settings)
    lake = Lake(spark, settings.lake_root)
    bootstrap = broker.bootstrap

    extracted = run_extract(lake, settings, bootstrap)
    snapshot = extracted.snapshot_id
    assert snapshot is not None
    twice(lake, lambda: run_extract(lake, settings, bootstrap, snapshot))
    assert lake.read("member_reports", snapshot).count() == 5
    ends = {(r["topic"], r["partition"]): r["end_offset"] for r in lake.read("changelog_offsets", snapshot).collect()}
    expected_ends = {(f"orders-store{s}-changelog", p): e for s, es in ORDERS_ENDS.items() for p, e in enumerate(es)}
    expected_ends |= {("clicks-store0-changelog", p): e for p, e in enumerate(CLICKS_ENDS)}
    assert ends == expected_ends
    assert lake.read("quarantine", snapshot).count() == 0

    twice(lake, lambda: run_lags(lake, settings, snapshot))
    lags = {(r["group_id"], r["process_id"], r["task_id"]): r for r in lake.read("task_lags", snapshot).collect()}
    assert len(lags) == 3 * 8 + 2 * 2
    assert lags[("orders", "c", "1_3")]["lag"] == 6 and not lags[("orders", "c", "1_3")]["caught_up"]
    assert lags[("orders", "a", "0_0")]["lag"] == -2 and lags[("orders", "a", "0_0")]["caught_up"]
    assert lags[("orders", "a", "0_1")]["lag"] == 0  # a's standby of 0_1 is at the end of the changelog

    twice(lake, lambda: run_plan(lake, settings, snapshot))
    plans = {r["group_id"]: r for r in lake.read("plans", snapshot).collect()}
    assert plans["orders"]["status"] == "PENDING" and plans["orders"]["moves"] > 0
    assert plans["clicks"]["status"] == "NOOP"
    orders_id = plans["orders"]["plan_id"]
    target = plan_targets(lake, [orders_id])[orders_id]
    assert sorted(len(ca.active) for ca in target.clients.values()) == [2, 3, 3]
    assert sorted(t for ca in target.clients.values() for t in ca.active) == sorted(
        TaskId(s, p) for s in ORDERS_ENDS for p in range(4)
    )

    twice(lake, lambda: run_validate(lake, settings, snapshot))
    assert lake.read("plans").where(sf.col("plan_id") == orders_id).first()["status"] == "VALIDATED"  # type: ignore[index]
    expectations = sum(len(s.expectations) for s in load_suites({"max_warmup_replicas": 2}))
    results = lake.read("validation_results").where(sf.col("plan_id") == orders_id).collect()
    assert len(results) == expectations and all(r["success"] for r in results)
    assert (settings.data_docs / "index.html").is_file()

    twice(lake, lambda: run_approve(lake, settings, by="alice", snapshot_id=snapshot))
    approved = lake.read("plans").where(sf.col("plan_id") == orders_id).first()
    assert approved is not None and approved["status"] == "APPROVED" and approved["approved_by"] == "alice"
    planned = lake.read("assignment_history").where(sf.col("source") == "planned")
    assert {(r["process_id"], r["task_id"], r["role"], r["plan_id"]) for r in planned.collect()} == {
        (pid, str(t), role, orders_id)
        for pid, ca in target.clients.items()
        for role, tasks in (("ACTIVE", ca.active), ("STANDBY", ca.standby))
        for t in tasks
    }
    with pytest.raises(StageInputError, match="only VALIDATED plans can be approved"):
        run_approve(lake, settings, by="alice", plan_ids=[plans["clicks"]["plan_id"]])

    twice(lake, lambda: run_publish(lake, settings, bootstrap, snapshot_id=snapshot))
    record = read_latest_by_key(bootstrap, settings.plans_topic)[b"orders"]
    assert record is not None
    published = read_record(record, VERIFY_KEYS)
    assert isinstance(published, ApprovedPlan)
    assert published.plan_id == orders_id and published.approved_by == "alice"
    assert {p: (ca.active, ca.standby) for p, ca in published.target.clients.items()} == {
        p: (ca.active, ca.standby) for p, ca in target.clients.items()
    }
    assert lake.read("plans").where(sf.col("plan_id") == orders_id).first()["status"] == "PUBLISHED"  # type: ignore[index]
    history = lake.read("assignment_history").where(sf.col("source") == "published").count()
    assert history == sum(len(ca.active) + len(ca.standby) for ca in target.clients.values())

    # The group carries the plan out and reports its new assignment.
    orders = stateful_topology("orders", 2)
    publish_reports(
        bootstrap,
        settings.reports_topic,
        [
            report("orders", pid, active=sorted(map(str, ca.active)), standby=sorted(map(str, ca.standby)),
                   topology=orders, plan_id=orders_id)
            for pid, ca in target.clients.items()
        ],
    )  # fmt: skip
    twice(lake, lambda: run_observe(lake, settings, bootstrap))
    assert lake.read("plans").where(sf.col("plan_id") == orders_id).first()["status"] == "REALIZED"  # type: ignore[index]

    owner = next(pid for pid, ca in target.clients.items() if TaskId(0, 0) in ca.active)
    owners = run_history(lake, "orders", "0_0").where(sf.col("role") == "ACTIVE").collect()
    assert {(r["source"], r["process_id"], r["plan_id"]) for r in owners} == {
        ("observed", owner, orders_id),
        ("published", owner, orders_id),
    }
    # Time travel: before publishing, the history table held no published rows for the group.
    # Version 0 is the empty table Lake.ensure created; rows come with the commits after it (MERGEs, or appends
    # of rows that are all new).
    first_version = min(h["version"] for h in lake.history("assignment_history") if h["version"] > 0)
    assert run_history(lake, "orders", "0_0", version=first_version - 1).count() == 0

    page = run_report(lake, snapshot, None).read_text(encoding="utf-8")
    assert "orders" in page and "REALIZED" in page and "<svg" in page


def test_newer_published_plan_supersedes_the_older_and_unrealized_plans_expire(
    spark: SparkSession, broker: EmbeddedBroker, settings: Settings
) -> None:
    settings = settings.model_copy(update={"plan_valid_ms": 1})
    seed_fleet(broker, settings)
    lake = Lake(spark, settings.lake_root)
    bootstrap = broker.bootstrap

    def plan_and_publish() -> str:
        snapshot = run_extract(lake, settings, bootstrap).snapshot_id
        run_lags(lake, settings, snapshot)
        run_plan(lake, settings, snapshot)
        run_validate(lake, settings, snapshot)
        run_approve(lake, settings, by="bob", snapshot_id=snapshot)
        run_publish(lake, settings, bootstrap, snapshot_id=snapshot)
        row = lake.read("plans", snapshot).where(sf.col("group_id") == "orders").first()
        assert row is not None and row["status"] == "PUBLISHED"
        return str(row["plan_id"])

    first = plan_and_publish()
    second = plan_and_publish()
    status = {r["plan_id"]: r["status"] for r in lake.read("plans").where(sf.col("group_id") == "orders").collect()}
    assert status == {first: "SUPERSEDED", second: "PUBLISHED"}
    record = read_latest_by_key(bootstrap, settings.plans_topic)[b"orders"]
    assert record is not None and read_record(record, VERIFY_KEYS).plan_id == second

    # The group never carried the plan out, and it was valid for 1 ms after approval.
    result = run_observe(lake, settings, bootstrap)
    assert result.counts["expired"] == 1 and result.counts["realized"] == 0
    expired = lake.read("plans").where(sf.col("plan_id") == second).first()
    assert expired is not None and expired["status"] == "EXPIRED" and "valid_until" in expired["reason"]


def _tamper(lake: Lake, plan_id: str) -> None:
    """Give instance c one more standby in the plan's target, as a writer with access to the lake could."""
    rows = lake.read("plan_assignments").where(sf.col("plan_id") == plan_id)
    last = rows.agg(sf.max("step")).first()
    assert last is not None
    held = {r["task_id"] for r in rows.where((sf.col("step") == last[0]) & (sf.col("process_id") == "c")).collect()}
    extra = next(r for r in rows.where(sf.col("step") == last[0]).collect() if r["task_id"] not in held)
    lake.merge(
        "plan_assignments", lake.spark.createDataFrame([{**extra.asDict(), "process_id": "c", "role": "STANDBY"}])
    )


def test_a_target_changed_after_validation_is_neither_approved_nor_published(
    spark: SparkSession, broker: EmbeddedBroker, settings: Settings
) -> None:
    seed_fleet(broker, settings)
    lake = Lake(spark, settings.lake_root)
    bootstrap = broker.bootstrap
    snapshot = run_extract(lake, settings, bootstrap).snapshot_id
    run_lags(lake, settings, snapshot)
    run_plan(lake, settings, snapshot)
    run_validate(lake, settings, snapshot)
    orders = lake.read("plans", snapshot).where(sf.col("group_id") == "orders").first()
    assert orders is not None and orders["status"] == "VALIDATED" and len(orders["target_digest"]) == 64

    # Changed between validation and approval: the approval refuses it, the other groups are approved.
    _tamper(lake, orders["plan_id"])
    result: StageResult = run_approve(lake, settings, by="bob", snapshot_id=snapshot)
    assert result.counts["target_changed"] == 1
    row = lake.read("plans").where(sf.col("plan_id") == orders["plan_id"]).first()
    assert row is not None and row["status"] == "REJECTED" and row["reason"] == TARGET_CHANGED

    # Changed between approval and publication: publish signs nothing for it.
    snapshot = run_extract(lake, settings, bootstrap).snapshot_id
    run_lags(lake, settings, snapshot)
    run_plan(lake, settings, snapshot)
    run_validate(lake, settings, snapshot)
    run_approve(lake, settings, by="bob", snapshot_id=snapshot)
    orders = lake.read("plans", snapshot).where(sf.col("group_id") == "orders").first()
    assert orders is not None and orders["status"] == "APPROVED"
    _tamper(lake, orders["plan_id"])
    result = run_publish(lake, settings, bootstrap, snapshot_id=snapshot)
    assert result.counts["target_changed"] == 1 and result.counts["published"] == 0
    assert b"orders" not in read_latest_by_key(bootstrap, settings.plans_topic)
    row = lake.read("plans").where(sf.col("plan_id") == orders["plan_id"]).first()
    assert row is not None and row["status"] == "REJECTED" and row["reason"] == TARGET_CHANGED
