"""What the DAG's tasks run: failures a retry can fix propagate (Airflow retries them with backoff), the others
fail the task at once; the demo's report-only groups land on the broker with exact changelog end offsets."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException

from assignor.runtime.kafka_io import ChangelogEndOffsets, read_latest_by_key
from jobs.demo.groups import simulated_groups, write_simulated_groups
from jobs.lakehouse.lake import Lake
from jobs.local.broker import EmbeddedBroker
from jobs.orchestration.tasks import Runtime, TaskFailed, run_stage
from jobs.pipeline.stage import StageInputError
from jobs.settings import Settings


def runtime(tmp_path: Path) -> Runtime:
    return Runtime(Settings(lake_root=tmp_path / "lake"), "127.0.0.1:9", None)


def test_bad_input_fails_the_task_without_retries(tmp_path: Path) -> None:
    def body(lake: Lake) -> None:
        raise StageInputError("unknown snapshot_id 'x': no extract wrote it")

    with pytest.raises(TaskFailed, match="plan: unknown snapshot_id 'x'"):
        run_stage("plan", runtime(tmp_path), body)


def test_kafka_errors_propagate_so_airflow_retries_them(tmp_path: Path) -> None:
    def body(lake: Lake) -> None:
        raise KafkaException(KafkaError(KafkaError._TRANSPORT))

    with pytest.raises(KafkaException):
        run_stage("extract", runtime(tmp_path), body)


def test_a_bug_is_not_retried(tmp_path: Path) -> None:
    def body(lake: Lake) -> None:
        raise KeyError("moves")

    with pytest.raises(TaskFailed, match="KeyError"):
        run_stage("review", runtime(tmp_path), body)


def test_the_stage_gets_a_lake_under_the_settings_root(tmp_path: Path) -> None:
    assert run_stage("lags", runtime(tmp_path), lambda lake: lake.root) == (tmp_path / "lake").resolve()


def test_report_only_groups_have_exact_changelog_ends_and_one_report_per_instance(broker: EmbeddedBroker) -> None:
    groups = simulated_groups(4, seed=3)
    write_simulated_groups(broker.bootstrap, "_rebalance_reports", groups)
    ends = ChangelogEndOffsets(broker.bootstrap)
    try:
        for g in groups:
            assert ends(sorted(g.end_offsets)) == g.end_offsets
    finally:
        ends.close()
    reports = read_latest_by_key(broker.bootstrap, "_rebalance_reports")
    assert len(reports) == sum(len(g.reports) for g in groups) == 12
    for g in groups:  # offset sums never beyond the changelog: lags stay meaningful after scaling down
        for r in g.reports:
            for task, offset_sum in r.task_offset_sums.items():
                end = g.end_offsets[(f"{g.group_id}-store0-changelog", task.partition)]
                assert offset_sum <= end
