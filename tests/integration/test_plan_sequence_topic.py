"""Publish's sequence on a real broker: learned from the verified records of the plans topic, from its log start."""

from __future__ import annotations

import json
import time

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from assignor.protocol.plans import MAX_SEQUENCE, Withdrawal
from jobs.local.broker import EmbeddedBroker
from jobs.pipeline.plan_sequence import assign_sequences
from tests.support.pipeline_kafka import produce
from tests.support.signing import FORGER, SIGNER, VERIFY_KEYS

TOPIC = "_rebalance_plans"


def test_the_next_sequence_passes_the_highest_verified_one_on_the_topic(broker: EmbeddedBroker) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    created = admin.create_topics([NewTopic(TOPIC, 1, 1, config={"cleanup.policy": "compact,delete"})])
    for future in created.values():
        future.result(10)
    properties = {"bootstrap.servers": broker.bootstrap}
    now = int(time.time() * 1000)
    ahead = now + 3_600_000  # written by a publisher whose clock ran an hour ahead
    records = [
        (b"orders", json.dumps(Withdrawal("p0", "orders", now, 5).to_record(SIGNER)).encode(), None),
        (b"orders", json.dumps(Withdrawal("p1", "orders", now, ahead).to_record(SIGNER)).encode(), None),
        (b"orders", json.dumps(Withdrawal("p2", "orders", now, MAX_SEQUENCE).to_record(FORGER)).encode(), None),
        (b"orders", b"\x00garbage", None),
    ]
    produce(broker.bootstrap, TOPIC, records)
    # The log start moves past offset 0: the reader starts at the log start, not at 0.
    for future in admin.delete_records([TopicPartition(TOPIC, 0, 1)]).values():
        future.result(10)
    got = assign_sequences(properties, TOPIC, VERIFY_KEYS, ["orders", "payments"], now, 30.0)
    assert got == {"orders": ahead + 1, "payments": now}
