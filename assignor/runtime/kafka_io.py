"""The runtime's Kafka I/O: the latest plan per group from the compacted plans topic, and state reports."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec  # type: ignore[attr-defined]  # public, not in __all__

from assignor.protocol.key_revocation import MAX_HELD_BYTES, is_revocation_key, kept_by_reader
from assignor.protocol.state_report import StateReport

log = logging.getLogger("assignor.runtime")


class TopicReadError(RuntimeError):
    """A topic could not be read to its end in time."""


Record = tuple[int, int, bytes | None, bytes | None]  # (partition, offset, key, value)
K = TypeVar("K")
V = TypeVar("V")


def read_records(
    bootstrap: str, topic: str, config: Mapping[str, str] | None = None, timeout_s: float = 30.0
) -> list[Record]:
    """Every record of a topic from its beginning to its current end, in offset order per partition (a topic
    that does not exist reads as empty)."""
    return list(iter_records(bootstrap, topic, config, timeout_s))


def iter_records(
    bootstrap: str, topic: str, config: Mapping[str, str] | None = None, timeout_s: float = 30.0
) -> Iterator[Record]:
    """``read_records`` one record at a time, as they arrive: a reader that folds them holds none it dropped."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"rbp-reader-{topic}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            **dict(config or {}),
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if metadata is None:
            return
        if metadata.error is not None:
            if metadata.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return
            # Not "no records": a topic we may not read (authorization) or cannot read now is an error.
            raise KafkaException(metadata.error)
        # From the log start, whatever it is now (retention or deleteRecords may have moved it past offset 0,
        # where librdkafka's default reset would jump to the end and read nothing).
        partitions = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(metadata.partitions)]
        ends = {}
        for tp in partitions:
            low, high = consumer.get_watermark_offsets(tp, timeout=timeout_s)
            ends[tp.partition] = high if high > low else 0
        consumer.assign([tp for tp in partitions if ends[tp.partition] > 0])
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + timeout_s
        while len(done) < len(partitions):
            if time.monotonic() > deadline:
                raise TopicReadError(f"reading {topic} to its end took longer than {timeout_s} s")
            message = consumer.poll(0.2)
            if message is None:
                continue
            error, partition, offset = message.error(), message.partition(), message.offset()
            if partition is None:
                continue
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    done.add(partition)
                    continue
                raise KafkaException(error)
            if offset is None or offset >= ends[partition]:
                continue  # written after we looked at the end
            if offset + 1 >= ends[partition]:
                done.add(partition)
            yield partition, offset, message.key(), message.value()
    finally:
        consumer.close()


def read_latest_by_key(
    bootstrap: str, topic: str, config: Mapping[str, str] | None = None, timeout_s: float = 30.0
) -> dict[bytes, bytes | None]:
    """Fold a (compacted) topic from the beginning to its current end: the latest value per key, None for a
    tombstone. Readers fold themselves because a broker compacts only segments that have rolled."""
    records = iter_records(bootstrap, topic, config, timeout_s)
    return fold_latest((key, value) for _, _, key, value in records if key is not None)


def fold_latest(records: Iterable[tuple[K, V]]) -> dict[K, V]:
    """The latest value per key, folded as the records arrive: a superseded value is let go at once, so memory
    follows the number of keys, not of records (a busy compacted topic holds many records per key)."""
    latest: dict[K, V] = {}
    for key, value in records:
        latest[key] = value
    return latest


class ChangelogEndOffsets:
    """End offsets of changelog partitions through the admin client, for the leader's lag computation."""

    def __init__(self, bootstrap: str, config: Mapping[str, str] | None = None, timeout_s: float = 10.0) -> None:
        self.timeout_s = timeout_s
        self._admin = AdminClient({"bootstrap.servers": bootstrap, **dict(config or {})})

    def __call__(self, partitions: Sequence[tuple[str, int]]) -> dict[tuple[str, int], int]:
        if not partitions:
            return {}
        try:
            return self._list(partitions)
        except KafkaException:
            # librdkafka's admin client asks with the partition leader epochs it has cached and does not refresh
            # them when the broker answers FENCED_LEADER_EPOCH (a broker restart starts new epochs): refresh the
            # metadata, then ask once more.
            for topic in sorted({topic for topic, _ in partitions}):
                self._admin.list_topics(topic, timeout=self.timeout_s)
            return self._list(partitions)

    def _list(self, partitions: Sequence[tuple[str, int]]) -> dict[tuple[str, int], int]:
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        wanted = {TopicPartition(topic, partition): latest for topic, partition in partitions}
        futures = self._admin.list_offsets(wanted, request_timeout=self.timeout_s)
        ends = {}
        for tp, future in futures.items():
            ends[(tp.topic, tp.partition)] = int(future.result(self.timeout_s).offset)
        return ends

    def close(self) -> None:
        """Nothing to release: the admin client closes with its last reference."""


class PlanSource:
    """The latest approved plan record of a group, read from the plans topic on demand (leader only)."""

    def __init__(self, bootstrap: str, topic: str, config: Mapping[str, str] | None = None) -> None:
        self.bootstrap, self.topic, self.config = bootstrap, topic, dict(config or {})
        self._revocations: list[bytes | None] = []

    def key_revocations(self) -> list[bytes | None]:
        """The key-revocation records the last complete ``records`` scan met (protocol.key_revocation)."""
        return list(self._revocations)

    def __call__(self, group_id: str) -> bytes | None:
        return read_latest_by_key(self.bootstrap, self.topic, self.config).get(group_id.encode("utf-8"))

    def records(self, group_id: str) -> Iterator[bytes | None]:
        """Every record of the group from the log start, in order (values; None for a tombstone): the leader folds
        them (protocol.plan_ledger) to learn the highest verified sequence, not only the latest record."""
        key = group_id.encode("utf-8")
        revocations: list[bytes | None] = []
        held = dropped = 0
        for _, _, k, value in iter_records(self.bootstrap, self.topic, self.config):
            if k == key:
                yield value
            elif is_revocation_key(k):  # the same scan: revocations are rare and tiny
                if kept_by_reader(value, held):
                    revocations.append(value)
                    held += len(value or b"")
                else:
                    dropped += 1
        if dropped:
            log.warning("%s: %d key-revocation record(s) too large or past %d bytes in all, not read", self.topic,
                        dropped, MAX_HELD_BYTES)  # fmt: skip
        self._revocations = revocations


class ReportPublisher:
    """Publishes state reports to the compacted reports topic, key ``<group_id>/<process_id>``."""

    def __init__(self, bootstrap: str, topic: str, config: Mapping[str, str] | None = None) -> None:
        self.topic = topic
        self._producer = Producer({"bootstrap.servers": bootstrap, **dict(config or {})})

    def publish(self, report: StateReport | Mapping[str, Any], timeout_s: float = 10.0) -> None:
        """Write one report, encoded by ``StateReport`` (a JSON object is read through it first)."""
        record = report if isinstance(report, StateReport) else StateReport.from_json(report)
        self._producer.produce(self.topic, key=record.key.encode(), value=record.encode())
        if self._producer.flush(timeout_s) != 0:
            raise TopicReadError(f"state report for {record.key} not delivered within {timeout_s} s")


def kafka_python_security(config: Mapping[str, str]) -> dict[str, Any]:
    """The librdkafka-style extras that kafka-python understands too (SASL/TLS), renamed."""
    names = {
        "security.protocol": "security_protocol",
        "sasl.mechanism": "sasl_mechanism",
        "sasl.mechanisms": "sasl_mechanism",
        "sasl.username": "sasl_plain_username",
        "sasl.password": "sasl_plain_password",
        "ssl.ca.location": "ssl_cafile",
    }
    return {names[k]: v for k, v in config.items() if k in names}
