"""The sequence publish gives a group's signed records: strictly increasing, bounded, learned from verified ones."""

from __future__ import annotations

import json

import pytest

from assignor.protocol.plans import MAX_SEQUENCE, Withdrawal
from jobs.pipeline.plan_sequence import SequenceExhausted, highest_sequences, next_sequence
from tests.support.signing import FORGER, SIGNER, VERIFY_KEYS

NOW = 1_790_000_000_000


def _value(record: dict[str, object]) -> bytes:
    return json.dumps(record).encode()


def test_the_next_sequence_is_the_publish_time_unless_the_topic_holds_a_later_one() -> None:
    assert next_sequence(None, NOW) == NOW
    assert next_sequence(NOW - 5, NOW) == NOW
    # A clock that went back (or a publisher whose clock runs ahead) still gives a higher sequence.
    assert next_sequence(NOW + 10, NOW) == NOW + 11


def test_the_sequence_never_passes_what_every_json_reader_holds() -> None:
    assert next_sequence(MAX_SEQUENCE - 1, NOW) == MAX_SEQUENCE
    with pytest.raises(SequenceExhausted, match="beyond 9007199254740991"):
        next_sequence(MAX_SEQUENCE, NOW)


def test_only_verified_records_of_the_group_raise_the_floor() -> None:
    signed = _value(Withdrawal("p1", "orders", NOW, NOW + 100).to_record(SIGNER))
    forged = _value(Withdrawal("p2", "orders", NOW, MAX_SEQUENCE).to_record(FORGER))
    misfiled = _value(Withdrawal("p3", "payments", NOW, NOW + 500).to_record(SIGNER))  # keyed orders, for payments
    records = [(b"orders", signed), (b"orders", forged), (b"orders", b"\x00garbage"), (b"orders", misfiled),
               (b"orders", None), (None, signed), (b"clicks", signed)]  # fmt: skip
    assert highest_sequences(records, VERIFY_KEYS, {"orders", "clicks"}) == {"orders": NOW + 100}
