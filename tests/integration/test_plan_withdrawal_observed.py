"""observe follows what the groups and the plans topic say on a real broker and lake: a fallback is recorded on
the PUBLISHED plan (never taken for realization), a forged withdrawal withdraws nothing, a signed one makes the
plan WITHDRAWN with history rows, and ``withdraw`` records its own withdrawal at once. A realized plan records what
its instances restored since publish, and how many said so."""

from __future__ import annotations

import json
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as sf

from assignor import GroupAssignment, TaskId
from assignor.protocol.plans import Withdrawal
from assignor.protocol.restored_offsets import RestoredOffsetsReport, TaskRestore
from jobs.lakehouse.lake import Lake
from jobs.local.broker import EmbeddedBroker
from jobs.pipeline.approve import run_approve
from jobs.pipeline.extract import run_extract
from jobs.pipeline.lags import run_lags
from jobs.pipeline.observe import run_observe
from jobs.pipeline.plan import run_plan
from jobs.pipeline.publish import publish_withdrawal, run_publish
from jobs.pipeline.targets import plan_targets
from jobs.pipeline.validate import run_validate
from jobs.pipeline.withdraw import run_withdraw
from jobs.report.collect import group_rows
from jobs.settings import Settings
from tests.support.pipeline_kafka import produce, publish_reports, report, stateful_topology
from tests.support.signing import FORGER
from tests.system.test_pipeline_e2e import seed_fleet, settings  # noqa: F401  (the fixture)


def _published_orders_plan(lake: Lake, config: Settings, bootstrap: str) -> tuple[str, GroupAssignment]:
    """Extract → publish of the seeded fleet; the orders group's PUBLISHED plan and its target."""
    snapshot = run_extract(lake, config, bootstrap).snapshot_id
    run_lags(lake, config, snapshot)
    run_plan(lake, config, snapshot)
    run_validate(lake, config, snapshot)
    run_approve(lake, config, by="alice", snapshot_id=snapshot)
    run_publish(lake, config, bootstrap, snapshot_id=snapshot)
    row = lake.read("plans", snapshot).where(sf.col("group_id") == "orders").first()
    assert row is not None and row["status"] == "PUBLISHED"
    plan_id = str(row["plan_id"])
    return plan_id, plan_targets(lake, [plan_id])[plan_id]


def _plan(lake: Lake, plan_id: str) -> dict[str, object]:
    row = lake.read("plans").where(sf.col("plan_id") == plan_id).first()
    assert row is not None
    return row.asDict()


def _history(lake: Lake, plan_id: str, source: str) -> set[tuple[str, str, str]]:
    rows = lake.read("assignment_history").where((sf.col("plan_id") == plan_id) & (sf.col("source") == source))
    return {(r["process_id"], r["task_id"], r["role"]) for r in rows.collect()}


def _target_rows(target: GroupAssignment) -> set[tuple[str, str, str]]:
    return {
        (pid, str(t), role)
        for pid, ca in target.clients.items()
        for role, tasks in (("ACTIVE", ca.active), ("STANDBY", ca.standby))
        for t in tasks
    }


def test_observe_records_a_fallback_ignores_a_forged_withdrawal_and_marks_a_signed_one_withdrawn(
    spark: SparkSession,
    broker: EmbeddedBroker,
    settings: Settings,  # noqa: F811  (the fixture)
) -> None:
    seed_fleet(broker, settings)
    lake = Lake(spark, settings.lake_root)
    bootstrap = broker.bootstrap
    plan_id, target = _published_orders_plan(lake, settings, bootstrap)

    # The group runs exactly the target, but by Kafka's own assignment: its leader says the plan did not fit.
    why = "does_not_fit: the plan names instances that are not members"
    orders = stateful_topology("orders", 2)
    reports = [
        report("orders", pid, active=sorted(map(str, ca.active)), standby=sorted(map(str, ca.standby)),
               topology=orders) | {"fallback_reason": why}
        for pid, ca in target.clients.items()
    ]  # fmt: skip
    publish_reports(bootstrap, settings.reports_topic, reports)
    observed = run_observe(lake, settings, bootstrap)
    assert (observed.counts["realized"], observed.counts["fell_back"]) == (0, 1)
    fell = _plan(lake, plan_id)
    assert fell["status"] == "PUBLISHED" and str(fell["reason"]).startswith(f"fallback: {why} (reported by ")
    assert _history(lake, plan_id, "fallback") == _target_rows(target)
    again = run_observe(lake, settings, bootstrap)
    assert not any(o.table == "plans" and o.changed for o in again.outcomes)  # nothing new to say

    # The leader honors the plan at its next rebalance: now the group follows it, and the fallback is over. Two
    # rebalances later than the snapshot's generation 3 (the seeded reports'): observe records the generation.
    honoring = [
        r | {"fallback_reason": None, "plan_id": plan_id, "reported_at": r["reported_at"] + 1, "generation": 5}
        for r in reports
    ]
    # What they restored meanwhile: one instance says so in its own report (a restore begun before publish does
    # not count), one in a restored-offsets report as a Kafka Streams member would; the others say nothing.
    now = int(time.time() * 1000)
    own, member = honoring[0], honoring[1]
    own["restored_offsets"] = {"0_0": {"offsets": 500, "started_at": now}, "0_1": {"offsets": 99, "started_at": 1}}
    streams_member = RestoredOffsetsReport("orders", member["process_id"], now, {TaskId(0, 1): TaskRestore(70, now)})
    produce(bootstrap, settings.reports_topic, [(streams_member.key.encode(), streams_member.encode(), None)])
    publish_reports(bootstrap, settings.reports_topic, honoring)
    assert run_observe(lake, settings, bootstrap).counts["realized"] == 1
    realized = _plan(lake, plan_id)
    assert (realized["status"], realized["reason"], realized["realized_generation"]) == ("REALIZED", None, 5)
    restored = (realized["restored_offsets"], realized["restored_reporting"], realized["restored_members"])
    assert restored == (570, 2, len(honoring))
    rows = group_rows(lake, str(realized["snapshot_id"]), ["orders"])
    assert [(r.snapshot_generation, r.rebalances_at_most) for r in rows] == [(3, 2)]

    # A withdrawal signed with a key the pipeline does not hold withdraws nothing.
    forged = Withdrawal(plan_id, "orders", int(time.time() * 1000)).to_record(FORGER)
    produce(bootstrap, settings.plans_topic, [(b"orders", json.dumps(forged).encode(), None)])
    assert run_observe(lake, settings, bootstrap).counts["withdrawn"] == 0
    assert _plan(lake, plan_id)["status"] == "REALIZED"

    # A signed one sent by anyone holding the key (not through this lake) is noticed, also for a realized plan.
    record = publish_withdrawal(settings, bootstrap, "orders", plan_id)
    assert run_observe(lake, settings, bootstrap).counts["withdrawn"] == 1
    withdrawn = _plan(lake, plan_id)
    assert (withdrawn["status"], withdrawn["withdrawn_at"]) == ("WITHDRAWN", record["created_at"])
    assert str(withdrawn["reason"]).startswith("withdrawn: signed withdrawal")
    assert _history(lake, plan_id, "withdrawn") == _target_rows(target)
    last = run_observe(lake, settings, bootstrap)
    assert last.counts["withdrawn"] == 0 and _plan(lake, plan_id)["status"] == "WITHDRAWN"


def test_withdraw_records_the_plan_withdrawn_at_once_and_a_repeat_changes_nothing(
    spark: SparkSession,
    broker: EmbeddedBroker,
    settings: Settings,  # noqa: F811  (the fixture)
) -> None:
    seed_fleet(broker, settings)
    lake = Lake(spark, settings.lake_root)
    bootstrap = broker.bootstrap
    plan_id, target = _published_orders_plan(lake, settings, bootstrap)

    result = run_withdraw(lake, settings, bootstrap, "orders", plan_id, "carol")
    assert result.counts == {"withdrawn": 1}
    row = _plan(lake, plan_id)
    assert row["status"] == "WITHDRAWN" and "withdrawn by carol" in str(row["reason"])
    assert _history(lake, plan_id, "withdrawn") == _target_rows(target)
    reasons = lake.read("assignment_history").where(sf.col("source") == "withdrawn").select("reason").distinct()
    assert [r["reason"] for r in reasons.collect()] == [row["reason"]]

    repeat = run_withdraw(lake, settings, bootstrap, "orders", plan_id, "carol")
    assert repeat.counts == {"status_kept": 1} and not repeat.changed
    # observe agrees with what withdraw wrote, and never turns the plan into EXPIRED or REALIZED.
    assert run_observe(lake, settings, bootstrap).counts["withdrawn"] == 0
    assert _plan(lake, plan_id)["status"] == "WITHDRAWN"
