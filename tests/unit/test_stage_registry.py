"""The stage registry: every registered stage is a CLI subcommand taking its options, and every Airflow task of the
planning and observe DAGs runs its stages through the registry, so adding a stage is one entry."""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from jobs.cli.main import _build_parser
from jobs.lakehouse.lake import Lake
from jobs.live import read as live_read
from jobs.orchestration import tasks
from jobs.orchestration.decision import APPROVE_ALL
from jobs.pipeline import registry
from jobs.pipeline.approval_record import ApprovalRecord, ApprovedDigest
from jobs.pipeline.stage import StageResult
from jobs.settings import Settings

# No stage really runs here: the recorders below only note the request (the root holds the writer lock only).
LAKE: Any = SimpleNamespace(root=Path(tempfile.gettempdir()) / "rbp-stage-registry-lake", clear_staging=lambda: None)


def test_every_registered_stage_is_a_subcommand_taking_its_options() -> None:
    parser = _build_parser()
    for stage in registry.STAGES.values():
        argv = [stage.name]
        for argument in stage.arguments:
            value = "x" if argument.type is None else "1"  # a typed option (seconds, say) takes a number
            argv += [argument.flag] if argument.action == "store_true" else [argument.flag, value]
        args = parser.parse_args(argv)
        assert args.command == stage.name


def test_cli_options_become_the_stage_request() -> None:
    args = _build_parser().parse_args(["approve", "--plan-id", "a", "--plan-id", "b", "--by", "bob", "--reject"])
    request = registry.request_from(vars(args), Settings(), None)
    assert (request.plan_ids, request.by, request.reject, request.snapshot_id) == (("a", "b"), "bob", True, None)


def test_an_unknown_stage_names_the_known_ones() -> None:
    with pytest.raises(KeyError, match="extract, lags"):
        registry.stage("nope")


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, registry.StageRequest]]:
    """Every registered stage replaced by a recorder; Airflow's tasks run on no engine."""
    calls: list[tuple[str, registry.StageRequest]] = []

    def recorder(name: str) -> Any:
        def run(lake: Lake, request: registry.StageRequest) -> StageResult:
            assert lake is LAKE
            calls.append((name, request))
            return StageResult(name, request.snapshot_id or "s1", (), {"published": 1})

        return run

    fakes = {n: dataclasses.replace(s, run=recorder(n)) for n, s in registry.STAGES.items()}
    monkeypatch.setattr(registry, "STAGES", fakes)

    @contextmanager
    def no_engine(rt: tasks.Runtime) -> Iterator[Any]:
        yield LAKE

    monkeypatch.setattr(tasks, "_lake", no_engine)
    monkeypatch.setattr(tasks, "_refresh_report", lambda lake, snapshot_id: None)
    monkeypatch.setattr(tasks, "_snapshot_statuses", lambda lake: {})
    # After a publish the task reads the groups' pick-up times from Kafka; "k:9092" answers nobody, and waiting out
    # the Kafka timeout took 30 s of this unit test. The reader is recorded instead (its bootstrap is checked).
    monkeypatch.setattr(live_read, "pickup_lines", lambda settings, bootstrap: [f"pick-up read at {bootstrap}"])
    return calls


def test_the_airflow_tasks_run_every_stage_through_the_registry(
    ran: list[tuple[str, registry.StageRequest]], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rt = tasks.Runtime(Settings(lake_root=tmp_path / "lake"), "k:9092", None)
    assert tasks.extract(rt, "s1") == "s1"
    tasks.lags(rt, "s1")
    tasks.plan(rt, "s1")
    tasks.validate(rt, "s1")
    answer = {"chosen_options": [APPROVE_ALL], "params_input": {}, "responded_by_user": {"id": "7", "name": "alice"}}
    reviewed = {"snapshot_id": "s1", "candidates": {"orders": "s1/orders"}, "approval_timeout_s": 60, "offered": {}}
    tasks.decide(rt, reviewed, answer)
    with caplog.at_level("INFO", logger=tasks.log.name):
        approved = ApprovedDigest("s1/orders", "orders", "d" * 64, 1, "t" * 64, {})
        assert tasks.publish(rt, "s1", ApprovalRecord("alice", 1, "airflow", (approved,))) == 1
    assert "publish s1: pick-up read at k:9092" in caplog.messages
    tasks.observe(rt)
    names = [name for name, _ in ran]
    assert names == ["extract", "lags", "plan", "baselines", "validate", "approve", "publish", "observe"]
    assert set(names) == set(registry.STAGES)
    requests = dict(ran)
    assert all(r.settings is rt.settings and r.bootstrap == "k:9092" for r in requests.values())
    assert requests["approve"].by == "alice" and requests["approve"].plan_ids == ("s1/orders",)
    assert requests["publish"].snapshot_id == "s1"


def test_a_kafka_stage_without_a_bootstrap_fails_the_task_naming_the_connection(
    ran: list[tuple[str, registry.StageRequest]], tmp_path: Path
) -> None:
    rt = tasks.Runtime(Settings(lake_root=tmp_path / "lake"), None, None)
    with pytest.raises(tasks.TaskFailed, match=tasks.KAFKA_CONN_ID):
        tasks.extract(rt, "s1")
    assert ran == []
