"""What a batch may commit given its delivery reports: never an input position past a write the changelog lacks."""

from __future__ import annotations

from dataclasses import dataclass

from confluent_kafka import KafkaError
from hypothesis import given
from hypothesis import strategies as st

from assignor.runtime.deliveries import BatchDeliveries
from assignor.runtime.processors import ChangelogWrite, InputRecord

CHANGELOG = ("counts-changelog", 0)


@dataclass(frozen=True)
class Delivered:
    """The three things a delivery report's message is asked for."""

    at: int

    def topic(self) -> str:
        return CHANGELOG[0]

    def partition(self) -> int:
        return CHANGELOG[1]

    def offset(self) -> int:
        return self.at


@st.composite
def batches(draw: st.DrawFn) -> tuple[list[InputRecord], list[ChangelogWrite], list[bool]]:
    """Input records over two partitions, 0-2 writes each in input order, and which writes were delivered."""
    records: list[InputRecord] = []
    next_offset = {0: 10, 1: 500}
    for partition in draw(st.lists(st.sampled_from([0, 1]), min_size=1, max_size=12)):
        records.append(InputRecord(("in", partition), next_offset[partition], f"k{len(records) % 3}", ""))
        next_offset[partition] += 1
    writes = [ChangelogWrite(r.key, f"v{i}", r) for r in records for i in range(draw(st.integers(0, 2)))]
    delivered = draw(st.lists(st.booleans(), min_size=len(writes), max_size=len(writes)))
    return records, writes, delivered


@given(batches())
def test_the_input_position_never_passes_a_record_whose_write_failed(
    batch: tuple[list[InputRecord], list[ChangelogWrite], list[bool]],
) -> None:
    records, writes, delivered = batch
    reports = BatchDeliveries(records, writes)
    for index, ok in enumerate(delivered):
        reports.delivered(index, None if ok else KafkaError(KafkaError.MSG_SIZE_TOO_LARGE), Delivered(100 + index))
    applied, inputs = reports.committed()

    failed = [w.source for w, ok in zip(writes, delivered, strict=True) if not ok]
    cut = min((records.index(r) for r in failed), default=len(records))
    committed = records[:cut]
    # Every committed record had all its writes delivered; the position passes exactly the committed records.
    assert inputs == {r.partition: r.offset + 1 for r in committed}
    assert all(inputs.get(r.partition, 0) <= r.offset for r in failed)
    # What the store applies is every write of the committed records, in changelog order, and nothing else.
    expected = [(CHANGELOG, 100 + i, w.key, w.value) for i, w in enumerate(writes) if w.source in committed]
    assert applied == expected
    assert (reports.failure is None) == (not failed)


def test_a_batch_without_failures_commits_every_record_even_those_without_writes() -> None:
    records = [InputRecord(("in", 0), 7, "a", ""), InputRecord(("in", 0), 8, "skip", "")]
    writes = [ChangelogWrite("a", "1", records[0])]
    reports = BatchDeliveries(records, writes)
    reports.delivered(0, None, Delivered(3))
    assert reports.committed() == ([(CHANGELOG, 3, "a", "1")], {("in", 0): 9})
    assert reports.failure is None and reports.failed_count == 0
