"""Which part of a processed batch a task may commit, given the delivery reports of its changelog writes.

The rule: the store applies, and the input position passes, only the input records before the first one whose
write the changelog does not hold; everything from there on is processed again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from confluent_kafka import KafkaError

from assignor.runtime.processors import ChangelogWrite, InputRecord
from assignor.runtime.protocol import Partition
from assignor.runtime.store import ChangelogRecord


class DeliveredRecord(Protocol):
    """What a delivery report tells of where a write landed (a confluent_kafka Message)."""

    def topic(self) -> str | None: ...
    def partition(self) -> int | None: ...
    def offset(self) -> int | None: ...


class BatchDeliveries:
    """The delivery reports of one task's writes from one batch, and what of the batch they let it commit."""

    def __init__(self, records: Sequence[InputRecord], writes: Sequence[ChangelogWrite]) -> None:
        self.records, self.writes = records, writes
        self._index = {(r.partition, r.offset): i for i, r in enumerate(records)}
        self._reports: list[tuple[str | None, ChangelogRecord | None]] = [("no delivery report", None)] * len(writes)

    def delivered(self, index: int, err: KafkaError | None, msg: DeliveredRecord) -> None:
        if err is not None:
            if err.fatal():  # the idempotent producer cannot go on; nothing past this write is committed
                raise RuntimeError(f"changelog producer failed fatally: {err}")
            self._reports[index] = (str(err), None)
            return
        write = self.writes[index]
        self._reports[index] = (
            None,
            ((str(msg.topic()), int(msg.partition() or 0)), int(msg.offset() or 0), write.key, write.value),
        )

    @property
    def failed_count(self) -> int:
        return sum(1 for error, _ in self._reports if error is not None)

    @property
    def failure(self) -> tuple[ChangelogWrite, str] | None:
        """The first write the changelog does not hold, with the reason."""
        for write, (error, _) in zip(self.writes, self._reports, strict=True):
            if error is not None:
                return write, error
        return None

    def committed(self) -> tuple[list[ChangelogRecord], dict[Partition, int]]:
        """The writes to apply and the input positions to store: everything before the first input record one of
        whose writes failed. Later writes that did reach the changelog are left out too, so reprocessing from
        that record recomputes them from the same store and writes the same values again."""
        failure = self.failure
        cut = len(self.records) if failure is None else self._source_index(failure[0])
        applied = []
        for write, (_, delivered) in zip(self.writes, self._reports, strict=True):
            if self._source_index(write) >= cut:
                break
            assert delivered is not None  # every write before the first failure was delivered
            applied.append(delivered)
        inputs = {}
        for record in self.records[:cut]:
            inputs[record.partition] = record.offset + 1
        return applied, inputs

    def _source_index(self, write: ChangelogWrite) -> int:
        return self._index[(write.source.partition, write.source.offset)]
