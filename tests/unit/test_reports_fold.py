"""Extract folds the reports topic as it reads it: the latest record per key is all it holds, so its memory follows
the number of keys, not of records (issue 30: it held the whole topic)."""

from __future__ import annotations

import weakref
from collections.abc import Iterator

from assignor.runtime.kafka_io import fold_latest


class Value:
    """A record value whose liveness a weak reference can watch (bytes cannot be weakly referenced)."""

    def __init__(self, key: int, n: int) -> None:
        self.key, self.n = key, n


def test_superseded_values_are_let_go_as_records_arrive() -> None:
    keys, per_key = 10, 2_000
    alive: list[weakref.ref[Value]] = []
    most_alive = 0

    def records() -> Iterator[tuple[int, Value]]:
        nonlocal most_alive
        for n in range(per_key):
            for key in range(keys):
                value = Value(key, n)
                alive.append(weakref.ref(value))
                yield key, value
                del value
            alive[:] = [r for r in alive if r() is not None]
            most_alive = max(most_alive, len(alive))

    latest = fold_latest(records())

    assert {k: (v.key, v.n) for k, v in latest.items()} == {k: (k, per_key - 1) for k in range(keys)}
    assert most_alive <= keys  # never more retained than one value per key, over 20,000 records
    assert len([r for r in alive if r() is not None]) == keys


def test_a_tombstone_is_the_latest_value_of_its_key() -> None:
    assert fold_latest([(b"a", b"1"), (b"b", b"2"), (b"a", None)]) == {b"a": None, b"b": b"2"}
