"""Real Airflow for the DAG tests: a seeded broker, one `airflow standalone` on SQLite shared by test_dag_run and
test_dag_ui (their xdist group, "airflow"), `airflow dags test` runs."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from deltalake import DeltaTable

from assignor.runtime.kafka_io import read_latest_by_key
from jobs.local.airflow import LocalAirflow, _airflow_bin
from jobs.local.broker import EmbeddedBroker
from jobs.polling import wait_until
from jobs.processes import spawn
from tests.support.kafka_isolation import isolated
from tests.support.pipeline_kafka import create_topics, fill_changelog, publish_reports, report, stateful_topology
from tests.support.processes import FAULTHANDLER_ENV, wait_or_abort
from tests.support.signing import signing_env

DAG_ID = "rebalance_planning"
REPORTS_TOPIC = "_rebalance_reports"
USERS = "admin:admin,alice:user"  # alice: an ordinary user, named as the only approver in one test_dag_run test
ENDS = {0: [40, 50, 60, 70], 1: [30, 40, 50, 60]}  # subtopology -> changelog end offset per partition


def _scaled_out(group_id: str) -> list[dict[str, Any]]:
    """Instances a and b hold every task (each the other's standby); c just joined with nothing."""
    topology = stateful_topology(group_id, 2)
    tasks = [f"{s}_{p}" for s in ENDS for p in range(4)]
    a, b = tasks[::2], tasks[1::2]
    end = {f"{s}_{p}": e for s, es in ENDS.items() for p, e in enumerate(es)}
    sums_a, sums_b = {t: -2 for t in a} | {t: end[t] for t in b}, {t: -2 for t in b} | {t: end[t] for t in a}
    return [
        report(group_id, "a", active=a, standby=b, topology=topology, offset_sums=sums_a),
        report(group_id, "b", active=b, standby=a, topology=topology, offset_sums=sums_b),
        report(group_id, "c", topology=topology),
    ]


def seed_groups(bootstrap: str, reports_topic: str) -> None:
    """'orders' and 'payments' need moves to their new instance c; 'clicks' is balanced (a NOOP plan)."""
    topics = {reports_topic: 1, "clicks-in0": 2, "clicks-store0-changelog": 2}
    for g in ("orders", "payments"):
        topics |= {f"{g}-in{s}": 4 for s in ENDS} | {f"{g}-store{s}-changelog": 4 for s in ENDS}
    create_topics(bootstrap, topics, compacted=[reports_topic])
    for g in ("orders", "payments"):
        for s, ends in ENDS.items():
            fill_changelog(bootstrap, f"{g}-store{s}-changelog", ends)
    fill_changelog(bootstrap, "clicks-store0-changelog", [20, 20])
    publish_seeded_reports(bootstrap, reports_topic)


def publish_seeded_reports(bootstrap: str, reports_topic: str) -> None:
    """The seeded groups' state reports, reported now (the compacted topic keeps the latest per instance)."""
    clicks = stateful_topology("clicks", 1)
    publish_reports(
        bootstrap,
        reports_topic,
        [
            *_scaled_out("orders"),
            *_scaled_out("payments"),
            report("clicks", "x", active=["0_0"], standby=["0_1"], topology=clicks, offset_sums={"0_0": -2, "0_1": 20}),
            report("clicks", "y", active=["0_1"], standby=["0_0"], topology=clicks, offset_sums={"0_1": -2, "0_0": 20}),
        ],
    )


def rbp_env(bootstrap: str, lake: Path) -> dict[str, str]:
    """The RBP_ settings the DAG's tasks read."""
    return {
        "RBP_KAFKA_BOOTSTRAP": bootstrap,
        "RBP_LAKE_ROOT": str(lake),
        **signing_env(lake.parent),
        "RBP_KIP441_OVERRIDES": '{"*": {"num_standby_replicas": 1}}',  # the seeded reports do not say
        "RBP_PLANNER_PROCESSES": "2",  # the planner's worker processes under an Airflow task too
        "RBP_PLANNING_SCHEDULE": "",  # triggered runs only: unpausing must not start a scheduled run too
        "RBP_OBSERVE_SCHEDULE": "",
    }


@dataclass(frozen=True)
class SharedAirflow:
    """The session's `airflow standalone`, the seeded broker its runs read, and the lake its triggered runs write."""

    airflow: LocalAirflow
    broker: EmbeddedBroker
    lake: Path
    stack: ExitStack

    def stop(self) -> None:
        """Stop Airflow and delete the topics and groups made since it started (the seeded groups' reports and the
        plans its runs published), now: later tests on the session's broker reuse group names such as 'orders'."""
        self.stack.close()

    def refresh_reports(self) -> None:
        """Report the seeded groups again, now: planning leaves out reports older than 15 minutes (stale_report_age_ms),
        and the session's seeding is that old once the two modules have run a while on a loaded machine."""
        publish_seeded_reports(self.broker.bootstrap, REPORTS_TOPIC)


@contextmanager
def shared_standalone(home: Path, kafka: EmbeddedBroker) -> Iterator[SharedAirflow]:
    """`airflow standalone` (scheduler, dag-processor, triggerer, api-server) on the session's broker, seeded with
    seed_groups; the broker's topics and groups made meanwhile are deleted when it stops (SharedAirflow.stop)."""
    lake = home / "lake"
    with ExitStack() as stack:
        broker = stack.enter_context(isolated(kafka))
        seed_groups(broker.bootstrap, REPORTS_TOPIC)
        env = {**rbp_env(broker.bootstrap, lake), "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": USERS}
        # A shared machine under load starts the four Airflow processes slowly: a generous deadline, polled.
        airflow = stack.enter_context(LocalAirflow(home, extra_env=env).start("standalone", 600))
        airflow.wait_for_dag(DAG_ID)
        yield SharedAirflow(airflow, broker, lake, stack)


# `airflow` with Lake.merge wrapped: the first MERGE into the named table commits, then raises a retryable error
# (a marker file makes it once per test), as a task whose connection drops between two of its writes. `airflow dags
# test` runs the tasks in its own process, so the wrap reaches them; Airflow retries the task as it would any
# ConnectionError (the DAG's retries), and the retry runs the whole stage again.
FAIL_ONCE_AFTER = """
import sys
from pathlib import Path
from jobs.lakehouse.lake import Lake
table, marker = sys.argv[1], Path(sys.argv[2])
merge = Lake.merge
def merge_then_fail_once(self, name, *args, **kwargs):
    outcome = merge(self, name, *args, **kwargs)
    if name == table and not marker.exists():
        marker.write_text(name)
        raise ConnectionError(f"injected fault: connection lost after the {name} commit")
    return outcome
Lake.merge = merge_then_fail_once
sys.argv = ["airflow", *sys.argv[3:]]
from airflow.__main__ import main
sys.exit(main())
"""


def start_dags_test(
    airflow: LocalAirflow,
    conf: Mapping[str, Any],
    log: Path,
    env: Mapping[str, str],
    fail_once_after: tuple[str, Path] | None = None,
) -> subprocess.Popen[bytes]:
    """`airflow dags test` of the planning DAG in the background; SIGINT is what stops it (it ignores SIGTERM).
    ``fail_once_after`` (table, marker file): the first task that merges into that table fails right after it."""
    airflow_command = [_airflow_bin()]
    if fail_once_after is not None:
        table, marker = fail_once_after
        airflow_command = [sys.executable, "-c", FAIL_ONCE_AFTER, table, str(marker)]
    with log.open("wb") as out:
        return spawn(
            [*airflow_command, "dags", "test", DAG_ID, "--conf", json.dumps(dict(conf))],
            # faulthandler: a hang's every Python thread stack can be written to the log on demand (see finish).
            env={**airflow.env(), **env, **FAULTHANDLER_ENV},
            stdout=out,
            death_signal=signal.SIGINT,  # it ignores SIGTERM: a killed test or worker still stops it
        )


def plan_rows(lake: Path, snapshot_id: str | None = None) -> dict[str, dict[str, Any]]:
    """group_id -> the latest plans row (of one snapshot if given), read with delta-rs (no Spark needed)."""
    frame = DeltaTable(str(lake / "plans")).to_pandas().sort_values("created_at")
    if snapshot_id is not None:
        frame = frame[frame["snapshot_id"] == snapshot_id]

    def scalar(value: Any) -> Any:  # delta-rs gives NaN for a null number
        return None if isinstance(value, float) and math.isnan(value) else value

    return {str(r["group_id"]): {k: scalar(v) for k, v in r.items()} for _, r in frame.iterrows()}


def published_plans(bootstrap: str, topic: str) -> dict[str, dict[str, Any]]:
    """group_id -> the plan record on the plans topic."""
    records = read_latest_by_key(bootstrap, topic, {}, 10.0)
    return {k.decode(): json.loads(v) for k, v in records.items() if v is not None}


def run_of(airflow: LocalAirflow, process: subprocess.Popen[bytes], before: set[str], timeout_s: float = 300) -> str:
    """The run id `airflow dags test` created (one not in ``before``), once the api-server sees it."""
    new: set[str] = set()

    def appeared() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"airflow dags test exited {process.returncode} before its run appeared")
        new.update(run_ids(airflow) - before)
        return bool(new)

    wait_until(appeared, timeout_s, f"a new run of {DAG_ID}", poll_s=0.5, error=AssertionError)
    return new.pop()


def run_ids(airflow: LocalAirflow) -> set[str]:
    found = airflow.api("GET", f"/dags/{DAG_ID}/dagRuns", ok=(200, 404)) or {}
    return {str(r["dag_run_id"]) for r in found.get("dag_runs", [])}


def finish(process: subprocess.Popen[bytes], log: Path, timeout_s: float = 300) -> int:
    """Wait for `airflow dags test` to end; if it does not, the failure shows its log's end with every thread's
    stack (see wait_or_abort), and the process is killed either way, so no test leaves it behind."""
    try:
        return wait_or_abort(process, timeout_s, "airflow dags test")
    except AssertionError as hung:
        raise AssertionError(f"{hung}; the end of its log:\n" + log.read_text(errors="replace")[-12000:]) from None


def snapshot_of(airflow: LocalAirflow, run_id: str) -> str:
    """The snapshot id the run's extract task returned."""
    path = f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/extract/xcomEntries/return_value"
    return str(airflow.api("GET", path)["value"])


# What differs between two runs over the same input: the run's ids and the wall-clock times it wrote.
RUN_VARYING = {
    "snapshot_id",
    "plan_id",
    "captured_at",
    "created_at",
    "approved_at",
    "published_at",
    "realized_at",
    "validated_at",
    "event_time",
    "source_age_ms",  # the reports' age at each run's capture: the faulted run captures later than the clean one
}


def _hashable(value: Any) -> Any:
    if isinstance(value, np.ndarray | list | tuple):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, float) and math.isnan(value):
        return None
    return value.item() if isinstance(value, np.generic) else value


def lake_contents(lake: Path) -> dict[str, Counter[tuple[Any, ...]]]:
    """Every Delta table of the lake as a multiset of rows, without the columns in RUN_VARYING: two lakes made
    from the same input by clean runs compare equal, and a duplicated or missing row shows."""
    contents: dict[str, Counter[tuple[Any, ...]]] = {}
    for table in sorted(p for p in lake.iterdir() if (p / "_delta_log").is_dir()):
        frame = DeltaTable(str(table)).to_pandas()
        frame = frame[sorted(c for c in frame.columns if c not in RUN_VARYING)]
        contents[table.name] = Counter(
            tuple((c, _hashable(v)) for c, v in zip(frame.columns, row, strict=True))
            for row in frame.itertuples(index=False)
        )
    return contents
