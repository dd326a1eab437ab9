"""The embedded broker: Apache Kafka (KRaft) as a child JVM, exact offsets, real compaction, clean stops."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]

from jobs.kafka_topics import TopicSpec, ensure_topics
from jobs.local.broker import EmbeddedBroker
from jobs.pipeline.streams_assignor import ASSIGNOR_NAME, broker_assignor
from jobs.polling import wait_until
from jobs.processes import free_port
from jobs.settings import Settings


def read_all(bootstrap: str, topic: str, expected: int | None = None) -> list[tuple[bytes | None, bytes | None]]:
    """Every record of partition 0 from the log start to the end offset, as (key, value)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, low)])
        records: list[tuple[bytes | None, bytes | None]] = []
        position = low

        def drained() -> bool:
            nonlocal position
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                records.append((message.key(), message.value()))
                position = (message.offset() or 0) + 1
            return position >= high

        if high > low:
            wait_until(drained, 30, f"{topic} read to its end offset {high}", poll_s=0)
        return records
    finally:
        consumer.close()


def test_batched_produce_gives_exact_end_offsets(broker: EmbeddedBroker) -> None:
    ensure_topics({"bootstrap.servers": broker.bootstrap}, [TopicSpec("batched", 2)])
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50, "batch.num.messages": 10_000})
    for i in range(1_000):
        producer.produce("batched", key=b"k", value=str(i).encode(), partition=i % 2)
    assert producer.flush(30) == 0
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    ends = admin.list_offsets({TopicPartition("batched", p): latest for p in (0, 1)})
    assert {tp.partition: future.result().offset for tp, future in ends.items()} == {0: 500, 1: 500}


def test_compacted_topics_really_compact(broker: EmbeddedBroker) -> None:
    # A short segment.ms so the segment holding the old versions closes within the test.
    ensure_topics({"bootstrap.servers": broker.bootstrap}, [TopicSpec("_reports", compacted=True, segment_ms=500)])
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    for version in range(50):
        for key in (b"g/a", b"g/b"):
            producer.produce("_reports", key=key, value=f"v{version}".encode())
    assert producer.flush(10) == 0

    def compacted() -> bool:
        # Kafka rolls a segment on the next append after segment.ms; the cleaner then folds the closed one.
        producer.produce("_reports", key=b"g/roll", value=b"x")
        producer.flush(10)
        records = read_all(broker.bootstrap, "_reports")
        return sum(1 for key, _ in records if key in (b"g/a", b"g/b")) == 2

    wait_until(compacted, 60, "the cleaner to keep one record per key", poll_s=1.0)
    latest = {key: value for key, value in read_all(broker.bootstrap, "_reports")}
    assert latest[b"g/a"] == latest[b"g/b"] == b"v49"


def test_data_survives_a_restart_on_the_same_data_dir(tmp_path: Path) -> None:
    # Its own broker: this test stops the broker, which the shared one must never be.
    with EmbeddedBroker(data_dir=tmp_path / "kafka") as broker:
        ensure_topics({"bootstrap.servers": broker.bootstrap}, [TopicSpec("kept", compacted=True)])
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        producer.produce("kept", key=b"k", value=b"before the restart")
        assert producer.flush(10) == 0
        port, pid = broker.port, broker.pid
        broker.stop()
        assert not broker.running
        broker.start()
        assert broker.port == port and broker.pid != pid
        assert read_all(broker.bootstrap, "kept") == [(b"k", b"before the restart")]
    assert (tmp_path / "kafka" / "server.log").is_file()  # the caller's data dir is kept


def test_a_temporary_data_dir_is_removed_and_the_process_stopped() -> None:
    # Its own broker: the test checks what stopping leaves behind.
    broker = EmbeddedBroker()
    broker.start()
    pid, data = broker.pid, broker.data_dir
    assert broker.running and pid is not None
    broker.close()
    assert not broker.running and not data.exists()
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()


def test_broker_command_serves_until_interrupted(tmp_path: Path) -> None:
    # Its own broker: the command under test starts one.
    port = free_port()
    cli = Path(sys.executable).parent / "rebalance-planner"
    process = subprocess.Popen(
        [str(cli), "broker", "--port", str(port), "--data-dir", str(tmp_path / "data")],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
        cwd=Path(__file__).resolve().parents[2],  # the jars live under the checkout's var/jvm
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert f"127.0.0.1:{port}" in line
        assert AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"}).list_topics(timeout=10) is not None
    finally:
        os.killpg(process.pid, signal.SIGINT)
        assert process.wait(timeout=60) == 0
    assert (tmp_path / "data" / "embedded-broker.json").is_file()


def test_the_broker_dies_with_its_parent(tmp_path: Path) -> None:
    # Its own broker, in a parent process we kill with SIGKILL: nothing may be left running.
    script = (
        "import sys, time\n"
        "from jobs.local.broker import EmbeddedBroker\n"
        f"b = EmbeddedBroker(data_dir=__import__('pathlib').Path({str(tmp_path / 'd')!r}))\n"
        "b.start(); print(b.pid, flush=True); time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert parent.stdout is not None
    jvm = int(parent.stdout.readline())
    parent.kill()
    parent.wait(10)

    def gone() -> bool:
        try:
            os.kill(jvm, 0)
        except ProcessLookupError:
            return True
        return "State:\tZ" in Path(f"/proc/{jvm}/status").read_text()

    wait_until(gone, 30, f"the broker JVM {jvm} to stop after its parent was killed")


def test_the_brokers_native_libraries_unpack_into_its_own_folder(broker: EmbeddedBroker) -> None:
    # lz4-java unpacks a native library into java.io.tmpdir, removed only on a clean exit: in /tmp, every
    # killed broker would leave one behind for good.
    ensure_topics({"bootstrap.servers": broker.bootstrap}, [TopicSpec("lz4", 1)])
    producer = Producer({"bootstrap.servers": broker.bootstrap, "compression.type": "lz4", "linger.ms": 5})
    for i in range(100):
        producer.produce("lz4", key=b"k", value=b"x" * 100 + str(i).encode())
    assert producer.flush(30) == 0
    assert read_all(broker.bootstrap, "lz4", 100)[-1] == (b"k", b"x" * 100 + b"99")
    wait_until(lambda: any(broker.jvm_tmp.glob("liblz4-java*.so")), 30, f"lz4-java unpacked in {broker.jvm_tmp}")


def test_the_broker_offers_our_streams_assignor_and_publish_sees_it(broker: EmbeddedBroker, tmp_path: Path) -> None:
    # The shared broker has it (group.streams.assignors read back with DescribeConfigs); a broker without it does not.
    settings = Settings(lake_root=tmp_path / "lake")
    assert broker_assignor(settings, broker.bootstrap) == ASSIGNOR_NAME
    assert broker_assignor(settings.model_copy(update={"broker_assignor": ""}), broker.bootstrap) is None
    with EmbeddedBroker(with_assignor=False) as plain:
        assert broker_assignor(settings, plain.bootstrap) is None
