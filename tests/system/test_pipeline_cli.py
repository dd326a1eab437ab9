"""The pipeline's CLI: every stage runs alone from the command line, exit 0/1/2 per contract."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from assignor.baselines import BASELINE_ASSIGNORS
from jobs.cli.main import main
from jobs.lakehouse.lake import Lake
from jobs.local.broker import EmbeddedBroker
from jobs.settings import Settings
from tests.support.signing import signing_env
from tests.system.test_pipeline_e2e import seed_fleet


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, broker: EmbeddedBroker) -> Settings:
    values = {
        "RBP_LAKE_ROOT": str(tmp_path / "lake"),
        "RBP_KAFKA_BOOTSTRAP": broker.bootstrap,
        **signing_env(tmp_path),
        "RBP_REPORTS_TOPIC": "reports",
        "RBP_PLANS_TOPIC": "plans",
        # The seeded reports say nothing of their settings: these are explicit fleet-wide overrides.
        "RBP_KIP441_OVERRIDES": '{"*": {"acceptable_recovery_lag": 2, "num_standby_replicas": 1}}',
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    return Settings()


def test_every_stage_runs_from_the_command_line(
    env: Settings, broker: EmbeddedBroker, spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_fleet(broker, env)
    stages = (["extract"], ["lags"], ["plan"], ["baselines"], ["validate"], ["approve", "--by", "bob"], ["publish"])
    for command in stages:
        assert main(command) == 0, command
        out = capsys.readouterr().out
        assert command[0] in out
    assert "plans" in out and "PUBLISHED" not in out  # the publish table lists tables, not statuses
    # publish says when the groups pick their plans up: what their reports say (these carry no schedule)
    assert "groups pick a new plan up at their next plan check" in out and "\norders: plan " in out
    assert main(["observe"]) == 0
    assert main(["history", "--group", "orders", "--task", "0_0"]) == 0
    out = capsys.readouterr().out
    assert "published" in out and "ACTIVE" in out
    report = tmp_path / "report.html"
    assert main(["report", "--out", str(report)]) == 0
    assert "orders" in report.read_text(encoding="utf-8")
    assert main(["plan"]) == 0
    assert "nothing new written" in capsys.readouterr().out
    lake = Lake(spark, env.lake_root)
    plans = {r["plan_id"] for r in lake.read("plans").collect()}
    baselines = lake.read("plan_baselines").collect()
    # Every planned group compared with both of Kafka's assignors, each replayed until it stopped probing.
    assert {(r["plan_id"], r["assignor"]) for r in baselines} == {(p, a) for p in plans for a in BASELINE_ASSIGNORS}
    assert all(r["converged"] and r["rounds"] >= 1 and r["estimated_seconds"] >= 0 for r in baselines)
    assert main(["baselines"]) == 0
    assert "nothing new written" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["lags", "--snapshot-id", "nope"], "unknown snapshot_id 'nope'"),
        (["approve", "--plan-id", "nope", "--by", "x"], "unknown plan_id(s): nope"),
        (["history", "--group", "orders", "--as-of", "yesterday"], "--as-of must be epoch milliseconds"),
        (["history", "--group", "orders", "--version", "7"], "--version 7 does not exist"),
        (["plan"], "no snapshot"),
    ],
)
def test_bad_input_exits_2_with_a_one_line_reason(
    env: Settings, argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1]


def test_publish_without_a_signing_key_is_bad_input(
    env: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("RBP_PLAN_SIGNING_KEY_FILE")
    assert main(["publish"]) == 2
    assert "RBP_PLAN_SIGNING_KEY_FILE is not set" in capsys.readouterr().err
