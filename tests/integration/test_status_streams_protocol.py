"""``status`` shows a streams-protocol group (KIP-1071) read from the broker: two reference-app JVMs on
``--group-protocol streams`` against the embedded Kafka 4.4 broker, and an old plugin report of the same group on the
reports topic, which the group supersedes. A reader that cannot run is a one-line note, never a crash."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from assignor.protocol.state_report import StateReport
from jobs.cli.main import main
from jobs.local.broker import EmbeddedBroker
from jobs.local.streams_fleet import StreamsFleet, StreamsFleetConfig
from jobs.pipeline.broker_streams import BROKER_STREAMS, parse_reader_output
from jobs.pipeline.streams_reader import read_streams_groups_lines
from jobs.polling import wait_until
from tests.support.kafka_isolation import delete_streams_group
from tests.support.pipeline_kafka import create_topics, produce, report, stateful_topology

APP = "refapp-status-streams"
PARTITIONS = 4
RECORDS = 500


def _actives(bootstrap: str) -> list[str]:
    read = parse_reader_output(read_streams_groups_lines(bootstrap, {}, 10.0), int(time.time() * 1000))
    group = next((g for g in read.groups if g.group_id == APP), None)
    return sorted(t for _, v in (group.reports if group else ()) for t in json.loads(v)["active_tasks"])


@pytest.fixture
def streams_group(broker: EmbeddedBroker, tmp_path: Path) -> Iterator[StreamsFleet]:
    """Two instances on the streams protocol share every task; the group once ran the plugin (one old report)."""
    config = StreamsFleetConfig(
        bootstrap=broker.bootstrap,
        root=tmp_path / "fleet",
        application_id=APP,
        partitions=PARTITIONS,
        plugin=False,
        group_protocol="streams",
    )
    create_topics(broker.bootstrap, {"reports": 1}, compacted=["reports"])
    old = StateReport.from_json(report(APP, "old-plugin-process", active=["0_0"], topology=stateful_topology(APP, 1)))
    produce(broker.bootstrap, "reports", [(old.key.encode(), old.encode(), None)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    with StreamsFleet(config) as fleet:
        fleet.produce(RECORDS, keys=RECORDS)
        fleet.start("a")
        fleet.start("b")
        every_task = sorted(config.tasks)

        def running() -> bool:
            assert all(i.alive for i in fleet.members()), [i.log_tail() for i in fleet.members()]
            return _actives(broker.bootstrap) == every_task and len(fleet.members()) == 2

        wait_until(running, 120, "both instances running every task", poll_s=1)
        yield fleet
        fleet.close()
        delete_streams_group(admin, APP)


def test_status_lists_a_streams_protocol_group_with_its_members_tasks_once(
    broker: EmbeddedBroker,
    streams_group: StreamsFleet,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    fleet = streams_group
    monkeypatch.setenv("RBP_REPORTS_TOPIC", "reports")
    monkeypatch.delenv("RBP_KAFKA_CONFIG", raising=False)
    monkeypatch.delenv("RBP_STREAMS_READER_JAR", raising=False)
    capsys.readouterr()

    seen: dict[str, Any] = {}

    def both_members() -> bool:
        assert main(["status", "--bootstrap", broker.bootstrap, "--json", "--no-lake"]) == 0
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        mine = [s for s in lines if s["group_id"] == APP]
        assert len(mine) <= 1, mine  # shown once, as the streams group, not again from its old plugin report
        seen.update(mine[0] if mine else {})
        return bool(mine) and mine[0]["members"] == 2

    wait_until(both_members, 120, "status shows both members", poll_s=1)
    status = seen
    assert (status["protocol"], status["source"], status["plan_id"]) == ("streams", BROKER_STREAMS, None)
    instances = status["instances"]
    assert isinstance(instances, list)
    assert {i["process_id"] for i in instances} == {i.process_id for i in fleet.members()}
    assert sorted(t for i in instances for t in i["active"]) == sorted(fleet.config.tasks)
    assert all(i["reported_at"] is None and i["warmup"] == [] for i in instances)
    assert status["step"] == "-" and status["report_age_ms"] is None
    assert status["next_check"] == "broker assigns at the next epoch; assignor: sticky"
    (note,) = status["notes"]
    assert str(note).startswith("1 old plugin report(s) on the reports topic not shown")

    # The table for people names the protocol and the note.
    assert main(["status", APP, "--bootstrap", broker.bootstrap, "--no-lake"]) == 0
    out = capsys.readouterr().out
    assert "streams (broker-streams), 2 member(s)" in out and "old plugin report(s)" in out

    # A reader that cannot run: one line on stderr, the rest of status still shows, exit 0.
    monkeypatch.setenv("RBP_STREAMS_READER_JAR", str(tmp_path / "no-such.jar"))
    assert main(["status", "--bootstrap", broker.bootstrap, "--json", "--no-lake"]) == 0
    captured = capsys.readouterr()
    assert APP not in captured.out
    (error,) = [line for line in captured.err.splitlines() if line.startswith("rebalance-planner status:")]
    assert "streams-protocol group(s) not shown" in error and "no such file" in error
