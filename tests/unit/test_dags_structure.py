"""The DAG files: they import without errors or warnings, wire the stages in order, and carry the params, schedule,
retries and approval options the issue asks for; the approval answer's meaning; Connections over RBP_ settings."""

from __future__ import annotations

import itertools
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from airflow.dag_processing.dagbag import DagBag

from jobs.orchestration.decision import (
    APPROVE_ALL,
    APPROVE_SELECTED,
    OFFER_PARAM,
    OPTIONS,
    REJECT_ALL,
    TIMEOUT_USER,
    Approver,
    DecisionError,
    approver,
    decision,
)
from jobs.orchestration.hitl import PlanApprovalOperator
from jobs.orchestration.tasks import kafka_from_connection, snapshot_id_for, spark_url
from jobs.settings import Settings

DAGS = Path(__file__).resolve().parents[2] / "dags"
STAGES = ["extract", "lags", "plan", "validate", "review", "approval", "publish"]


def cron(dag: Any) -> str:
    """The cron expression of a DAG's schedule."""
    return str(dag.timetable.expression)


def load_dags() -> DagBag:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    assert [str(w.message) for w in caught] == []
    return bag


def test_every_dag_file_imports_without_errors_or_warnings() -> None:
    bag = load_dags()
    assert sorted(bag.dags) == ["rebalance_observe", "rebalance_planning"]
    assert {Path(d.fileloc).name for d in bag.dags.values()} == {p.name for p in DAGS.glob("*.py")}


def test_planning_dag_runs_the_stages_in_order_with_one_run_at_a_time() -> None:
    dag = load_dags().dags["rebalance_planning"]
    assert sorted(dag.task_ids) == sorted(STAGES)
    for upstream, downstream in itertools.pairwise(STAGES):
        assert downstream in dag.get_task(upstream).downstream_task_ids, f"{upstream} -> {downstream}"
    # Publish reads the review's offer too: it signs by Airflow's record of the answer to it (confirmation.py).
    assert dag.get_task("review").downstream_task_ids == {"approval", "publish"}
    assert dag.max_active_runs == 1
    assert dag.catchup is False
    assert cron(dag) == "0 2 * * *"


def test_stage_tasks_retry_with_backoff_and_the_approval_never_retries() -> None:
    dag = load_dags().dags["rebalance_planning"]
    for task_id in ("extract", "lags", "plan", "validate", "review", "publish"):
        task = dag.get_task(task_id)
        assert (task.retries or 0) >= 2 and task.retry_exponential_backoff > 1, task_id
        # A hung stage fails and is retried instead of holding the run (and the lake's writer lock) forever.
        assert task.execution_timeout == timedelta(seconds=Settings().stage_timeout_s), task_id
    approval = dag.get_task("approval")
    assert approval.retries == 0
    assert approval.execution_timeout is None  # it waits for a person; approval_timeout_s bounds that
    observe = load_dags().dags["rebalance_observe"].get_task("observe")
    assert observe.execution_timeout == timedelta(seconds=Settings().stage_timeout_s)


def test_the_stage_timeout_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RBP_STAGE_TIMEOUT_S", "600")
    assert load_dags().dags["rebalance_planning"].get_task("plan").execution_timeout == timedelta(minutes=10)


def test_params_are_the_group_filter_the_drains_and_the_four_kip441_settings() -> None:
    dag = load_dags().dags["rebalance_planning"]
    params = dag.params
    assert set(params.keys()) == {
        "groups",
        "drain",
        "acceptable_recovery_lag",
        "max_warmup_replicas",
        "num_standby_replicas",
        "probing_rebalance_interval_ms",
        "approval_timeout_s",
    }
    assert params["groups"] == [] and params["drain"] == []
    assert all(params[k] is None for k in params if k not in ("groups", "drain"))  # unset: the RBP_ settings apply
    assert params.get_param("groups").schema["type"] == "array"
    assert params.get_param("drain").schema["type"] == "array"


def test_approval_offers_approve_all_reject_all_and_a_group_picker_and_rejects_on_timeout() -> None:
    approval = load_dags().dags["rebalance_planning"].get_task("approval")
    assert isinstance(approval, PlanApprovalOperator)
    assert approval.options == OPTIONS == [APPROVE_ALL, REJECT_ALL, APPROVE_SELECTED]
    assert approval.defaults == [REJECT_ALL]
    # The offer's digest is set when the step asks and comes back with the answer.
    assert set(approval.params.keys()) == {"selected_groups", "reason", OFFER_PARAM}
    assert "body" in approval.template_fields


def test_schedules_come_from_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RBP_PLANNING_SCHEDULE", "30 3 * * 1-5")
    monkeypatch.setenv("RBP_OBSERVE_SCHEDULE", "*/5 * * * *")
    bag = load_dags()
    assert cron(bag.dags["rebalance_planning"]) == "30 3 * * 1-5"
    assert cron(bag.dags["rebalance_observe"]) == "*/5 * * * *"


CANDIDATES = {"orders": "s1/orders", "payments": "s1/payments"}


def test_approve_all_approves_every_validated_plan_as_the_responding_user() -> None:
    answer = {"chosen_options": [APPROVE_ALL], "params_input": {}, "responded_by_user": {"id": "7", "name": "alice"}}
    d = decision(answer, CANDIDATES, 60)
    assert (d.by, d.approve, d.reject, d.timed_out) == ("alice", ("s1/orders", "s1/payments"), (), False)


def test_approve_selected_groups_approves_those_and_rejects_the_rest() -> None:
    answer = {
        "chosen_options": [APPROVE_SELECTED],
        "params_input": {"selected_groups": ["payments"], "reason": ""},
        "responded_by_user": {"id": "7", "name": "alice"},
    }
    d = decision(answer, CANDIDATES, 60)
    assert (d.approve, d.reject, d.reject_reason) == (("s1/payments",), ("s1/orders",), "not among the selected groups")


def test_selecting_a_group_without_a_validated_plan_is_an_error_naming_it() -> None:
    answer = {
        "chosen_options": [APPROVE_SELECTED],
        "params_input": {"selected_groups": ["payments", "nope"]},
        "responded_by_user": {"id": "7", "name": "alice"},
    }
    with pytest.raises(DecisionError, match="nope"):
        decision(answer, CANDIDATES, 60)


def test_reject_all_and_timeout_reject_everything() -> None:
    answer = {"chosen_options": [REJECT_ALL], "params_input": {"reason": "freeze"}, "responded_by_user": {"id": "b"}}
    d = decision(answer, CANDIDATES, 60)
    assert (d.by, d.approve, d.reject, d.reject_reason) == ("b", (), ("s1/orders", "s1/payments"), "freeze")
    timed_out = decision({"chosen_options": [REJECT_ALL], "responded_by_user": None}, CANDIDATES, 60)
    assert (timed_out.by, timed_out.approve, timed_out.timed_out) == (TIMEOUT_USER, (), True)
    assert timed_out.reject == ("s1/orders", "s1/payments")


def test_connections_give_kafka_properties_and_the_spark_connect_url() -> None:
    extra = {"bootstrap.servers": "k1:9092,k2:9092", "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}
    assert kafka_from_connection(extra) == (
        "k1:9092,k2:9092",
        {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"},
    )
    assert spark_url("spark", 15002, {}) == "sc://spark:15002"
    assert spark_url("spark", None, {"token": "t", "use_ssl": "true"}) == "sc://spark:15002/;token=t;use_ssl=true"
    assert spark_url("sc://x:1", None, {}) == "sc://x:1"
    assert spark_url(None, None, {}) is None


def test_one_run_has_one_snapshot_id_on_every_retry() -> None:
    when = datetime(2026, 11, 21, 2, 0, tzinfo=UTC)
    first = snapshot_id_for("rebalance_planning", "scheduled__2026-11-21T02:00:00+00:00", when)
    assert first == snapshot_id_for("rebalance_planning", "scheduled__2026-11-21T02:00:00+00:00", when)
    assert first.startswith("20261121T020000Z-")
    assert first != snapshot_id_for("rebalance_planning", "manual__2026-11-21T02:00:00+00:00", when)


def test_an_answer_from_someone_outside_the_approvers_rejects_every_plan_naming_them() -> None:
    answer = {"chosen_options": [APPROVE_ALL], "params_input": {}, "responded_by_user": {"id": "bob", "name": "bob"}}
    d = decision(answer, CANDIDATES, 60, approvers=("alice",))
    assert (d.by, d.approve, d.reject) == ("bob", (), ("s1/orders", "s1/payments"))
    assert d.reject_reason == "answered by bob, who is not among the allowed approvers"
    assert decision(answer, CANDIDATES, 60, approvers=("alice", "bob")).approve == ("s1/orders", "s1/payments")


def test_with_the_fab_auth_manager_approvers_are_user_ids_and_the_approver_is_recorded_by_name() -> None:
    # FAB's users answer as {"id": str(<ab_user.id>), "name": <username>}: Airflow's HITL check and ours match ids.
    def answered_by(user_id: str, name: str) -> dict[str, object]:
        return {"chosen_options": [APPROVE_ALL], "params_input": {}, "responded_by_user": {"id": user_id, "name": name}}

    alice = decision(answered_by("2", "alice"), CANDIDATES, 60, approvers=("2",))
    assert (alice.by, alice.approve) == ("alice", ("s1/orders", "s1/payments"))
    impostor = decision(answered_by("3", "2"), CANDIDATES, 60, approvers=("2",))  # a username that looks like an id
    assert (impostor.by, impostor.approve) == ("2", ())
    # `id:name` names the approver where the page lists them; only the id decides.
    assert decision(answered_by("2", "alice"), CANDIDATES, 60, approvers=("2:alice", "5:bob")).approve
    assert not decision(answered_by("3", "alice"), CANDIDATES, 60, approvers=("2:alice",)).approve


def test_approvers_as_id_or_id_and_name() -> None:
    assert approver("2:alice") == Approver("2", "alice")
    assert approver(" 7 ") == Approver("7", "7")
    assert approver("alice") == Approver("alice", "alice")  # the simple auth manager: the username is the id


def test_the_approval_records_its_own_decision_so_the_answer_never_crosses_xcom() -> None:
    dag = load_dags().dags["rebalance_planning"]
    approval = dag.get_task("approval")
    assert isinstance(approval, PlanApprovalOperator)
    assert dag.get_task("publish").upstream_task_ids == {"approval", "review"}
