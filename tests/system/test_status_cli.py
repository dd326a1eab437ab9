"""`rebalance-planner status` on real parts: a settled group of Python runtime instances on the embedded broker,
before a plan is published (Kafka's own assignment, the plan check it is due for) and after (the plan honored, its
step read from the lake's plan_assignments, the published plan named)."""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from assignor.assignment import ClientAssignment, GroupAssignment
from assignor.protocol.plans import ApprovedPlan
from assignor.task import TaskId
from jobs.cli.main import main
from jobs.lakehouse.lake import Lake
from jobs.lakehouse.tables import table_schema
from jobs.local.broker import EmbeddedBroker
from jobs.local.direct_plan import publish_record
from jobs.local.fleet import Fleet, InputLoad
from jobs.local.fleet_events import converged
from tests.support.fleet_harness import CONFIGS, TASKS, fleet_config, start_settled, wait_for_state
from tests.support.runtime_harness import wait_for
from tests.support.signing import SIGNER

GROUP = "orders"
CHECK_S = 2.0


def status_json(broker: EmbeddedBroker, capsys: pytest.CaptureFixture[str], *flags: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main(["status", GROUP, "--bootstrap", broker.bootstrap, "--json", *flags]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    return dict(json.loads(line))


def status_table(broker: EmbeddedBroker, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["status", "--bootstrap", broker.bootstrap]) == 0
    return capsys.readouterr().out


def write_steps(spark: SparkSession, lake_root: Path, plan: ApprovedPlan) -> None:
    """The plan's one step as plan_assignments holds it (what the plan stage writes)."""
    rows = [
        (plan.plan_id, plan.snapshot_id, GROUP, 1, pid, str(task), "ACTIVE")
        for pid, client in plan.target.clients.items()
        for task in client.active
    ]
    frame = spark.createDataFrame(rows, schema=table_schema("plan_assignments").ddl)
    Lake(spark, lake_root).merge("plan_assignments", frame)


def test_status_shows_the_live_group_before_and_after_a_plan_is_published(
    broker: EmbeddedBroker,
    spark: SparkSession,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("RBP_LAKE_ROOT", str(tmp_path / "lake"))
    monkeypatch.delenv("RBP_KAFKA_CONFIG", raising=False)
    config = replace(fleet_config(broker.bootstrap, tmp_path / "fleet"), plan_check_interval_s=CHECK_S)
    with Fleet(config) as fleet:
        topology = fleet.create_group(GROUP)
        with InputLoad(broker.bootstrap, topology.source_topics, 50):
            start_settled(fleet, GROUP, ["i1", "i2", "i3"])
            wait_for_state(fleet, broker.bootstrap, GROUP, min_changelog=50)
            members = {i.process_id for i in fleet.members(GROUP)}

            def reported_by_all() -> bool:
                status = status_json(broker, capsys, "--no-lake")
                held = [t for i in status["instances"] for t in i["active"]]
                return {i["process_id"] for i in status["instances"]} == members and sorted(held) == sorted(TASKS)

            wait_for(reported_by_all, 60, "every instance's report of the settled assignment")
            before = status_json(broker, capsys)
            assert before["members"] == 3 and before["protocol"] == "classic" and before["source"] == "python-runtime"
            assert before["plan_id"] is None and before["published_plan_id"] is None and before["step"] == "-"
            assert "plan check every 2s" in before["next_check"]
            assert 0 <= before["report_age_ms"] < 60_000
            table = status_table(broker, capsys)
            with capsys.disabled():  # shown with -s: what an operator sees
                print("status before publish:\n" + table)
            assert all(pid in table for pid in members)  # whole ids, never cut, when stdout is no terminal

            held = {i["process_id"]: sorted(i["active"]) for i in before["instances"]}
            (a, a_tasks), (b, b_tasks) = [(p, t) for p, t in sorted(held.items()) if t][:2]
            held[a], held[b] = [*a_tasks[1:], b_tasks[0]], [*b_tasks[1:], a_tasks[0]]
            target = GroupAssignment(
                {p: ClientAssignment(active=frozenset(TaskId.parse(t) for t in ts)) for p, ts in held.items()}
            )
            now = int(time.time() * 1000)
            plan = ApprovedPlan(
                plan_id=f"plan-{uuid.uuid4().hex[:12]}", group_id=GROUP, snapshot_id=f"status-{now}",
                created_at=now, valid_until=now + 600_000, approved_by="tester", approved_at=now,
                configs=CONFIGS, target=target, move_order=(TaskId.parse(a_tasks[0]), TaskId.parse(b_tasks[0])),
            )  # fmt: skip
            write_steps(spark, tmp_path / "lake", plan)
            publish_record(broker.bootstrap, fleet.config.plans_topic, GROUP, plan.to_record(SIGNER))
            published = status_json(broker, capsys, "--no-lake")
            assert published["published_plan_id"] == plan.plan_id

            wait_for(lambda: converged(fleet, GROUP, target, plan.plan_id), 120, "the group to reach the plan")

            def honored_and_reported() -> bool:
                status = status_json(broker, capsys)
                return bool(status["plan_id"] == plan.plan_id and status["step"] == "1/1 (target)")

            wait_for(honored_and_reported, 60, "reports of the plan honored, at its last step")
            after = status_json(broker, capsys)
            assert after["fallback_reason"] is None and after["published_plan_id"] == plan.plan_id
            assert {i["process_id"]: set(i["active"]) for i in after["instances"]} == {
                p: set(t) for p, t in held.items()
            }
            table = status_table(broker, capsys)
            with capsys.disabled():
                print("status after publish:\n" + table)


def test_status_says_what_is_missing(
    broker: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("RBP_REPORTS_TOPIC", f"_no_reports_{uuid.uuid4().hex[:6]}")
    assert main(["status", "--bootstrap", broker.bootstrap]) == 1
    assert "does not exist: run `rebalance-planner setup`" in capsys.readouterr().err
    monkeypatch.delenv("RBP_KAFKA_BOOTSTRAP", raising=False)
    assert main(["status"]) == 2
