"""The demo's engine option: `demo --engine spark` (or SPARK_REMOTE) hands Apache Spark's SPARK_REMOTE to every Airflow
task, `--engine sail` keeps them on Sail even when SPARK_REMOTE is set; the outcome names the engine of every commit.
(The whole demo on Apache Spark is too slow for the suite: README's demo section has its figures.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobs.cli.main import _build_parser
from jobs.demo.engine import DELTA_SPARK_PREFIX, CommitEngines, DemoEngine
from jobs.demo.outcome import check_engine
from jobs.demo.progress import DemoError
from jobs.demo.start import airflow_env, demo_settings
from jobs.local.airflow import LocalAirflow
from jobs.settings import Settings

REMOTE = "sc://spark.example:15002"
SPARK_INFO = "Apache-Spark/4.1.0 Delta-Lake/4.1.0"


@pytest.fixture(autouse=True)
def no_remote(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_REMOTE", raising=False)


def task_settings(engine: DemoEngine, root: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """The settings an Airflow task of the demo reads: the demo's Airflow environment, then Settings()."""
    settings = demo_settings(root, "127.0.0.1:9092", engine)
    env = LocalAirflow(root / "airflow", extra_env=airflow_env(settings)).env()
    monkeypatch.delenv("SPARK_REMOTE", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return Settings()


def test_the_demo_command_accepts_an_engine() -> None:
    assert _build_parser().parse_args(["demo", "--engine", "spark"]).engine == "spark"
    assert _build_parser().parse_args(["demo"]).engine is None
    with pytest.raises(SystemExit):
        _build_parser().parse_args(["demo", "--engine", "flink"])


def test_demo_on_spark_without_spark_remote_starts_a_local_server_and_hands_its_remote_to_every_task(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = DemoEngine.choose("spark", None, tmp_path / "jvm")
    try:
        assert engine.server is not None and not engine.server.running  # started by the demo, after Airflow
        assert engine.remote == engine.server.remote
        assert task_settings(engine, tmp_path, monkeypatch).spark_remote == engine.remote
    finally:
        engine.close()
    assert not engine.server.work_dir.exists()


def test_spark_remote_alone_runs_the_demo_on_that_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = DemoEngine.choose(None, REMOTE, tmp_path / "jvm")
    assert (engine.name, engine.remote, engine.server) == ("spark", REMOTE, None)
    monkeypatch.setenv("SPARK_REMOTE", REMOTE)
    assert task_settings(engine, tmp_path, monkeypatch).spark_remote == REMOTE


def test_demo_on_sail_keeps_the_tasks_off_a_spark_remote_set_in_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = DemoEngine.choose("sail", REMOTE, tmp_path / "jvm")
    assert (engine.name, engine.remote, engine.server) == ("sail", None, None)
    monkeypatch.setenv("SPARK_REMOTE", REMOTE)
    settings = demo_settings(tmp_path, "127.0.0.1:9092", engine)
    assert settings.spark_remote is None
    assert "SPARK_REMOTE" not in LocalAirflow(tmp_path / "airflow", extra_env=airflow_env(settings)).env()


def write_commits(table: Path, engines: list[str]) -> None:
    log = table / "_delta_log"
    log.mkdir(parents=True)
    for version, engine in enumerate(engines):
        actions = [{"commitInfo": {"operation": "WRITE", "engineInfo": engine}}, {"add": {"path": "part-0.parquet"}}]
        (log / f"{version:020}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")


def test_the_lakes_commits_are_counted_by_the_engine_that_wrote_them(tmp_path: Path) -> None:
    write_commits(tmp_path / "plans", [SPARK_INFO, SPARK_INFO])
    write_commits(tmp_path / "task_lags", [SPARK_INFO, "sail-delta-lake:0.7.2", "delta-rs:1.2.0"])
    engines = CommitEngines.read(tmp_path)
    assert engines.totals() == {SPARK_INFO: 3, "sail-delta-lake:0.7.2": 1, "delta-rs:1.2.0": 1}
    assert engines.not_written_by(DELTA_SPARK_PREFIX) == {"task_lags": ["delta-rs:1.2.0", "sail-delta-lake:0.7.2"]}
    assert engines.summary() == (
        f"5 Delta commits in 2 tables: 3 by {SPARK_INFO}, 1 by sail-delta-lake:0.7.2, 1 by delta-rs:1.2.0"
    )


def test_a_demo_on_its_own_spark_server_fails_when_a_table_holds_another_engines_commit(tmp_path: Path) -> None:
    write_commits(tmp_path / "lake" / "plans", [SPARK_INFO])
    write_commits(tmp_path / "lake" / "task_lags", ["sail-delta-lake:0.7.2"])
    settings = Settings(lake_root=tmp_path / "lake")
    own = DemoEngine.choose("spark", None, tmp_path / "jvm")
    try:
        with pytest.raises(DemoError, match=r"task_lags: sail-delta-lake:0\.7\.2"):
            check_engine(own, settings)
    finally:
        own.close()
    check_engine(DemoEngine.choose("spark", REMOTE, tmp_path / "jvm"), settings)  # any server: only counted
