"""Stages killed between their writes, retried, or run at the same time converge on the result of one clean run.

A kill is real: the stage runs in a child process that SIGKILLs itself right after one table's Delta commit, so
the lake holds exactly what a crash at that point leaves (each commit is atomic; the next is never started).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from jobs.cli.main import main
from jobs.lakehouse.lake import Lake
from jobs.local.broker import EmbeddedBroker
from jobs.pipeline.stage import StageInputError, resolve_snapshot
from jobs.settings import Settings
from tests.support.pipeline_kafka import create_topics, fill_changelog, publish_reports, report, stateful_topology
from tests.support.processes import wait_or_abort, with_faulthandler
from tests.system.test_pipeline_cli import env  # noqa: F401  (fixture: the CLI's RBP_ settings)
from tests.system.test_pipeline_e2e import seed_fleet

REPO = Path(__file__).resolve().parents[2]
STAGE_DEADLINE_S = 300  # a stage over this toy lake takes seconds; a hang shows its stacks instead of eating the run
# Runs the CLI with Lake.merge wrapped: after the named table's commit the process kills itself.
KILLED_AFTER = """
import os, signal, sys
from jobs.lakehouse.lake import Lake
table, argv = sys.argv[1], sys.argv[2:]
merge = Lake.merge
def merge_then_die(self, name, *args, **kwargs):
    outcome = merge(self, name, *args, **kwargs)
    if name == table:
        os.kill(os.getpid(), signal.SIGKILL)
    return outcome
Lake.merge = merge_then_die
from jobs.cli.main import main
sys.exit(main(argv))
"""


def killed_after(table: str, *argv: str) -> None:
    process = subprocess.Popen([sys.executable, "-c", KILLED_AFTER, table, *argv], cwd=REPO, env=with_faulthandler())
    code = wait_or_abort(process, STAGE_DEADLINE_S, f"{argv[0]} to be killed after {table}")
    assert code == -signal.SIGKILL, f"the stage was not killed after {table} (exit {code})"


def cli(*argv: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "jobs.cli.main", *argv], cwd=REPO, env=with_faulthandler())


def wait_all(*runs: subprocess.Popen[bytes]) -> list[int]:
    """Every run's exit code; a run past the deadline fails the test with its threads' stacks (all are ended)."""
    try:
        return [wait_or_abort(run, STAGE_DEADLINE_S, f"run {n} of {len(runs)}") for n, run in enumerate(runs, 1)]
    finally:
        for run in runs:
            if run.poll() is None:
                run.kill()
                run.wait(30)


def rows(lake: Lake, table: str, snapshot_id: str) -> list[tuple[object, ...]]:
    return sorted(tuple(r) for r in lake.read(table, snapshot_id).collect())


def test_an_extract_killed_between_its_writes_is_redone_from_one_fresh_read(
    env: Settings,  # noqa: F811
    broker: EmbeddedBroker,
    spark: SparkSession,
) -> None:
    seed_fleet(broker, env)
    killed_after("member_reports", "extract", "--snapshot-id", "s1")
    lake = Lake(spark, env.lake_root)
    leftover = lake.staging("merge-member_reports")  # what a kill inside a MERGE leaves
    leftover.mkdir(parents=True)
    assert rows(lake, "member_reports", "s1"), "the kill came after member_reports was committed"
    with pytest.raises(StageInputError, match="unknown snapshot_id 's1'"):
        resolve_snapshot(lake, "s1")  # incomplete: no snapshots row, so no later stage reads it
    # Between the two runs instance c reports again, now holding a standby: the retry must see only the new read.
    publish_reports(
        broker.bootstrap,
        env.reports_topic,
        [report("orders", "c", standby=["0_0"], topology=stateful_topology("orders", 2))],
    )
    assert main(["extract", "--snapshot-id", "s1"]) == 0
    reports = lake.read("member_reports", "s1").collect()
    assert Counter((r["group_id"], r["process_id"]) for r in reports) == Counter(
        {("orders", "a"): 1, ("orders", "b"): 1, ("orders", "c"): 1, ("clicks", "x"): 1, ("clicks", "y"): 1}
    )
    assert next(r for r in reports if r["process_id"] == "c")["standby_tasks"] == ["0_0"]
    assert resolve_snapshot(lake, "s1") == "s1"
    # The retry's own intermediate files are gone; the killed attempt's stay for their grace period (a remote engine
    # may still be reading them) and go once older than that.
    assert list((env.lake_root / Lake.STAGING).iterdir()) == [leftover]
    Lake(spark, env.lake_root, staging_grace_s=0).clear_staging()
    assert not any((env.lake_root / Lake.STAGING).iterdir()), "no intermediate files are left behind"


def test_a_plan_killed_between_its_writes_converges_on_a_clean_runs_plans(
    env: Settings,  # noqa: F811
    broker: EmbeddedBroker,
    spark: SparkSession,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seed_fleet(broker, env)
    assert main(["extract", "--snapshot-id", "s1"]) == 0 and main(["lags"]) == 0
    clean_root = env.lake_root.with_name("clean-lake")
    shutil.copytree(env.lake_root, clean_root)
    killed_after("plan_assignments", "plan")
    lake = Lake(spark, env.lake_root)
    assert rows(lake, "plan_assignments", "s1") and not rows(lake, "plans", "s1")
    assert main(["plan"]) == 0
    monkeypatch.setenv("RBP_LAKE_ROOT", str(clean_root))
    assert main(["plan"]) == 0
    clean = Lake(spark, clean_root)
    assert rows(lake, "plan_assignments", "s1") == rows(clean, "plan_assignments", "s1")
    retried = {r["group_id"]: (r["status"], r["moves"], r["rounds"]) for r in lake.read("plans", "s1").collect()}
    assert retried == {
        r["group_id"]: (r["status"], r["moves"], r["rounds"]) for r in clean.read("plans", "s1").collect()
    }
    assert sorted(retried) == ["clicks", "orders"]


def test_lags_and_validate_killed_after_their_first_bucket_converge_on_a_clean_runs_result(
    env: Settings,  # noqa: F811
    broker: EmbeddedBroker,
    spark: SparkSession,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("RBP_STAGE_BUCKET_GROUPS", "1")  # one group per bucket
    seed_fleet(broker, env)
    # A second group to plan (clicks is settled: NOOP): payments runs on p alone, q just joined.
    create_topics(broker.bootstrap, {"payments-in0": 4, "payments-store0-changelog": 4})
    fill_changelog(broker.bootstrap, "payments-store0-changelog", [3, 4, 5, 6])
    payments = stateful_topology("payments", 1)
    tasks = [f"0_{p}" for p in range(4)]
    publish_reports(
        broker.bootstrap,
        env.reports_topic,
        [
            report("payments", "p", active=tasks, topology=payments, offset_sums=dict.fromkeys(tasks, -2)),
            report("payments", "q", topology=payments),
        ],
    )
    assert main(["extract", "--snapshot-id", "s1"]) == 0
    clean_root = env.lake_root.with_name("clean-lake")
    shutil.copytree(env.lake_root, clean_root)
    lake = Lake(spark, env.lake_root)
    killed_after("task_lags", "lags")
    assert len({r[1] for r in rows(lake, "task_lags", "s1")}) == 1, "the kill came after the first bucket"
    assert main(["lags"]) == 0 and main(["plan"]) == 0
    assert Counter(r["status"] for r in lake.read("plans", "s1").collect())["PENDING"] == 2
    killed_after("plans", "validate")
    statuses = Counter(r["status"] for r in lake.read("plans", "s1").collect())
    assert statuses["PENDING"] == 1 and statuses["NOOP"] == 1, "the kill came after the first bucket's plans"
    assert main(["validate"]) == 0
    versions = {t: lake.version(t) for t in ("task_lags", "plans", "validation_results")}
    assert main(["lags"]) == 0 and main(["validate"]) == 0  # finished: nothing new is written
    assert {t: lake.version(t) for t in versions} == versions
    monkeypatch.setenv("RBP_LAKE_ROOT", str(clean_root))
    monkeypatch.setenv("RBP_STAGE_BUCKET_GROUPS", "10000")
    assert main(["lags"]) == 0 and main(["plan"]) == 0 and main(["validate"]) == 0
    clean = Lake(spark, clean_root)
    assert rows(lake, "task_lags", "s1") == rows(clean, "task_lags", "s1")

    def verdicts(at: Lake) -> dict[str, tuple[object, ...]]:
        return {r["group_id"]: (r["status"], r["reason"], r["target_digest"]) for r in at.read("plans", "s1").collect()}

    def results(at: Lake) -> list[tuple[object, ...]]:
        return sorted(
            (r["plan_id"], r["expectation"], r["success"], r["unexpected_count"])
            for r in at.read("validation_results").collect()
        )

    assert verdicts(lake) == verdicts(clean) and sorted(verdicts(lake)) == ["clicks", "orders", "payments"]
    assert results(lake) == results(clean) and results(lake)


def test_two_planning_runs_at_once_plan_every_group_once(
    env: Settings,  # noqa: F811
    broker: EmbeddedBroker,
    spark: SparkSession,
) -> None:
    seed_fleet(broker, env)
    assert main(["extract", "--snapshot-id", "s1"]) == 0 and main(["lags"]) == 0
    runs = [cli("plan"), cli("plan")]
    assert wait_all(*runs) == [0, 0]
    lake = Lake(spark, env.lake_root)
    plans = Counter(r["group_id"] for r in lake.read("plans", "s1").collect())
    assert plans == Counter({"orders": 1, "clicks": 1})
    assignments = rows(lake, "plan_assignments", "s1")
    assert len(assignments) == len(set(assignments))


def test_publish_and_observe_at_once_lose_no_status(
    env: Settings,  # noqa: F811
    broker: EmbeddedBroker,
    spark: SparkSession,
) -> None:
    seed_fleet(broker, env)
    for command in (["extract"], ["lags"], ["plan"], ["validate"], ["approve", "--by", "bob"]):
        assert main(command) == 0, command
    runs = [cli("publish"), cli("observe")]
    assert wait_all(*runs) == [0, 0]
    assert main(["observe"]) == 0
    lake = Lake(spark, env.lake_root)
    plans = lake.read("plans").collect()
    assert Counter(r["plan_id"] for r in plans).most_common(1)[0][1] == 1
    orders = next(r for r in plans if r["group_id"] == "orders")
    assert orders["status"] == "PUBLISHED" and orders["published_at"] is not None and orders["approved_by"] == "bob"
