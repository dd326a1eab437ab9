"""A platform team's first application, as a new user would run it: Apache Kafka's own WordCountDemo (the
kafka-streams-examples jar, unmodified, not our reference app) with the plugin jar and its config lines, running with
one standby per task while the pipeline's own default is none. By the command line only: `setup`, `status`,
extract -> lags -> plan (draining one instance) -> validate -> approve -> publish, `status` again, `observe`. The plan
keeps the group's standbys, the group carries it out, and the lake says REALIZED."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as sf

from jobs.cli.main import main
from jobs.lakehouse.lake import Lake
from jobs.local.broker import EmbeddedBroker
from jobs.polling import wait_until
from jobs.settings import Settings
from tests.support.pipeline_kafka import create_topics, produce
from tests.support.signing import VERIFY_KEYS, signing_env
from tests.support.streams_app import (
    INPUT_TOPIC,
    OUTPUT_TOPIC,
    WordCountInstance,
    plugin_jar,
    streams_examples_classpath,
)

APP = "wordcount-first-app"
PARTITIONS = 3  # WordCountDemo: 0_* re-key the lines (stateless), 1_* count words in a store (stateful)
STATEFUL = {f"1_{p}" for p in range(PARTITIONS)}


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, broker: EmbeddedBroker) -> Settings:
    suffix = uuid.uuid4().hex[:6]
    values = {
        "RBP_LAKE_ROOT": str(tmp_path / "lake"),
        "RBP_KAFKA_BOOTSTRAP": broker.bootstrap,
        **signing_env(tmp_path),
        "RBP_REPORTS_TOPIC": f"reports-{suffix}",
        "RBP_PLANS_TOPIC": f"plans-{suffix}",
        "RBP_PLANNER_PROCESSES": "1",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    for name in ("SPARK_REMOTE", "RBP_KIP441_OVERRIDES", "RBP_KAFKA_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    return Settings()


@pytest.fixture
def instances(env: Settings, broker: EmbeddedBroker, tmp_path: Path) -> Iterator[list[WordCountInstance]]:
    """Three WordCountDemo instances with the plugin; stopped at the end whatever happens."""
    plugin = {
        # The plugin's config lines (docs/kafka-streams-plugin.md) and where the product's topics are.
        "task.assignor.class": "io.rebalanceplanner.PlanHonoringTaskAssignor",
        "rebalance.planner.verify.keys": VERIFY_KEYS.render(),
        "rebalance.planner.reports.topic": env.reports_topic,
        "rebalance.planner.plans.topic": env.plans_topic,
        "rebalance.planner.plan.check.interval.ms": "2000",
        # The application's own settings: one standby per task, which the pipeline must keep.
        "num.standby.replicas": "1",
        "acceptable.recovery.lag": "100",
    }
    made = [WordCountInstance(broker.bootstrap, APP, tmp_path, f"i{n}", extra=plugin) for n in (1, 2, 3)]
    try:
        yield made
    finally:
        for instance in made:
            instance.stop()


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """One command of the product's CLI, which must succeed; what it printed."""
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr().out
    assert code == 0, (args, out)
    return out


def group_status(capsys: pytest.CaptureFixture[str]) -> dict[str, Any] | None:
    capsys.readouterr()
    if main(["status", APP, "--json"]) != 0:
        return None
    lines = capsys.readouterr().out.splitlines()
    return json.loads(lines[0]) if lines else None


def holds(status: dict[str, Any] | None, role: str) -> dict[str, set[str]]:
    """process id -> the tasks it holds in ``role`` (active, standby, warmup), as `status --json` says."""
    return {i["process_id"]: set(i[role]) for i in (status or {}).get("instances", [])}


def standbys_per_stateful_task(status: dict[str, Any] | None) -> dict[str, int]:
    standby = holds(status, "standby")
    return {t: sum(t in tasks for tasks in standby.values()) for t in STATEFUL}


def test_an_outside_application_with_standbys_is_planned_published_and_keeps_them(
    env: Settings,
    broker: EmbeddedBroker,
    instances: list[WordCountInstance],
    spark: SparkSession,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = cli(capsys, "setup", "--bootstrap", broker.bootstrap)
    assert f"topic {env.reports_topic}: created" in out and f"topic {env.plans_topic}: created" in out
    create_topics(broker.bootstrap, {INPUT_TOPIC: PARTITIONS, OUTPUT_TOPIC: 1})
    lines = [(None, b"all streams lead to kafka %d" % n, n % PARTITIONS) for n in range(90)]
    produce(broker.bootstrap, INPUT_TOPIC, lines)
    classpath = f"{streams_examples_classpath()}:{plugin_jar()}"
    for instance in instances:
        instance.start(classpath)

    def settled() -> dict[str, Any] | None:
        status = group_status(capsys)
        standbys = standbys_per_stateful_task(status)
        ready = (
            status is not None
            and status["source"] == "kafka-streams"
            and status["members"] == 3
            and all(n == 1 for n in standbys.values())
            and not any(holds(status, "warmup").values())
        )
        return status if ready else None

    wait_until(lambda: settled() is not None, 180, "three instances reporting, one standby per stateful task")
    before = settled()
    assert before is not None and before["protocol"] == "classic" and before["plan_id"] is None
    shown = cli(capsys, "status", APP)
    with capsys.disabled():  # the people's table, in the test's output (`pytest -s` shows it)
        print("status before:\n" + shown)

    # Drain the instance holding the most: its tasks warm up on the other two and move there.
    active = holds(before, "active")
    drained = max(sorted(active), key=lambda p: len(active[p]))
    cli(capsys, "extract")
    cli(capsys, "lags")
    cli(capsys, "plan", "--drain", f"{APP}/{drained}")
    cli(capsys, "validate")
    lake = Lake(spark, env.lake_root)
    plan = lake.read("plans").where(sf.col("group_id") == APP).orderBy(sf.col("created_at").desc()).first()
    assert plan is not None and plan["status"] == "VALIDATED", plan
    # The group's own settings, not the pipeline's default of no standbys, and nothing silently changed.
    assert plan["num_standby_replicas"] == 1 and plan["acceptable_recovery_lag"] == 100
    assert plan["settings_changes"] is None and (plan["moves"] or 0) > 0, plan.asDict()
    target = lake.read("plan_assignments").where(sf.col("plan_id") == plan["plan_id"])
    last = max(r["step"] for r in target.select("step").distinct().collect())
    standby_rows = target.where((sf.col("step") == last) & (sf.col("role") == "STANDBY")).collect()
    assert {r["task_id"] for r in standby_rows} == STATEFUL and len(standby_rows) == len(STATEFUL)

    cli(capsys, "approve", "--by", "platform-engineer")
    published_at = time.monotonic()
    out = cli(capsys, "publish")
    assert "plan check" in out  # publish says when the group picks its plan up

    def converged() -> dict[str, Any] | None:
        status = group_status(capsys)
        if status is None or status["plan_id"] != plan["plan_id"] or not status["step"].endswith("(target)"):
            return None
        return status

    wait_until(lambda: converged() is not None, 240, "the group to carry out its plan to the target")
    converged_s = time.monotonic() - published_at
    after = converged()
    assert after is not None and after["fallback_reason"] is None
    assert not holds(after, "active")[drained] and not holds(after, "standby")[drained]
    assert all(n == 1 for n in standbys_per_stateful_task(after).values()), after  # the standbys are kept
    shown = cli(capsys, "status", APP)
    with capsys.disabled():
        print(f"status after ({converged_s:.1f} s from publish to the target):\n" + shown)

    def realized() -> bool:
        cli(capsys, "observe")
        row = lake.read("plans").where(sf.col("plan_id") == plan["plan_id"]).first()
        return row is not None and row["status"] == "REALIZED"

    wait_until(realized, 120, "observe to mark the plan REALIZED", poll_s=2)
    assert all(i.running for i in instances), [i.log_tail() for i in instances]
