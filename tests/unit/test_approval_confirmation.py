"""Publish signs by Airflow's HITL record of the person's answer, bound to the review's offer by its digest: a record
handed over through XCom, rewritten after the answer, cannot change what is signed (jobs/orchestration/confirmation.py,
tasks.publish_approved). Airflow's REST answer is given here as the dict its API returns; the system tests read it
from a real api-server."""

from __future__ import annotations

import dataclasses
import socket
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from assignor.protocol.plans import CONFIG_FIELDS
from jobs.orchestration import tasks
from jobs.orchestration.airflow_api import AirflowApiError, AirflowLogin, approval_answer
from jobs.orchestration.confirmation import asked_offer, confirmed_approval, offer_digest, offered_entries
from jobs.orchestration.decision import APPROVE_ALL, APPROVE_SELECTED, OFFER_PARAM, REJECT_ALL, DecisionError
from jobs.pipeline.approval_record import ApprovalRecord, ApprovedDigest
from jobs.settings import Settings

CONFIGS = dict.fromkeys(CONFIG_FIELDS, 1)
ORDERS = ApprovedDigest("s1/orders", "orders", "a" * 64, 1_800_000_000_000, "b" * 64, CONFIGS)
PAYMENTS = ApprovedDigest(
    "s1/payments", "payments", "c" * 64, 1_800_000_000_000, "d" * 64, {**CONFIGS, "num_standby_replicas": 0}
)


def reviewed(*entries: ApprovedDigest) -> dict[str, Any]:
    """The review task's record as it hands it over (its XCom)."""
    chosen = entries or (ORDERS, PAYMENTS)
    return {
        "snapshot_id": "s1",
        "candidates": {e.group_id: e.plan_id for e in chosen},
        "offered": {e.plan_id: e.to_json() for e in chosen},
        "approval_timeout_s": 60,
    }


def answer(chosen: str = APPROVE_SELECTED, groups: list[str] | None = None, **changes: Any) -> dict[str, Any]:
    """Airflow's HITL record of an answer to the offer of ``reviewed()``, as its REST API returns it."""
    record = {
        "response_received": True,
        "responded_by_user": {"id": "7", "name": "alice"},
        "responded_at": "2026-11-28T02:10:00+00:00",
        "chosen_options": [chosen],
        "params": {OFFER_PARAM: {"value": offer_digest("s1", (ORDERS, PAYMENTS)), "description": "…"}},
        "params_input": {
            "selected_groups": groups,
            "reason": None,
            OFFER_PARAM: offer_digest("s1", (ORDERS, PAYMENTS)),
        },
    }
    return {**record, **changes}


def test_the_record_signed_is_who_answered_what_they_chose_and_when_as_airflow_keeps_it() -> None:
    record = confirmed_approval(answer(groups=["orders"]), reviewed(), 60)
    assert record is not None
    assert (record.approved_by, record.source, record.plans) == ("alice", "airflow", (ORDERS,))
    assert record.approved_at == int(datetime(2026, 11, 28, 2, 10, tzinfo=UTC).timestamp() * 1000)
    everything = confirmed_approval(answer(APPROVE_ALL), reviewed(), 60)
    assert everything is not None and {p.plan_id for p in everything.plans} == {"s1/orders", "s1/payments"}


def test_a_rejection_a_timeout_a_refused_approver_and_the_one_who_triggered_sign_nothing() -> None:
    assert confirmed_approval(answer(REJECT_ALL), reviewed(), 60) is None
    timed_out = answer(APPROVE_ALL, responded_by_user=None, params_input={})  # the scheduler applied the default
    assert confirmed_approval(timed_out, reviewed(), 60) is None
    assert confirmed_approval(answer(APPROVE_ALL), reviewed(), 60, approvers=("8:bob",)) is None
    assert confirmed_approval(answer(APPROVE_ALL), reviewed(), 60, triggered_by="alice") is None


def test_without_an_answer_in_airflow_nothing_is_signed_and_the_error_says_so() -> None:
    with pytest.raises(DecisionError, match="no answer"):
        confirmed_approval({"response_received": False}, reviewed(), 60)


@pytest.mark.parametrize(
    ("rewritten", "why"),
    [
        (reviewed(dataclasses.replace(ORDERS, plan_digest="e" * 64), PAYMENTS), "another body for the same plan"),
        (reviewed(dataclasses.replace(ORDERS, configs={**CONFIGS, "num_standby_replicas": 0}), PAYMENTS), "configs"),
        (reviewed(dataclasses.replace(ORDERS, valid_until=1_900_000_000_000), PAYMENTS), "validity stretched"),
        (reviewed(ORDERS), "a plan dropped from the offer"),
        (
            reviewed(
                dataclasses.replace(ORDERS, group_id="payments"), dataclasses.replace(PAYMENTS, group_id="orders")
            ),
            "the groups' plans swapped",
        ),
        ({**reviewed(), "snapshot_id": "s0"}, "another snapshot"),
    ],
)
def test_a_review_record_rewritten_after_the_answer_is_refused(rewritten: dict[str, Any], why: str) -> None:
    with pytest.raises(DecisionError, match="changed after the approval step asked"):
        confirmed_approval(answer(groups=["orders"]), rewritten, 60)


def test_an_answer_that_does_not_carry_the_offer_back_signs_nothing() -> None:
    silent = answer(APPROVE_ALL, params_input={"selected_groups": None, "reason": None})
    with pytest.raises(DecisionError, match="approves offer none"):
        confirmed_approval(silent, reviewed(), 60)


def test_a_malformed_offer_in_the_review_record_is_named() -> None:
    broken = {**reviewed(), "offered": {"s1/orders": {"plan_id": "s1/orders"}}}
    with pytest.raises(DecisionError, match="s1/orders"):
        confirmed_approval(answer(APPROVE_ALL), broken, 60)
    with pytest.raises(DecisionError, match="names plan"):
        offered_entries({**reviewed(), "offered": {"s1/x": ORDERS.to_json()}})


def test_the_asked_offer_is_read_from_airflows_serialized_field_or_a_plain_value() -> None:
    assert asked_offer({"params": {OFFER_PARAM: {"value": "f" * 64}}}) == "f" * 64
    assert asked_offer({"params": {OFFER_PARAM: "f" * 64}}) == "f" * 64
    assert asked_offer({"params": {}}) is None


@given(
    field=st.sampled_from(["plan_id", "group_id", "plan_digest", "valid_until", "target_digest", "configs"]),
    salt=st.integers(min_value=1, max_value=10**6),
)
def test_any_change_to_any_offered_entry_changes_the_offers_digest(field: str, salt: int) -> None:
    values: dict[str, Any] = {
        "plan_id": f"s1/x{salt}",
        "group_id": f"g{salt}",
        "plan_digest": f"{salt:064x}",
        "valid_until": ORDERS.valid_until + salt,
        "target_digest": f"{salt:064x}",
        "configs": {**CONFIGS, "num_standby_replicas": salt + 1},
    }
    changed = dataclasses.replace(ORDERS, **{field: values[field]})
    assert offer_digest("s1", (changed, PAYMENTS)) != offer_digest("s1", (ORDERS, PAYMENTS))
    assert offer_digest("s1", (PAYMENTS, ORDERS)) == offer_digest("s1", (ORDERS, PAYMENTS))  # order is not meaning


@pytest.fixture
def signed(monkeypatch: pytest.MonkeyPatch) -> list[ApprovalRecord]:
    """What publish_approved hands the publish stage; Airflow's REST answer is ``answer(groups=["orders"])``."""
    handed: list[ApprovalRecord] = []
    monkeypatch.setattr(tasks, "approval_answer", lambda login, dag_id, run_id: answer(groups=["orders"]))

    def publish(rt: tasks.Runtime, snapshot_id: str, approval: ApprovalRecord) -> int:
        handed.append(approval)
        return len(approval.plans)

    monkeypatch.setattr(tasks, "publish", publish)
    return handed


def runtime(tmp_path: Any) -> tasks.Runtime:
    login = tmp_path / "login"
    login.write_text("pw")
    return tasks.Runtime(
        Settings(lake_root=tmp_path / "lake", airflow_api_url="https://a:8080", airflow_api_password_file=login),
        None,
        None,
    )


RUN = SimpleNamespace(dag_id="rebalance_planning", run_id="r1", triggering_user_name="bob")


def test_publish_signs_what_airflows_record_approved_when_the_approval_steps_record_agrees(
    signed: list[ApprovalRecord], tmp_path: Any
) -> None:
    handed = ApprovalRecord("alice", 1, "airflow", (ORDERS,))
    assert tasks.publish_approved(runtime(tmp_path), reviewed(), {"approval": handed.to_json()}, RUN) == 1
    assert [(r.approved_by, r.plans) for r in signed] == [("alice", (ORDERS,))]


@pytest.mark.parametrize(
    "forged",
    [
        ApprovalRecord("alice", 1, "airflow", (ORDERS, PAYMENTS)),  # a plan the person did not select
        ApprovalRecord("mallory", 1, "airflow", (ORDERS,)),  # another approver
        ApprovalRecord("alice", 1, "airflow", (dataclasses.replace(ORDERS, plan_digest="e" * 64),)),  # another body
    ],
)
def test_publish_refuses_when_the_approval_steps_record_was_rewritten_after_the_answer(
    signed: list[ApprovalRecord], tmp_path: Any, forged: ApprovalRecord
) -> None:
    with pytest.raises(tasks.TaskFailed, match="changed after the answer"):
        tasks.publish_approved(runtime(tmp_path), reviewed(), {"approval": forged.to_json()}, RUN)
    with pytest.raises(tasks.TaskFailed, match="changed after the answer"):
        tasks.publish_approved(runtime(tmp_path), reviewed(), {"approval": None}, RUN)
    assert signed == []


def test_publish_under_airflow_without_the_signers_login_refuses_naming_the_settings(tmp_path: Any) -> None:
    rt = tasks.Runtime(Settings(lake_root=tmp_path / "lake"), None, None)
    with pytest.raises(tasks.TaskFailed, match="RBP_AIRFLOW_API_URL and RBP_AIRFLOW_API_PASSWORD_FILE"):
        tasks.publish_approved(rt, reviewed(), {}, RUN)


def test_the_signers_password_file_is_read_bounded_and_a_bad_one_is_named(tmp_path: Any) -> None:
    path = tmp_path / "login"
    login = AirflowLogin("https://a:8080", "rbp-signer", path)
    with pytest.raises(AirflowApiError, match="No such file"):
        login.password()
    for content, why in ((b"\n", "is empty"), (b"\xff\xfe", "not UTF-8"), (b"x" * 5000, "over 4096 bytes")):
        path.write_bytes(content)
        with pytest.raises(AirflowApiError, match=why):
            login.password()
    path.write_bytes(b"s3cret\n")
    assert login.password() == "s3cret"


def test_an_api_server_that_does_not_answer_is_an_error_publish_retries(tmp_path: Any) -> None:
    with socket.socket() as s:  # a port nothing listens on: the connection is refused for real
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "login").write_text("pw")
    login = AirflowLogin(f"http://127.0.0.1:{port}", "rbp-signer", tmp_path / "login")
    with pytest.raises(AirflowApiError, match="did not answer: ConnectError"):
        approval_answer(login, "rebalance_planning", "r1", timeout_s=5)
    assert not issubclass(AirflowApiError, tasks.TaskFailed)  # left to the task's retries
