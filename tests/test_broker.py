"""The embedded broker: a real Tansu process that speaks the Kafka protocol, started and stopped cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from jobs.local.broker import EmbeddedBroker
from jobs.local.processes import free_port


def test_compacted_topic_round_trip_and_exact_end_offsets(broker: EmbeddedBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic("_reports", 1, 1, config={"cleanup.policy": "compact"})])
    for future in futures.values():
        future.result(10)
    # One record per batch: Tansu reports end offsets exactly only then (shared/ENVIRONMENT.md).
    producer = Producer({"bootstrap.servers": broker.bootstrap, "batch.num.messages": 1, "linger.ms": 0})
    for i in range(5):
        producer.produce("_reports", key=b"g/p", value=f"v{i}".encode())
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "t", "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("_reports", 0, 0)])
    values: list[bytes | None] = []
    deadline = time.monotonic() + 20
    while len(values) < 5 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    low, high = consumer.get_watermark_offsets(TopicPartition("_reports", 0), timeout=5)
    consumer.close()
    assert values == [b"v0", b"v1", b"v2", b"v3", b"v4"]
    assert (low, high) == (0, 5)


def test_stop_ends_the_process() -> None:
    broker = EmbeddedBroker()
    broker.start()
    assert broker.running
    broker.stop()
    assert not broker.running


def test_broker_command_serves_until_interrupted() -> None:
    port = free_port()
    cli = Path(sys.executable).parent / "rebalance-planner"
    process = subprocess.Popen(
        [str(cli), "broker", "--port", str(port)], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert f"127.0.0.1:{port}" in line
        assert AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=5) is not None
    finally:
        os.killpg(process.pid, signal.SIGINT)
        assert process.wait(timeout=20) == 0
