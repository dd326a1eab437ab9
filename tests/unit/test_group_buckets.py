"""Groups split into buckets: every group in exactly one bucket, none bigger than asked, the same split every time."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from jobs.pipeline.buckets import GroupBucket, split_groups


def holder(buckets: list[GroupBucket], group_id: str) -> list[int]:
    return [
        b.number
        for b in buckets
        if (b.first is None or group_id >= b.first) and (b.before is None or group_id < b.before)
    ]


@given(ids=st.lists(st.text(min_size=1, max_size=6), max_size=40), size=st.integers(1, 12), other=st.text(max_size=6))
def test_every_group_falls_in_exactly_one_bucket_of_at_most_the_asked_size(
    ids: list[str], size: int, other: str
) -> None:
    buckets = split_groups("s1", ids, size)
    assert [b.number for b in buckets] == list(range(1, len(buckets) + 1))
    assert all(b.of == len(buckets) for b in buckets)
    for group_id in {*ids, other}:  # also an id the listing never saw
        assert len(holder(buckets, group_id)) == 1
    for b in buckets:
        assert sum(1 for g in set(ids) if holder(buckets, g) == [b.number]) <= size
    assert split_groups("s1", list(reversed(ids)), size) == buckets


def test_a_fleet_that_fits_is_one_unbounded_bucket_and_a_larger_one_is_cut_at_sorted_ids() -> None:
    assert split_groups("s1", ["b", "a"], 2) == [GroupBucket("s1", 1, 1, None, None)]
    assert split_groups("s1", ["e", "a", "c", "b", "d"], 2) == [
        GroupBucket("s1", 1, 3, None, "c"),
        GroupBucket("s1", 2, 3, "c", "e"),
        GroupBucket("s1", 3, 3, "e", None),
    ]
    assert str(split_groups("s1", ["a", "b"], 1)[1]) == "bucket 2 of 2"
