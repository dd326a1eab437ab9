"""A secured broker (SASL/SCRAM, ACLs from jobs.kafka_acls): only the pipeline writes plans, applications write
reports, strangers get nothing, and extract runs as the pipeline's principal with exactly those rights."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from pyspark.sql import SparkSession

from assignor import TaskId
from assignor.runtime.events import EventLog
from assignor.runtime.group_assignor import Subtopology, Topology
from assignor.runtime.kafka_io import PlanSource
from assignor.runtime.protocol import AssignmentInfo
from assignor.runtime.state_dir import StateDirectory
from assignor.runtime.tasks import TaskManager
from jobs.cli.main import main
from jobs.kafka_acls import Principals, acl_bindings, apply_acls
from jobs.kafka_topics import TopicError, TopicSpec, ensure_topics
from jobs.lakehouse.lake import Lake
from jobs.local.broker import EmbeddedBroker
from jobs.pipeline.extract import run_extract
from jobs.polling import wait_until
from jobs.settings import Settings
from tests.support.pipeline_kafka import report, stateful_topology

PLANS, REPORTS = "_rebalance_plans", "_rebalance_reports"
USERS = {
    "admin": "admin-secret",
    "pipeline": "pipeline-secret",
    "orders-app": "app-secret",
    "stranger": "stranger-secret",  # a valid login that no ACL names
}


@pytest.fixture(scope="module")
def secured() -> Iterator[EmbeddedBroker]:
    with EmbeddedBroker(scram_users=USERS) as broker:
        admin = broker.client_config("admin")
        ensure_topics(admin, [TopicSpec(PLANS, 1, compacted=True), TopicSpec(REPORTS, 1, compacted=True)])
        ensure_topics(admin, [TopicSpec("orders-in0", 2), TopicSpec("orders-store0-changelog", 2)])
        apply_acls(admin, acl_bindings(Principals("pipeline", ("orders-app",)), PLANS, REPORTS))
        yield broker


def delivery_error(config: dict[str, str], topic: str, value: bytes) -> KafkaError | None:
    """Produce one record; the delivery error, None when the broker took it."""
    errors: list[KafkaError | None] = []
    producer = Producer({**config, "message.timeout.ms": 10_000})
    producer.produce(topic, key=b"orders", value=value, on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(20)
    assert len(errors) == 1, "no delivery report within the timeout"
    return errors[0]


def test_only_the_pipeline_writes_the_plans_topic(secured: EmbeddedBroker) -> None:
    refused = delivery_error(secured.client_config("orders-app"), PLANS, b"{}")
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert delivery_error(secured.client_config("pipeline"), PLANS, b"{}") is None


def test_applications_write_reports_and_the_pipeline_does_not(secured: EmbeddedBroker) -> None:
    assert delivery_error(secured.client_config("orders-app"), REPORTS, b"{}") is None
    refused = delivery_error(secured.client_config("pipeline"), REPORTS, b"{}")
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_client_without_credentials_or_with_a_wrong_password_gets_nothing(secured: EmbeddedBroker) -> None:
    anonymous = AdminClient({"bootstrap.servers": secured.bootstrap, "log_level": 0})
    with pytest.raises(Exception, match=r"(?i)timed out|transport|disconnect|broker"):
        anonymous.list_topics(timeout=3)
    wrong = AdminClient({**secured.client_config("pipeline"), "sasl.password": "guess", "log_level": 0})
    with pytest.raises(Exception, match=r"(?i)authenticat|transport"):
        wrong.list_topics(timeout=5)


def test_extract_runs_as_the_pipeline_principal(secured: EmbeddedBroker, spark: SparkSession, tmp_path: Path) -> None:
    body = report("orders", "p1", active=["0_0", "0_1"], topology=stateful_topology("orders", 1))
    app = Producer(secured.client_config("orders-app"))
    app.produce(REPORTS, key=b"orders/p1", value=json.dumps(body).encode())
    assert app.flush(20) == 0
    pipeline = {k: v for k, v in secured.client_config("pipeline").items() if k != "bootstrap.servers"}
    settings = Settings(lake_root=tmp_path / "lake", kafka_config=pipeline, planner_processes=1, kafka_timeout_s=10)
    snapshot = run_extract(Lake(spark, settings.lake_root), settings, secured.bootstrap).snapshot_id
    reports = Lake(spark, settings.lake_root).read("member_reports", snapshot).collect()
    assert [(r["group_id"], r["process_id"]) for r in reports] == [("orders", "p1")]
    offsets = Lake(spark, settings.lake_root).read("changelog_offsets", snapshot).count()
    assert offsets == 2  # the changelog's end offsets, read with the pipeline's DESCRIBE rights


def test_the_kafka_acls_command_applies_them_as_an_admin(
    secured: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = {k: v for k, v in secured.client_config("admin").items() if k != "bootstrap.servers"}
    monkeypatch.setenv("RBP_KAFKA_CONFIG", json.dumps(admin))
    argv = ["kafka-acls", "--bootstrap", secured.bootstrap, "--pipeline-user", "pipeline", "--app-user", "clicks-app"]
    assert main(argv) == 0
    assert "ACLs in force for pipeline and 1 application(s)" in capsys.readouterr().out
    monkeypatch.setenv(
        "RBP_KAFKA_CONFIG", json.dumps({**admin, "sasl.username": "pipeline", "sasl.password": "pipeline-secret"})
    )
    assert main(argv) == 1  # only an admin may grant
    assert "AUTHORIZATION_FAILED" in capsys.readouterr().err


def test_the_command_creates_the_product_topics_and_gives_an_application_its_own_prefix(
    secured: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = {k: v for k, v in secured.client_config("admin").items() if k != "bootstrap.servers"}
    monkeypatch.setenv("RBP_KAFKA_CONFIG", json.dumps(admin))
    monkeypatch.setenv("RBP_PLANS_TOPIC", "_plans_of_the_command")
    monkeypatch.setenv("RBP_REPORTS_TOPIC", "_reports_of_the_command")
    base = ["kafka-acls", "--bootstrap", secured.bootstrap, "--pipeline-user", "pipeline", "--app-user", "orders-app"]
    assert main([*base, "--app-prefix", "orders-app=orders-own-"]) == 0
    app = secured.client_config("orders-app")
    # The product topics exist before any client: the application sees them and needs no right to create them.
    assert ensure_topics(app, [TopicSpec("_plans_of_the_command"), TopicSpec("_reports_of_the_command")]) == []
    assert delivery_error(app, "_reports_of_the_command", b"{}") is None
    assert ensure_topics(app, [TopicSpec("orders-own-input", 2)]) == ["orders-own-input"]
    assert delivery_error(app, "orders-own-input", b"1") is None
    with pytest.raises(TopicError, match=r"(?i)authoriz"):
        ensure_topics(app, [TopicSpec("payments-input", 1)])
    assert main([*base, "--app-prefix", "orders-app=_plans"]) == 2  # would let the application write plans


def test_setup_makes_topics_and_acls_on_a_cluster_with_an_authorizer(
    secured: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = {k: v for k, v in secured.client_config("admin").items() if k != "bootstrap.servers"}
    monkeypatch.setenv("RBP_KAFKA_CONFIG", json.dumps(admin))
    monkeypatch.setenv("RBP_PLANS_TOPIC", "_plans_of_setup")
    monkeypatch.setenv("RBP_REPORTS_TOPIC", "_reports_of_setup")
    assert main(["setup", "--bootstrap", secured.bootstrap]) == 0  # no principals named: topics only, said loudly
    out = capsys.readouterr().out
    assert "topic _plans_of_setup: created" in out and "ACLs: NOT applied: the cluster has an authorizer" in out
    argv = ["setup", "--bootstrap", secured.bootstrap, "--pipeline-user", "pipeline", "--app-user", "orders-app"]
    for _ in range(2):  # idempotent
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert "topic _reports_of_setup: ok" in out and "ACLs in force for pipeline and 1 application(s)" in out
    assert delivery_error(secured.client_config("orders-app"), "_reports_of_setup", b"{}") is None
    refused = delivery_error(secured.client_config("orders-app"), "_plans_of_setup", b"{}")
    assert refused is not None and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert delivery_error(secured.client_config("pipeline"), "_plans_of_setup", b"{}") is None


def logs_in(config: dict[str, str]) -> bool:
    """Whether this login gets metadata from the broker."""
    try:
        AdminClient({**config, "log_level": 0}).list_topics(timeout=5)
    except Exception:  # an authentication failure surfaces as several librdkafka errors
        return False
    return True


def test_the_command_sets_scram_users_the_formatted_cluster_lacks_and_rotates_them(
    secured: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """docker/kafka/start.sh adds users only when it formats the storage; kafka-init adds any user that came later."""
    admin = {k: v for k, v in secured.client_config("admin").items() if k != "bootstrap.servers"}
    monkeypatch.setenv("RBP_KAFKA_CONFIG", json.dumps(admin))
    late = {**secured.client_config("orders-app"), "sasl.username": "late-app", "sasl.password": "late-first"}
    assert not logs_in(late)
    argv = ["kafka-acls", "--bootstrap", secured.bootstrap, "--pipeline-user", "pipeline", "--app-user", "late-app"]
    monkeypatch.setenv("LATE_APP_PASSWORD", "late-first")
    assert main([*argv, "--scram-user", "late-app=LATE_APP_PASSWORD"]) == 0
    out = capsys.readouterr().out
    assert "SCRAM users set: 1 (late-app)" in out and "late-first" not in out
    assert logs_in(late)
    assert delivery_error(late, REPORTS, b"{}") is None  # with the application's ACLs
    # A new password rotates the user: the old one stops working, the new one works.
    monkeypatch.setenv("LATE_APP_PASSWORD", "late-second")
    assert main([*argv, "--scram-user", "late-app=LATE_APP_PASSWORD"]) == 0
    wait_until(lambda: not logs_in(late), 30, "the old password to be refused")
    assert logs_in({**late, "sasl.password": "late-second"})
    # A password that is not there stops the command before anything changes, naming the variable.
    monkeypatch.delenv("LATE_APP_PASSWORD")
    assert main([*argv, "--scram-user", "late-app=LATE_APP_PASSWORD"]) == 2
    assert "LATE_APP_PASSWORD is unset or empty" in capsys.readouterr().err
    assert main([*argv, "--scram-user", "late-app"]) == 2


def test_a_leader_whose_login_may_not_read_plans_gets_an_error_not_no_plan(secured: EmbeddedBroker) -> None:
    """The runtime leader's plans reader on a broker that denies it: an authorization error, which the leader reports
    as plans_unreadable (tests/unit/test_runtime_plans_unreadable.py), never an empty topic read as "no plan"."""

    def reader(user: str) -> PlanSource:
        login = {k: v for k, v in secured.client_config(user).items() if k != "bootstrap.servers"}
        return PlanSource(secured.bootstrap, PLANS, login)

    with pytest.raises(KafkaException, match="AUTHORIZATION_FAILED"):
        list(reader("stranger").records("orders"))
    assert isinstance(list(reader("orders-app").records("orders")), list)  # the application's login reads


def test_a_password_over_the_bound_stops_the_command_before_anything_changes(
    secured: EmbeddedBroker, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = {k: v for k, v in secured.client_config("admin").items() if k != "bootstrap.servers"}
    monkeypatch.setenv("RBP_KAFKA_CONFIG", json.dumps(admin))
    monkeypatch.setenv("HUGE_PASSWORD", "x" * 1025)
    argv = ["kafka-acls", "--bootstrap", secured.bootstrap, "--pipeline-user", "pipeline", "--app-user", "huge-app"]
    assert main([*argv, "--scram-user", "huge-app=HUGE_PASSWORD"]) == 2
    err = capsys.readouterr()
    assert "1..1024 bytes" in err.err and "ACLs" not in err.out  # refused before the ACLs were applied


def test_a_runtime_instance_works_inside_its_applications_own_prefix(secured: EmbeddedBroker, tmp_path: Path) -> None:
    """An application given its topics and groups by prefix runs the Python runtime under its own login: the restore
    and input consumers' groups are named under the application's group id, so the prefix covers them (under another
    name the broker denied their coordinator lookup, retried every second for the instance's life)."""
    admin = secured.client_config("admin")
    principals = Principals("pipeline", ("orders-app",), (("orders-app", "orders-tally"),))
    apply_acls(admin, acl_bindings(principals, PLANS, REPORTS))
    app = secured.client_config("orders-app")
    source, changelog = "orders-tally-input", "orders-tally-counts-changelog"
    assert set(ensure_topics(app, [TopicSpec(source, 1), TopicSpec(changelog, 1, compacted=True)])) == {
        source,
        changelog,
    }
    producer = Producer(app)
    for key in ("a", "b", "a"):
        producer.produce(source, key=key, value=b"", partition=0)
    assert producer.flush(20) == 0
    task = TaskId(0, 0)
    events = EventLog(tmp_path / "events.jsonl", "orders-tally")
    topology = Topology((Subtopology(0, (source,), (changelog,)),))
    tasks = TaskManager(StateDirectory(tmp_path / "state"), topology, app, events, group_id="orders-tally")
    try:
        tasks.reconcile(AssignmentInfo(active_tasks={task: ((source, 0),)}), frozenset({(source, 0)}))

        def processed() -> bool:
            tasks.step()
            return tasks.tasks[task].store.input_position((source, 0)) == 3

        wait_until(processed, 60, "the application's own records processed under its login", poll_s=0.01)
        # Each consumer's own group: its coordinator is found and its offsets answered, not GROUP_AUTHORIZATION_FAILED.
        for consumer in (tasks._restore, tasks._input):  # the instance's own consumers
            assert consumer.committed([TopicPartition(source, 0)], timeout=20)[0].error is None
    finally:
        tasks.close()
        events.close()
    # The names the runtime used before are outside the prefix: the broker refuses them (a consumer is not told; it
    # only keeps asking).
    admin_as_app = AdminClient({**app})  # held: a client dropped at once never completes its futures
    described = admin_as_app.describe_consumer_groups(["rbp-restore-anything"], request_timeout=10)
    with pytest.raises(KafkaException, match="GROUP_AUTHORIZATION_FAILED"):
        described["rbp-restore-anything"].result(timeout=30)
