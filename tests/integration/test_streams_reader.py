"""The streams-groups reader JVM reaches a SASL/SCRAM broker with RBP_KAFKA_CONFIG's librdkafka properties, and
every way it can fail is a StreamsGroupsUnreadable naming the cause, within its deadline."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs.local.broker import ADMIN_USER, EmbeddedBroker
from jobs.pipeline.broker_streams import parse_reader_output
from jobs.pipeline.streams_reader import StreamsGroupsUnreadable, read_streams_groups_lines
from jobs.processes import free_port

PASSWORD = "reader-secret"


@pytest.fixture(scope="module")
def scram_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    """A broker of its own: SASL/SCRAM with ACLs cannot be switched on for the session's shared one."""
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("scram"), scram_users={ADMIN_USER: PASSWORD}) as broker:
        yield broker


def _librdkafka_config(broker: EmbeddedBroker, password: str) -> dict[str, str]:
    return {k: v for k, v in broker.client_config().items() if k != "bootstrap.servers"} | {"sasl.password": password}


def test_the_reader_lists_a_scram_cluster_with_the_pipelines_client_properties(scram_broker: EmbeddedBroker) -> None:
    lines = read_streams_groups_lines(scram_broker.bootstrap, _librdkafka_config(scram_broker, PASSWORD), 10.0)
    read = parse_reader_output(lines, 0)
    assert read.complete and read.groups == () and read.quarantine == ()


def test_a_wrong_password_is_named(scram_broker: EmbeddedBroker) -> None:
    with pytest.raises(StreamsGroupsUnreadable, match="SaslAuthenticationException"):
        read_streams_groups_lines(scram_broker.bootstrap, _librdkafka_config(scram_broker, "wrong"), 10.0)


def test_no_broker_at_the_bootstrap_fails_within_the_deadline() -> None:
    with pytest.raises(StreamsGroupsUnreadable, match="listing streams groups took longer than 2000 ms"):
        read_streams_groups_lines(f"127.0.0.1:{free_port()}", {}, 2.0)


def test_a_missing_jar_or_java_is_named(tmp_path: Path) -> None:
    with pytest.raises(StreamsGroupsUnreadable, match="no such file"):
        read_streams_groups_lines("127.0.0.1:1", {}, 1.0, jar=tmp_path / "absent.jar")
    with pytest.raises(StreamsGroupsUnreadable, match="no `no-such-java`"):
        read_streams_groups_lines("127.0.0.1:1", {}, 1.0, java="no-such-java")
