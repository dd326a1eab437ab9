"""Bounded big-endian reading of Kafka Streams' binary user data, and the one error every malformed input raises."""

from __future__ import annotations

import struct

from assignor.task import TaskId

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_UINT16 = struct.Struct(">H")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class StreamsUserDataError(ValueError):
    """Kafka Streams user data that does not decode: truncated, malformed, or of a version or feature not read."""

    def __init__(self, what: str, reason: str) -> None:
        super().__init__(f"{what}: {reason}")
        self.what = what
        self.reason = reason


class WireReader:
    """Reads fixed-width fields from a byte string; every read checks the bytes left before it takes them."""

    def __init__(self, data: bytes, what: str) -> None:
        self._data = bytes(data)
        self._at = 0
        self.what = what

    def fail(self, reason: str) -> StreamsUserDataError:
        """The error to raise, naming the byte offset it was found at."""
        return StreamsUserDataError(self.what, f"{reason} (at byte {self._at} of {len(self._data)})")

    @property
    def remaining(self) -> int:
        return len(self._data) - self._at

    def take(self, size: int, field: str) -> bytes:
        if size > self.remaining:
            raise self.fail(f"truncated in {field}: needs {size} byte(s), {self.remaining} left")
        chunk = self._data[self._at : self._at + size]
        self._at += size
        return chunk

    def int8(self, field: str) -> int:
        return int(_INT8.unpack(self.take(1, field))[0])

    def int16(self, field: str) -> int:
        return int(_INT16.unpack(self.take(2, field))[0])

    def uint16(self, field: str) -> int:
        return int(_UINT16.unpack(self.take(2, field))[0])

    def int32(self, field: str) -> int:
        return int(_INT32.unpack(self.take(4, field))[0])

    def int64(self, field: str) -> int:
        return int(_INT64.unpack(self.take(8, field))[0])

    def count(self, field: str, min_item_bytes: int) -> int:
        """An int32 element count, refused when negative or when the bytes left cannot hold that many elements
        (so a hostile count never makes us allocate or loop beyond the input's size)."""
        n = self.int32(field)
        if n < 0:
            raise self.fail(f"{field} has a negative count {n}")
        if n * min_item_bytes > self.remaining:
            raise self.fail(f"truncated in {field}: {n} element(s) claimed, only {self.remaining} byte(s) left")
        return n

    def text(self, raw: bytes, field: str) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"{field} is not UTF-8") from None

    def task_id(self, field: str) -> TaskId:
        """A task id as two int32s (subtopology, partition); negative parts are refused."""
        subtopology, partition = self.int32(field), self.int32(field)
        if subtopology < 0 or partition < 0:
            raise self.fail(f"{field} has a negative task id {subtopology}_{partition}")
        return TaskId(subtopology, partition)

    def no_named_topology(self, name: str | None, task: TaskId, field: str) -> None:
        """Named topologies (an internal, deprecated Kafka Streams feature) make task ids that ours cannot hold."""
        if name:
            raise self.fail(f"{field}: task {task} belongs to named topology {name!r}; named topologies are not read")
