"""The demo's processor, apart from the runtime's loop: counts per key, and says where a restored store resumes."""

from __future__ import annotations

import json

from assignor import TaskId
from assignor.runtime.processors import ChangelogWrite, CountPerKey, InputRecord, TaskProcessor

INPUT = ("orders-input", 0)


class Store:
    def __init__(self, values: dict[str, str]) -> None:
        self.values = values

    def get(self, key: str) -> str | None:
        return self.values.get(key)


def test_counts_continue_from_the_store_and_from_earlier_records_of_the_batch() -> None:
    records = [InputRecord(INPUT, o, k, "") for o, k in [(7, "a"), (8, "b"), (9, "a")]]
    processor: TaskProcessor = CountPerKey()
    writes = processor.process(TaskId(0, 0), records, Store({"a": json.dumps({"count": 4, "input_offset": 3})}))
    assert writes == [
        ChangelogWrite("a", json.dumps({"count": 5, "input_offset": 7}), records[0]),
        ChangelogWrite("b", json.dumps({"count": 1, "input_offset": 8}), records[1]),
        ChangelogWrite("a", json.dumps({"count": 6, "input_offset": 9}), records[2]),
    ]
    assert [processor.resume_offset(w.value) for w in writes] == [7, 8, 9]


def test_values_it_did_not_write_count_from_zero_and_name_no_input_offset() -> None:
    for foreign in ("", "not json", "[1]", '{"count": "x"}', '"text"'):
        (write,) = CountPerKey().process(TaskId(0, 0), [InputRecord(INPUT, 0, "k", "")], Store({"k": foreign}))
        assert json.loads(write.value)["count"] == 1
        assert CountPerKey().resume_offset(foreign) is None
