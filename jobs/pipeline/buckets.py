"""Groups in buckets: a stage runs its queries and writes one bucket of groups at a time, so its memory follows
the bucket's size, not the fleet's."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as sf

from jobs.lakehouse.lake import Scope


@dataclass(frozen=True)
class GroupBucket:
    """One bucket of a snapshot's groups: ids from ``first`` (inclusive) to ``before`` (exclusive), None unbounded.
    The buckets of a split cover every id, so a group no listing saw still falls in exactly one of them."""

    snapshot_id: str
    number: int  # from 1
    of: int
    first: str | None
    before: str | None

    @property
    def scope(self) -> Scope:
        """The part of a snapshot's tables this bucket writes (see Lake.merge)."""
        return Scope(self.snapshot_id, self.first, self.before)

    def rows(self, frame: DataFrame) -> DataFrame:
        """``frame``'s rows of this bucket's groups (it has a group_id column)."""
        inside = sf.lit(True)
        if self.first is not None:
            inside = inside & (sf.col("group_id") >= self.first)
        if self.before is not None:
            inside = inside & (sf.col("group_id") < self.before)
        return frame if self.of == 1 else frame.where(inside)

    def __str__(self) -> str:
        return f"bucket {self.number} of {self.of}"


def split_groups(snapshot_id: str, group_ids: list[str], bucket_groups: int) -> list[GroupBucket]:
    """``group_ids`` sorted into buckets of at most ``bucket_groups`` (deterministic: the same ids, the same
    buckets); one unbounded bucket when they fit in one."""
    if bucket_groups < 1:
        raise ValueError(f"bucket_groups must be at least 1, got {bucket_groups}")
    ids = sorted(set(group_ids))
    starts = ids[bucket_groups::bucket_groups]  # each later bucket begins at its first id
    bounds = [None, *starts, None]
    n = len(bounds) - 1
    return [GroupBucket(snapshot_id, i + 1, n, bounds[i], bounds[i + 1]) for i in range(n)]


def group_buckets(groups: DataFrame, snapshot_id: str, bucket_groups: int) -> list[GroupBucket]:
    """The buckets of the distinct ``group_id``s in ``groups``."""
    ids = [str(r["group_id"]) for r in groups.select("group_id").distinct().collect()]
    return split_groups(snapshot_id, ids, bucket_groups)
