"""The nightly DAG carried out through the running stack: the demo fleet reports to the containerised Kafka over
SASL_SSL, a real login triggers the run through the REST API over HTTPS, the stages run on the Spark Connect
container, an allowed approver answers through the API and publish runs on the signer (the stages on the worker),
the tasks calling the execution API over HTTPS; the worker is killed during a Spark stage and Kafka is down when
publish first runs.
The fleet must change: once group-1 runs settled (three instances, two actives each), one more instance is announced
before the run (as an operator scaling out does), so its plan must move actives to it; the instance starts once the
plan is published, the group converges and `rebalance_observe` marks the plan REALIZED. Then the Delta tables in
the volume pass their contract (schemas/tables) and the Data Docs pages load their styles and scripts from the site
itself."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from jobs.local.airflow import AirflowError
from jobs.orchestration.decision import APPROVE_ALL
from jobs.polling import wait_until
from tests.deploy.conftest import Stack, StackAirflow, record

PLANNING, OBSERVE = "rebalance_planning", "rebalance_observe"
TASKS = "airflow-worker"  # the Edge worker every stage runs on: the lake and the pipeline's Kafka login are there
SCALED_OUT, NEWCOMER = "group-1", "i4"
NEWCOMER_DIR = f"/data/fleet/{SCALED_OUT}/{NEWCOMER}"  # the fleet's state volume, where its instances keep theirs
# Rows of one lake table from the shared volume, read where the tasks run (the worker).
# argv: the table, then its columns.
LAKE_ROWS = """
import json, os, sys
from deltalake import DeltaTable
rows = DeltaTable("/data/lake/" + sys.argv[1]).to_pyarrow_table(columns=sys.argv[2:]).to_pylist()
print(json.dumps(rows), flush=True)
# Skips the interpreter's teardown, where deltalake's runtime once aborted the process ("terminate called without
# an active exception", exit 134) after the rows were printed: seen live.
os._exit(0)
"""
# The lake's contract check (jobs.lakehouse.contract) on the volume; the same teardown skipped.
LAKE_CHECK = """
import os, sys
from jobs.lakehouse.contract import main
code = main(["/data/lake"])
sys.stdout.flush()
os._exit(code)
"""
# The group's latest state reports, read where the pipeline's login may read the reports topic (the worker; an
# application may only write it). argv: the group. Prints them as a JSON list of the reports' JSON texts.
GROUP_REPORTS = """
import json, os, sys
from assignor.runtime.kafka_io import read_latest_by_key
from jobs.settings import Settings
s = Settings()
from assignor.protocol.restored_offsets import is_restored_key
reports = read_latest_by_key(s.kafka_bootstrap, s.reports_topic, s.kafka_config, s.kafka_timeout_s)
group = [v.decode() for k, v in sorted(reports.items())
         if v is not None and k.decode().startswith(sys.argv[1] + "/") and not is_restored_key(k.decode())]
print(json.dumps(group))
sys.stdout.flush()
os._exit(0)
"""
# Every record on the plans topic, read where the pipeline's login may read it (the worker): how many carry each
# plan id. Prints them as JSON.
PLAN_RECORDS = """
import collections, json, os
from assignor.runtime.kafka_io import read_records
from jobs.settings import Settings
s = Settings()
counts = collections.Counter()
for _, _, _, value in read_records(s.kafka_bootstrap, s.plans_topic, s.kafka_config, s.kafka_timeout_s):
    if value is not None:
        counts[str(json.loads(value).get("plan_id"))] += 1
print(json.dumps(counts), flush=True)
os._exit(0)
"""
FLEET_INSTANCES, FLEET_TASKS = 3, 6  # docker-compose.yml's demo-fleet: --instances 3, 6 partitions (the default)
# The Kafka Streams group (docker-compose.yml's streams-app: the reference app with the plugin, instances i1 and i2):
# 6 input partitions, a stateless and a stateful subtopology, so 12 tasks. A third instance is announced too; its
# plan must move stateless actives to it.
STREAMS_APP, STREAMS_INSTANCES, STREAMS_TASKS, STREAMS_NEWCOMER = "streams-app-orders", 2, 12, "i3"
# Run in the streams-app container with its own login (RBP_KAFKA_CONFIG there): a report for a Kafka Streams
# instance about to join, under the process id Kafka Streams will read from its state directory (the file it keeps
# there, written now). argv: the state directory, the application id, the template report. Prints the process id.
ANNOUNCE_STREAMS = """
import dataclasses, json, sys, time, uuid
from pathlib import Path
from confluent_kafka import Producer
from assignor.protocol.state_report import StateReport
from jobs.settings import Settings
state_dir, app_id, template = Path(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3])
s = Settings()
metadata = state_dir / app_id / "kafka-streams-process-metadata"
metadata.parent.mkdir(parents=True, exist_ok=True)
process_id = str(uuid.uuid4())
metadata.write_text(json.dumps({"processId": process_id}), encoding="utf-8")
report = dataclasses.replace(
    StateReport.from_json(template), process_id=process_id, member_id="", client_id="", host="", generation=-1,
    reported_at=int(time.time() * 1000), active_tasks=(), standby_tasks=(), warmup_tasks=(), task_offset_sums={},
    task_lags={}, plan_id=None, fallback_reason=None, extra={},
)
producer = Producer({"bootstrap.servers": s.kafka_bootstrap, **s.kafka_config})
producer.produce(s.reports_topic, key=report.key.encode(), value=report.encode())
assert producer.flush(60) == 0, "the announcement was not delivered"
print(process_id)
"""
# Run in the fleet's container with its own login: a report for an instance about to join, made from one of its
# group's reports with no tasks and no state, under the process id its state directory will have. Without it no
# plan could name the instance before it joins. argv: the state directory, the report. Prints the process id.
ANNOUNCE = """
import dataclasses, json, sys, time
from pathlib import Path
from confluent_kafka import Producer
from assignor.protocol.state_report import StateReport
from assignor.runtime.state_dir import StateDirectory
from jobs.settings import Settings
state_dir, template = Path(sys.argv[1]), json.loads(sys.argv[2])
s = Settings()
state_dir.mkdir(parents=True, exist_ok=True)
report = dataclasses.replace(
    StateReport.from_json(template), process_id=StateDirectory(state_dir).process_id, member_id="", client_id="",
    host="", generation=-1, reported_at=int(time.time() * 1000), active_tasks=(), standby_tasks=(), warmup_tasks=(),
    task_offset_sums={}, task_lags={}, plan_id=None, fallback_reason=None, extra={},
)
producer = Producer({"bootstrap.servers": s.kafka_bootstrap, **s.kafka_config})
producer.produce(s.reports_topic, key=report.key.encode(), value=report.encode())
assert producer.flush(60) == 0, "the announcement was not delivered"
print(report.process_id)
"""
# Flags of `rebalance-planner fleet` an instance takes over: the group's KIP-441 settings.
KIP441_FLAGS = (
    "--acceptable-recovery-lag",
    "--max-warmup-replicas",
    "--num-standby-replicas",
    "--probing-rebalance-interval-ms",
)


def wait_for_dag(airflow: StackAirflow, dag_id: str, timeout_s: float) -> None:
    """Until the dag-processor has parsed ``dag_id``; at once, with Airflow's trace, if it failed to import."""

    def parsed() -> bool:
        errors = airflow.api("GET", "/importErrors")["import_errors"]
        failed = [e for e in errors if str(e["filename"]).endswith(f"{dag_id}.py")]
        if failed:
            raise AssertionError(f"{dag_id} failed to import: {str(failed[0]['stack_trace'])[-1500:]}")
        return bool(airflow.api("GET", f"/dags/{dag_id}", ok=(200, 404)).get("dag_id") == dag_id)

    wait_until(parsed, timeout_s, f"the dag-processor to parse {dag_id}", poll_s=2)


def lake_rows(stack: Stack, table: str, *columns: str) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = json.loads(stack.run(TASKS, "python", "-", table, *columns,
                                                         stdin=LAKE_ROWS))  # fmt: skip
    return rows


def plans_of(stack: Stack, snapshot_id: str) -> dict[str, dict[str, object]]:
    """The snapshot's plans by group: id, status, moves."""
    rows = lake_rows(stack, "plans", "plan_id", "snapshot_id", "group_id", "status", "moves")
    return {str(r["group_id"]): r for r in rows if r["snapshot_id"] == snapshot_id}


def snapshot_of(airflow: StackAirflow, run_id: str) -> str:
    """The snapshot id the run's extract task returned."""
    path = f"/dags/{PLANNING}/dagRuns/{run_id}/taskInstances/extract/xcomEntries/return_value"
    return str(airflow.api("GET", path)["value"])


def start_newcomer(stack: Stack) -> None:
    """The announced instance joins: started in the fleet's container with the fleet's own settings, as an operator
    scaling out would, its output in its state directory."""
    inspected = subprocess.run(
        ["podman", "inspect", "--format", "{{json .Config.Cmd}}", stack.container("demo-fleet")],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    fleet = json.loads(inspected.stdout)
    settings = [arg for flag in KIP441_FLAGS for arg in (flag, fleet[fleet.index(flag) + 1])]
    command = ["python", "-m", "jobs.cli.runtime", "instance", "--group", SCALED_OUT, "--state-dir", NEWCOMER_DIR,
               *settings]  # fmt: skip
    subprocess.run(
        ["podman", "exec", "-d", stack.container("demo-fleet"), "sh", "-c",
         f'exec {" ".join(command)} >>{NEWCOMER_DIR}/instance.log 2>&1'],
        capture_output=True, text=True, check=True,
    )  # fmt: skip


def settled_reports(stack: Stack, group: str, instances: int, tasks: int, timeout_s: float) -> list[str]:
    """The group's reports once they show it settled: every task active on exactly one of its instances, each
    instance as many. A snapshot taken mid-rebalance (tasks revoked, nobody's yet) lets a plan hand those tasks
    to a newcomer without moving any: the last run's 0-move plan (docs/deployment.md)."""
    found: list[str] = []

    def settled() -> bool:
        reports = json.loads(stack.run(TASKS, "python", "-", group, stdin=GROUP_REPORTS))
        actives = [[json.dumps(t) for t in json.loads(r)["active_tasks"]] for r in reports]
        every = [t for held in actives for t in held]
        found[:] = reports
        return (
            len(reports) == instances
            and len(every) == len(set(every)) == tasks
            and {len(held) for held in actives} == {tasks // instances}
        )

    wait_until(settled, timeout_s, f"{group} settled: {tasks} tasks, {instances} instances", poll_s=10)
    return found


def task_tries(airflow: StackAirflow, run_id: str) -> dict[str, tuple[str, int]]:
    """Each task of the planning run: its state and try number."""
    tis = airflow.api("GET", f"/dags/{PLANNING}/dagRuns/{run_id}/taskInstances")["task_instances"]
    return {str(t["task_id"]): (str(t["state"]), int(t["try_number"])) for t in tis}


def assert_honoring(stack: Stack, group: str, plan_id: str) -> None:
    """The group's reports say its leader honors ``plan_id`` (not Kafka's own assignment arriving at the target)."""
    reports = [json.loads(r) for r in json.loads(stack.run(TASKS, "python", "-", group,
                                                           stdin=GROUP_REPORTS))]  # fmt: skip
    named = sorted({str(r.get("plan_id")) for r in reports})
    fallbacks = sorted({str(r.get("fallback_reason")) for r in reports if r.get("fallback_reason")})
    record(f"{group}: reports name plan(s) {named}, fallback reasons {fallbacks}")
    assert plan_id in named, (group, plan_id, named, fallbacks)


def start_streams_newcomer(stack: Stack) -> None:
    """The announced Kafka Streams instance joins: one more JVM in the streams-app container with the same settings
    (docker/streams-app/start.sh --join), its output beside its state."""
    subprocess.run(
        ["podman", "exec", "-d", stack.container("streams-app"), "sh", "-c",
         f"exec /opt/rebalance-planner/docker/streams-app/start.sh --join {STREAMS_NEWCOMER}"
         f" >>/data/streams-app/{STREAMS_NEWCOMER}.log 2>&1"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip


def kill_and_start(stack: Stack, service: str) -> None:
    """A crash: SIGKILL to the container (its processes with it), then started again (at once, as its restart
    policy would; `podman start` of one the policy already restarted changes nothing)."""
    container = stack.container(service)
    subprocess.run(["podman", "kill", "-s", "KILL", container], check=True, capture_output=True)
    subprocess.run(["podman", "wait", container], check=False, capture_output=True, timeout=120)
    subprocess.run(["podman", "start", container], check=False, capture_output=True, timeout=120)

    def running() -> bool:
        state = subprocess.run(["podman", "inspect", "--format", "{{.State.Status}}", container],
                               capture_output=True, text=True, check=True)  # fmt: skip
        return state.stdout.strip() == "running"

    wait_until(running, 120, f"{service} running again after it was killed", poll_s=1)


def first_running(airflow: StackAirflow, run_id: str, tasks: tuple[str, ...], timeout_s: float) -> str:
    """The first of ``tasks`` seen running in the planning run; AssertionError if a task fails first."""
    seen: list[str] = []

    def running() -> bool:
        states = airflow.task_states(PLANNING, run_id)
        failed = sorted(t for t, s in states.items() if s in ("failed", "upstream_failed"))
        assert not failed, f"task(s) {failed} failed: {states}"
        seen.extend(t for t in tasks if states.get(t) == "running")
        return bool(seen)

    wait_until(running, timeout_s, f"one of {tasks} to run", poll_s=1)
    return seen[0]


def observe_until_realized(airflow: StackAirflow, stack: Stack, plan_id: str, group: str, timeout_s: float) -> int:
    """Run rebalance_observe until it marks ``plan_id`` REALIZED; how many observe runs it took."""
    runs = 0

    def realized() -> bool:
        nonlocal runs
        run_id = airflow.trigger(OBSERVE)
        runs += 1
        assert airflow.wait_for_run(OBSERVE, run_id, timeout_s=600) == "success", airflow.task_states(OBSERVE, run_id)
        statuses = {r["plan_id"]: r["status"] for r in lake_rows(stack, "plans", "plan_id", "status")}
        record(f"observe run {runs}: {group}'s plan {statuses[plan_id]}")
        return statuses[plan_id] == "REALIZED"

    wait_until(realized, timeout_s, f"{group}'s plan {plan_id} to be observed REALIZED", poll_s=20)
    return runs


@pytest.mark.timeout(4800)  # a nightly run with faults on a shared 2-core machine, then the group converging
def test_a_scale_out_is_planned_through_faults_approved_published_and_observed_realized(
    stack: Stack, airflow: StackAirflow
) -> None:
    admin, approver = "admin", next(user for user in airflow.passwords if user != "admin")
    wait_for_dag(airflow, PLANNING, timeout_s=300)
    wait_for_dag(airflow, OBSERVE, timeout_s=300)
    # The fleet changes before tonight's run: once group-1 runs settled, a fourth instance is announced; once the
    # Kafka Streams group (reporting through its plugin with its own login over TLS) runs settled, a third.
    waited = time.monotonic()
    template = settled_reports(stack, SCALED_OUT, FLEET_INSTANCES, FLEET_TASKS, timeout_s=900)[0]
    record(f"{SCALED_OUT} settled ({FLEET_TASKS} tasks on {FLEET_INSTANCES} instances) after "
           f"{time.monotonic() - waited:.0f} s of waiting")  # fmt: skip
    newcomer = stack.run("demo-fleet", "python", "-", NEWCOMER_DIR, template, stdin=ANNOUNCE).strip()
    streams_template = settled_reports(stack, STREAMS_APP, STREAMS_INSTANCES, STREAMS_TASKS, timeout_s=900)[0]
    record(f"{STREAMS_APP} (Kafka Streams, plugin, SASL_SSL as rbp-streams-app) settled ({STREAMS_TASKS} tasks on "
           f"{STREAMS_INSTANCES} instances) after {time.monotonic() - waited:.0f} s of waiting")  # fmt: skip
    streams_newcomer = stack.run(
        "streams-app", "python", "-", f"/data/streams-app/{STREAMS_NEWCOMER}", STREAMS_APP, streams_template,
        stdin=ANNOUNCE_STREAMS,
    ).strip()  # fmt: skip
    started = time.monotonic()
    # Two-person rule: the admin triggers, the approver (RBP_APPROVERS) answers.
    run_id = airflow.trigger(PLANNING)
    # Faults during the run: the worker's container killed (the running stage dies with it) while a Spark stage runs,
    # then Kafka down when publish first runs (below). The retries must end the run as a clean one would: each group
    # planned once, the plan right, the lake within its contract (checked below). Kafka is not
    # restarted during extract: the fleet's groups rebalance after a broker restart, and the snapshot the retried
    # extract takes then caught them mid-rebalance (the last run's 0-move plans).
    killed = first_running(airflow, run_id, ("lags", "plan", "validate"), timeout_s=2400)
    kill_and_start(stack, TASKS)
    record(f"fault: the worker killed and started {time.monotonic() - started:.0f} s after the trigger ({killed})")
    # settle_s: the answer must come after the scheduler has taken the paused task's executor event; on a loaded
    # machine that took seconds, and an earlier answer made Airflow 3.3 mark the approval FAILED ("state changed
    # externally"), seen live here.
    airflow.wait_for_approval(PLANNING, run_id, "approval", timeout_s=2400, settle_s=30)
    # The admin may not answer its own run (nor is it a named approver): refused, and the run still waits.
    with pytest.raises(AirflowError, match="HTTP 403"):
        airflow.answer(PLANNING, run_id, "approval", [APPROVE_ALL], {}, user=admin)
    # Kafka down while publish runs: it is stopped before the answer and started again once publish has tried (it
    # reads the plans topic for the groups' sequences before it signs), so publish must retry and still send each
    # plan once (one PUBLISHED plan per group, checked below).
    subprocess.run(["podman", "stop", "-t", "20", stack.container("kafka")], check=True, capture_output=True)
    stopped = time.monotonic()
    airflow.answer(PLANNING, run_id, "approval", [APPROVE_ALL], {}, user=approver)

    publish_running: list[float] = []  # when publish was first seen running

    def publish_tried() -> bool:
        state, tries = task_tries(airflow, run_id).get("publish", ("none", 0))
        assert state not in ("failed", "upstream_failed", "success"), (state, tries)
        if state == "running" and not publish_running:
            publish_running.append(time.monotonic())
        # Retried, or still trying after 90 s of its own bounded reconnects: either way it met the stopped Kafka.
        return (
            state == "up_for_retry"
            or (state == "running" and tries > 1)
            or (bool(publish_running) and time.monotonic() - publish_running[0] > 90)
        )

    wait_until(publish_tried, 900, "publish to run against the stopped Kafka", poll_s=1)
    subprocess.run(["podman", "start", stack.container("kafka")], check=True, capture_output=True, timeout=120)
    record(f"fault: Kafka stopped for {time.monotonic() - stopped:.0f} s around the approval; publish ran against "
           f"it ({task_tries(airflow, run_id).get('publish')}), Kafka started again")  # fmt: skip
    assert airflow.wait_for_run(PLANNING, run_id, timeout_s=1200) == "success", airflow.task_states(PLANNING, run_id)
    record(f"planning run (trigger to success, approval and faults included): {time.monotonic() - started:.0f} s")
    instances = airflow.api("GET", f"/dags/{PLANNING}/dagRuns/{run_id}/taskInstances")["task_instances"]
    tries = {str(t["task_id"]): int(t["try_number"]) for t in instances}
    record(f"tries: {dict(sorted(tries.items()))}")
    # Where each task ran (the Edge worker's name): publish on the signer, every stage on the worker.
    hosts = {str(t["task_id"]): str(t.get("hostname")) for t in instances}
    record(f"ran on: {dict(sorted(hosts.items()))}")
    assert hosts["publish"] == "airflow-signer", hosts
    assert {hosts[t] for t in ("extract", "lags", "plan", "validate", "review")} == {TASKS}, hosts
    assert tries[killed] > 1, tries  # the killed stage really ran again
    # Every demo group reported through SASL and was planned on the Spark Connect container, once (nothing from the
    # killed attempt); group-1's plan gives the announced instance its share, so it moves tasks, and publish sent it.
    snapshot = snapshot_of(airflow, run_id)
    planned = sorted(str(r["group_id"]) for r in lake_rows(stack, "plans", "snapshot_id", "group_id")
                     if r["snapshot_id"] == snapshot)  # fmt: skip
    assert planned == ["group-1", "group-2", "group-3", STREAMS_APP], planned
    plans = plans_of(stack, snapshot)
    record(f"plans: { {g: (p['status'], p['moves']) for g, p in sorted(plans.items())} }")
    scaled, streams = plans[SCALED_OUT], plans[STREAMS_APP]
    assert int(str(scaled["moves"])) > 0 and scaled["status"] == "PUBLISHED", scaled
    # The newcomers join; each group's leader honors its plan step by step (warmups first) and observe sees the
    # group run the target.
    start_newcomer(stack)
    if streams["status"] == "PUBLISHED":
        start_streams_newcomer(stack)
    joined = time.monotonic()
    # Publish ran twice (Kafka stopped under its first try): each plan is on the plans topic once.
    sent = json.loads(stack.run(TASKS, "python", "-", stdin=PLAN_RECORDS))
    record(f"plans topic: records per plan id {dict(sorted(sent.items()))}")
    for group in (SCALED_OUT, STREAMS_APP):
        assert sent.get(str(plans[group]["plan_id"])) == 1, (group, sent)
    runs = observe_until_realized(airflow, stack, str(scaled["plan_id"]), SCALED_OUT, timeout_s=1800)
    record(f"{SCALED_OUT}/{NEWCOMER} (process {newcomer[:8]}) joined; plan REALIZED after "
           f"{time.monotonic() - joined:.0f} s, {runs} observe run(s)")  # fmt: skip
    assert_honoring(stack, SCALED_OUT, str(scaled["plan_id"]))
    # The Kafka Streams group: planned with moves (stateless actives to its newcomer), published, honored by its
    # plugin's leader, REALIZED.
    assert int(str(streams["moves"])) > 0 and streams["status"] == "PUBLISHED", streams
    runs = observe_until_realized(airflow, stack, str(streams["plan_id"]), STREAMS_APP, timeout_s=1800)
    record(f"{STREAMS_APP}/{STREAMS_NEWCOMER} (process {streams_newcomer[:8]}) joined; plan REALIZED after "
           f"{time.monotonic() - joined:.0f} s, {runs} more observe run(s)")  # fmt: skip
    assert_honoring(stack, STREAMS_APP, str(streams["plan_id"]))


def test_the_lake_in_the_volume_passes_its_contract(stack: Stack) -> None:
    """After the night and the observe runs: every table in the volume has the columns and types of its schema file,
    no null where the contract forbids it, no key twice (jobs.lakehouse.contract, run where the tasks run)."""
    done = subprocess.run(
        ["podman", "exec", "-i", stack.container(TASKS), "python", "-"],
        input=LAKE_CHECK, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    outcome = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
    assert done.returncode == 0, (outcome, done.stderr[-2000:])
    tables = outcome["tables"]
    rows = ", ".join(f"{name} {table['rows']}" for name, table in sorted(tables.items()))
    record(f"lake contract: {len(tables)} tables pass ({rows}); absent: {outcome['absent']}")
    # The tables a night and an observe run write are all there.
    written = {"snapshots", "member_reports", "task_lags", "plans", "plan_assignments", "assignment_history"}
    assert written <= set(tables), sorted(tables)


# Run on the worker: the Data Docs site validate built in the volume, every page's stylesheet and script
# references, and whether the pinned assets were copied into the site.
DATA_DOCS = """
import json, pathlib, re
site = pathlib.Path("/data/data_docs")
pages = sorted(site.rglob("*.html"))
links = sorted({m for p in pages for m in re.findall(r'(?:src|href)="([^"]+\\.(?:js|css))"', p.read_text())})
vendored = (site / "static/vendor/.manifest.sha256").is_file()
print(json.dumps({"pages": len(pages), "links": links, "vendored": vendored}))
"""


def test_the_data_docs_pages_load_their_styles_and_scripts_from_the_site(stack: Stack) -> None:
    """The image carries the pinned assets (its data-docs-assets stage); validate copied them into the site and
    rewrote the pages onto them: no stylesheet or script from another origin on the approval page's origin."""
    site = json.loads(stack.run(TASKS, "python", "-", stdin=DATA_DOCS))
    assert site["pages"] > 0 and site["vendored"], site
    outside = [link for link in site["links"] if "://" in link or link.startswith("//")]
    assert outside == [], outside
    assert any("static/vendor/" in link for link in site["links"]), site["links"]
