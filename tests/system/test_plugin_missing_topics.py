"""Apache Kafka's WordCountDemo, unmodified, with the plugin jar and its config lines, on a cluster where nobody ran
`setup`: the plugin says ONCE (at ERROR, not at every rebalance) which topic is missing and which command creates
it; after `rebalance-planner setup` its reports arrive and `status` shows the group as a plugin group."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from jobs.cli.main import main
from jobs.local.broker import EmbeddedBroker
from jobs.pipeline.group_metadata import read_streams_groups
from jobs.polling import wait_until
from jobs.processes import spawn, stop_group
from tests.support.pipeline_kafka import create_topics, produce
from tests.support.signing import VERIFY_KEYS
from tests.support.streams_app import INPUT_TOPIC, OUTPUT_TOPIC, WORDCOUNT_MAIN, streams_examples_classpath

REPO = Path(__file__).resolve().parents[2]
APP = "wordcount-with-plugin"
PLAN_CHECK_MS = 2_000  # a follow-up rebalance every 2 s: many chances to repeat an error


def plugin_jar() -> Path:
    target = REPO / "assignor" / "java" / "plan-honoring-assignor" / "target"
    (jar,) = [
        j for j in target.glob("plan-honoring-assignor-*.jar") if not j.name.endswith(("-sources.jar", "-tests.jar"))
    ]
    return jar


def generation(bootstrap: str) -> int:
    members = read_streams_groups(bootstrap, {}, (), 10.0).groups.get(APP, ())
    return max((m.generation for m in members), default=-1)


def errors(log: Path, topic: str) -> list[str]:
    text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    return [line for line in text.splitlines() if f"topic '{topic}' does not exist" in line]


def test_the_plugin_names_a_missing_topic_once_and_setup_brings_its_reports(
    broker: EmbeddedBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    suffix = uuid.uuid4().hex[:6]
    reports, plans = f"reports-{suffix}", f"plans-{suffix}"
    create_topics(broker.bootstrap, {INPUT_TOPIC: 2, OUTPUT_TOPIC: 1})
    produce(broker.bootstrap, INPUT_TOPIC, [(None, b"all streams lead to kafka", p) for p in range(2)])
    properties = {
        "application.id": APP,
        "bootstrap.servers": broker.bootstrap,
        "state.dir": str(tmp_path / "state"),
        "group.protocol": "classic",
        "session.timeout.ms": "6000",
        "commit.interval.ms": "200",
        "replication.factor": "1",
        # The plugin: the README's two lines, and where its topics are.
        "task.assignor.class": "io.rebalanceplanner.PlanHonoringTaskAssignor",
        "rebalance.planner.verify.keys": VERIFY_KEYS.render(),
        "rebalance.planner.reports.topic": reports,
        "rebalance.planner.plans.topic": plans,
        "rebalance.planner.plan.check.interval.ms": str(PLAN_CHECK_MS),
    }
    config = tmp_path / "streams.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in properties.items()), encoding="utf-8")
    log = tmp_path / "app.log"
    classpath = f"{streams_examples_classpath()}:{plugin_jar()}"
    with log.open("ab") as out:
        app = spawn(["java", "-cp", classpath, WORDCOUNT_MAIN, str(config)], stdin=subprocess.DEVNULL, stdout=out)
    try:
        wait_until(lambda: generation(broker.bootstrap) >= 1, 120, "the application to join its group", poll_s=0.5)
        first = generation(broker.bootstrap)
        # Several rebalances, each reading the plans topic and publishing reports: the errors are said once.
        wait_until(lambda: generation(broker.bootstrap) >= first + 3, 120, "three more rebalances", poll_s=0.5)
        assert app.poll() is None, log.read_text(encoding="utf-8", errors="replace")[-2000:]
        for topic in (reports, plans):
            said = errors(log, topic)
            assert len(said) == 1, (topic, said)
            assert "ERROR" in said[0] and "`rebalance-planner setup`" in said[0]

        monkeypatch.setenv("RBP_REPORTS_TOPIC", reports)
        monkeypatch.setenv("RBP_PLANS_TOPIC", plans)
        monkeypatch.delenv("RBP_KAFKA_CONFIG", raising=False)
        assert main(["setup", "--bootstrap", broker.bootstrap]) == 0
        assert f"topic {reports}: created" in capsys.readouterr().out

        def plugin_status() -> dict[str, Any] | None:
            capsys.readouterr()
            if main(["status", APP, "--bootstrap", broker.bootstrap, "--json", "--no-lake"]) != 0:
                return None
            status: dict[str, Any] = json.loads(capsys.readouterr().out.splitlines()[0])
            return status if status["source"] == "kafka-streams" else None

        wait_until(lambda: plugin_status() is not None, 60, "the plugin's reports, once the topic exists", poll_s=1)
        status = plugin_status()
        assert status is not None and status["members"] == 1 and status["plan_id"] is None
        assert f"plan check every {PLAN_CHECK_MS // 1000}s" in status["next_check"]
        assert "rebalance in" in status["next_check"] or "rebalance due" in status["next_check"]
    finally:
        stop_group(app)
