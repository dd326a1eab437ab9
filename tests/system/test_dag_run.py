"""The planning DAG end to end with `airflow dags test` on the embedded broker and engine, the approval answered
through the REST API of a real api-server on the same metadata database (the session's standalone, shared with
test_dag_ui)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from assignor.protocol.plans import ApprovedPlan, read_record
from jobs.local.airflow import AirflowError, LocalAirflow
from jobs.local.broker import EmbeddedBroker
from jobs.orchestration.decision import APPROVE_ALL, APPROVE_SELECTED, REJECT_ALL
from jobs.orchestration.tasks import KAFKA_CONN_ID
from tests.support.airflow_harness import (
    DAG_ID,
    SharedAirflow,
    finish,
    lake_contents,
    plan_rows,
    published_plans,
    rbp_env,
    run_ids,
    run_of,
    start_dags_test,
)
from tests.support.pipeline_kafka import create_topics
from tests.support.signing import VERIFY_KEYS

# One Airflow for this module and test_dag_ui (conftest's airflow_standalone; each start costs 35-47 s): one worker
# runs both modules in turn.
pytestmark = pytest.mark.xdist_group("airflow")


@pytest.fixture(autouse=True)
def fresh_reports(airflow_standalone: SharedAirflow) -> None:
    """Every run plans from reports made now, not at the shared Airflow's start (see SharedAirflow.refresh_reports)."""
    airflow_standalone.refresh_reports()


@pytest.fixture(scope="module")
def module_broker(airflow_standalone: SharedAirflow) -> EmbeddedBroker:
    """The session's broker, seeded for the Airflow modules; its topics and groups are deleted after them."""
    return airflow_standalone.broker


@pytest.fixture(scope="module")
def api_server(airflow_standalone: SharedAirflow) -> LocalAirflow:
    """The shared Airflow with the planning DAG paused: `airflow dags test` runs its run's tasks itself, and the
    scheduler queues the scheduled tasks of unpaused DAGs only (two would run each task); test_dag_ui's trigger
    unpauses it again."""
    airflow_standalone.airflow.api("PATCH", f"/dags/{DAG_ID}", {"is_paused": True})
    return airflow_standalone.airflow


def run_and_answer(
    airflow: LocalAirflow,
    broker: EmbeddedBroker,
    tmp_path: Path,
    conf: dict[str, object],
    answer: list[str],
    form: dict[str, Any],
    extra_env: dict[str, str] | None = None,
    answered_by: str = "admin",
    refused: tuple[str, ...] = (),
    fail_once_after: tuple[str, Path] | None = None,
    seen: dict[str, Any] | None = None,
) -> tuple[Path, str]:
    """One `airflow dags test` run with its own lake and plans topic, answered over REST; (lake, plans topic).
    ``seen`` gets the run id and the approval page's body."""
    lake, plans_topic = tmp_path / "lake", f"_plans_{tmp_path.name}"
    create_topics(broker.bootstrap, {plans_topic: 1}, compacted=[plans_topic])
    env = {**rbp_env(broker.bootstrap, lake), "RBP_PLANS_TOPIC": plans_topic, **(extra_env or {})}
    before = run_ids(airflow)
    process = start_dags_test(airflow, conf, tmp_path / "dags-test.log", env, fail_once_after)
    try:
        run_id = run_of(airflow, process, before)
        detail = airflow.wait_for_approval(DAG_ID, run_id, "approval", timeout_s=420)
        # The decision first: what approving each scope does, then the fleet beside Kafka's assignors.
        assert "| approving | plans | moves | warmups | offsets to restore | longest group |" in detail["body"]
        assert "| this plan | KIP-441 (Kafka Streams alone) |" in detail["body"]
        assert "**HTML report**" in detail["body"] and "/rebalance/reports/" in detail["body"]
        if seen is not None:
            seen.update(run_id=run_id, body=detail["body"])
        for user in refused:
            with pytest.raises(AirflowError, match="HTTP 403"):
                airflow.answer(DAG_ID, run_id, "approval", answer, form, user=user)
        airflow.answer(DAG_ID, run_id, "approval", answer, form, user=answered_by)
        assert finish(process, tmp_path / "dags-test.log") == 0, (tmp_path / "dags-test.log").read_text()[-3000:]
    finally:
        if process.poll() is None:
            process.kill()
    assert airflow.run_state(DAG_ID, run_id) == "success"
    return lake, plans_topic


def test_approved_plans_are_published_signed_and_planned_with_the_run_params(
    api_server: LocalAirflow, module_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    conf = {"groups": ["orders", "cl*"], "acceptable_recovery_lag": 10, "max_warmup_replicas": 1}
    lake, topic = run_and_answer(
        api_server, module_broker, tmp_path, conf, [APPROVE_ALL], {"selected_groups": None, "reason": "nightly"}
    )
    plans = plan_rows(lake)
    assert plans["orders"]["status"] == "PUBLISHED"
    assert plans["orders"]["approved_by"] == "admin"  # the user who answered over REST
    assert plans["orders"]["acceptable_recovery_lag"] == 10 and plans["orders"]["max_warmup_replicas"] == 1
    # c holds nothing and every changelog is longer than 10: it restores before it takes over (default lag: at once)
    assert plans["orders"]["restore_offsets"] > 0 and plans["orders"]["rounds"] >= 2
    assert plans["clicks"]["status"] == "NOOP"
    assert plans["payments"]["status"] == "REJECTED"
    assert plans["payments"]["reason"] == "rejected by rebalance_planning: outside the group filter"
    published = published_plans(module_broker.bootstrap, topic)
    assert sorted(published) == ["orders"]
    record = read_record(json.dumps(published["orders"]).encode(), VERIFY_KEYS)  # verifies with the public key
    assert record.plan_id == plans["orders"]["plan_id"]
    assert published["orders"]["approved_by"] == "admin"
    assert published["orders"]["configs"]["acceptable_recovery_lag"] == 10


def test_approving_selected_groups_publishes_those_and_rejects_the_others(
    api_server: LocalAirflow, module_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    form = {"selected_groups": ["payments"], "reason": None}
    seen: dict[str, Any] = {}
    lake, topic = run_and_answer(api_server, module_broker, tmp_path, {}, [APPROVE_SELECTED], form, seen=seen)
    plans = plan_rows(lake)
    assert (plans["payments"]["status"], plans["payments"]["approved_by"]) == ("PUBLISHED", "admin")
    assert (plans["orders"]["status"], plans["orders"]["approved_by"]) == ("REJECTED", "admin")
    assert plans["orders"]["reason"] == "rejected by admin: not among the selected groups"
    assert sorted(published_plans(module_broker.bootstrap, topic)) == ["payments"]
    # The approval step's record (Airflow's metadata database, not the lake) is what publish signed by: who
    # answered, and exactly the plan selected, bound to the digest the approval page showed.
    approval = approval_record(api_server, seen["run_id"])
    assert (approval["approved_by"], approval["source"]) == ("admin", "airflow")
    [entry] = approval["plans"]
    assert (entry["plan_id"], entry["group_id"]) == (plans["payments"]["plan_id"], "payments")
    assert f"| payments | `{entry['plan_digest'][:12]}` |" in seen["body"]
    published = published_plans(module_broker.bootstrap, topic)["payments"]
    signed = read_record(json.dumps(published).encode(), VERIFY_KEYS)
    assert isinstance(signed, ApprovedPlan) and signed.plan_digest == entry["plan_digest"]
    assert (signed.approved_by, signed.approved_at, signed.valid_until) == (
        "admin", approval["approved_at"], entry["valid_until"],
    )  # fmt: skip


def approval_record(airflow: LocalAirflow, run_id: str) -> dict[str, Any]:
    """The approval record the approval step handed to publish: its XCom, read over REST."""
    path = f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/approval/xcomEntries/return_value"
    value = airflow.api("GET", path)["value"]
    decided = json.loads(value) if isinstance(value, str) else value
    return dict(decided["approval"])


def test_rejected_plans_are_recorded_and_nothing_is_published_with_kafka_from_the_connection(
    api_server: LocalAirflow, module_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    # The Airflow Connection wins over RBP_KAFKA_BOOTSTRAP, which points nowhere here.
    connection = json.dumps({"conn_type": "kafka", "extra": {"bootstrap.servers": module_broker.bootstrap}})
    env = {f"AIRFLOW_CONN_{KAFKA_CONN_ID.upper()}": connection, "RBP_KAFKA_BOOTSTRAP": "127.0.0.1:9"}
    lake, topic = run_and_answer(
        api_server,
        module_broker,
        tmp_path,
        {},
        [REJECT_ALL],
        {"selected_groups": None, "reason": "change freeze"},
        extra_env=env,
    )
    plans = plan_rows(lake)
    for group in ("orders", "payments"):
        assert plans[group]["status"] == "REJECTED"
        assert plans[group]["approved_by"] == "admin"
        assert plans[group]["reason"] == "rejected by admin: change freeze"
        assert plans[group]["published_at"] is None
    assert published_plans(module_broker.bootstrap, topic) == {}


def test_only_the_configured_approvers_can_answer_and_the_approver_is_airflows_record_of_who_did(
    api_server: LocalAirflow, module_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    form = {"selected_groups": None, "reason": None}
    env = {"RBP_APPROVERS": "alice"}
    lake, topic = run_and_answer(
        api_server, module_broker, tmp_path, {"groups": ["orders"]}, [APPROVE_ALL], form, env, "alice", ("admin",)
    )
    plans = plan_rows(lake)
    assert (plans["orders"]["status"], plans["orders"]["approved_by"]) == ("PUBLISHED", "alice")
    assert published_plans(module_broker.bootstrap, topic)["orders"]["approved_by"] == "alice"


def test_a_run_whose_plan_task_fails_between_its_writes_is_retried_and_ends_as_a_clean_run_would(
    api_server: LocalAirflow, module_broker: EmbeddedBroker, tmp_path: Path
) -> None:
    form = {"selected_groups": None, "reason": "nightly"}
    marker = tmp_path / "fault-fired"
    (tmp_path / "faulted").mkdir()
    (tmp_path / "clean").mkdir()
    before = run_ids(api_server)
    # plan commits plan_assignments, then the connection "drops" before its plans row: Airflow retries the task.
    faulted, faulted_topic = run_and_answer(
        api_server,
        module_broker,
        tmp_path / "faulted",
        {},
        [APPROVE_ALL],
        form,
        fail_once_after=("plan_assignments", marker),
    )
    assert marker.read_text() == "plan_assignments", "the fault did not fire"
    (run_id,) = run_ids(api_server) - before
    plan_task = api_server.api("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/plan")
    assert (plan_task["state"], plan_task["try_number"]) == ("success", 2)  # failed once, succeeded on the retry
    clean, clean_topic = run_and_answer(api_server, module_broker, tmp_path / "clean", {}, [APPROVE_ALL], form)

    retried, reference = lake_contents(faulted), lake_contents(clean)
    assert sorted(retried) == sorted(reference)
    for table in reference:
        assert retried[table] == reference[table], table  # same rows, none twice, none missing
    plans = DeltaTable(str(faulted / "plans")).to_pandas()
    assert Counter(plans["group_id"]) == Counter({"orders": 1, "payments": 1, "clicks": 1})  # each planned once
    assignments = DeltaTable(str(faulted / "plan_assignments")).to_pandas().drop(columns=["plan_id", "snapshot_id"])
    assert not assignments.duplicated().any()
    published, expected = (
        published_plans(module_broker.bootstrap, faulted_topic),
        published_plans(module_broker.bootstrap, clean_topic),
    )
    assert sorted(published) == sorted(expected) == ["orders", "payments"]
    for group, record in published.items():
        assert (record["target"], record["move_order"], record["target_digest"]) == (
            expected[group]["target"],
            expected[group]["move_order"],
            expected[group]["target_digest"],
        )
