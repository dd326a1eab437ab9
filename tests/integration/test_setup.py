"""`rebalance-planner setup` on the embedded Apache Kafka broker (no authorizer): the product's topics created with
their configs, idempotently; an existing topic with wrong configs fixed; what cannot be fixed said precisely."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType  # type: ignore[attr-defined]

from jobs.cli.main import main
from jobs.kafka_topics import TopicSpec, ensure_topics
from jobs.local.broker import EmbeddedBroker
from jobs.provisioning import MAX_MESSAGE_BYTES

REPORTS, PLANS = "_setup_reports", "_setup_plans"


@pytest.fixture
def topics_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RBP_REPORTS_TOPIC", REPORTS)
    monkeypatch.setenv("RBP_PLANS_TOPIC", PLANS)
    monkeypatch.delenv("RBP_KAFKA_CONFIG", raising=False)


def configs(broker: EmbeddedBroker, topic: str) -> dict[str, str]:
    admin = AdminClient({**broker.client_config()})
    (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    return {k: e.value for k, e in future.result(20).items() if e.value is not None}


@pytest.mark.usefixtures("topics_env")
def test_setup_creates_compacted_topics_and_says_acls_were_skipped(
    broker: EmbeddedBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["setup", "--bootstrap", broker.bootstrap]) == 0
    out = capsys.readouterr().out
    assert f"topic {REPORTS}: created" in out and f"topic {PLANS}: created" in out
    assert "ACLs: skipped: the cluster has no authorizer" in out
    for topic in (REPORTS, PLANS):
        found = configs(broker, topic)
        assert found["cleanup.policy"] == "compact"
        assert int(found["max.message.bytes"]) == MAX_MESSAGE_BYTES
        assert found["segment.ms"] == "3600000"

    assert main(["setup", "--bootstrap", broker.bootstrap]) == 0  # again: nothing to do
    out = capsys.readouterr().out
    assert f"topic {REPORTS}: ok" in out and f"topic {PLANS}: ok" in out


@pytest.mark.usefixtures("topics_env")
def test_setup_fixes_an_existing_topic_that_deletes_old_records(
    broker: EmbeddedBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    ensure_topics(broker.client_config(), [TopicSpec(PLANS, 1, config={"cleanup.policy": "delete"})])
    assert main(["setup", "--bootstrap", broker.bootstrap]) == 0
    out = capsys.readouterr().out
    assert f"topic {PLANS}: fixed (" in out and "cleanup.policy: delete -> compact" in out
    assert f"max.message.bytes: 1048588 -> {MAX_MESSAGE_BYTES}" in out
    assert configs(broker, PLANS)["cleanup.policy"] == "compact"
    assert int(configs(broker, PLANS)["max.message.bytes"]) == MAX_MESSAGE_BYTES


@pytest.mark.usefixtures("topics_env")
def test_setup_names_what_it_cannot_fix(broker: EmbeddedBroker, capsys: pytest.CaptureFixture[str]) -> None:
    ensure_topics(broker.client_config(), [TopicSpec(REPORTS, 1, compacted=True), TopicSpec(PLANS, 1, compacted=True)])
    assert main(["setup", "--bootstrap", broker.bootstrap, "--replication-factor", "3"]) == 1
    err = capsys.readouterr().err
    assert f"topic {REPORTS}: replication factor 1 is below the 3 asked for" in err


def test_setup_refuses_bad_flags_and_a_missing_bootstrap(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("RBP_KAFKA_BOOTSTRAP", raising=False)
    assert main(["setup"]) == 2
    assert "needs --bootstrap or RBP_KAFKA_BOOTSTRAP" in capsys.readouterr().err
    assert main(["setup", "--bootstrap", "127.0.0.1:1", "--partitions", "0"]) == 2
    assert "--partitions must be 1..10000, got 0" in capsys.readouterr().err
    assert main(["setup", "--bootstrap", "127.0.0.1:1", "--app-user", "orders"]) == 2
