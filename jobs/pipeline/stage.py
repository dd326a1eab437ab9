"""What a stage run did: the MERGE outcome per table plus stage-specific counts, for the CLI and the logs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pyspark.sql import functions as sf

from jobs.lakehouse.lake import Lake, MergeOutcome


class StageInputError(ValueError):
    """The stage cannot run on what it was given (unknown snapshot or plan, wrong status); the message says why."""


class StageUnavailable(RuntimeError):
    """A part the stage needs (Kafka, Spark) did not answer: the same run may succeed later, so retry it."""


class BrokerUnreachable(StageUnavailable):
    """No Kafka broker answered at ``bootstrap`` within the bounded retries; the message is one line."""

    def __init__(self, bootstrap: str, attempts: int, waited_s: float, last_error: str) -> None:
        self.bootstrap, self.attempts, self.waited_s = bootstrap, attempts, waited_s
        self.last_error = " ".join(last_error.split())
        super().__init__(
            f"Kafka broker at {bootstrap} unreachable after {attempts} attempt(s) in {waited_s:.1f} s: "
            f"{self.last_error}"
        )

    def __reduce__(self) -> tuple[type[BrokerUnreachable], tuple[str, int, float, str]]:
        return type(self), (self.bootstrap, self.attempts, self.waited_s, self.last_error)


@dataclass(frozen=True)
class StageResult:
    """One stage run: its snapshot, every table it merged into, and counts worth reporting."""

    stage: str
    snapshot_id: str | None
    outcomes: tuple[MergeOutcome, ...] = ()
    counts: Mapping[str, int] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        """Whether any table got a new version."""
        return any(o.changed for o in self.outcomes)


def resolve_snapshot(lake: Lake, snapshot_id: str | None) -> str:
    """The given snapshot if it was extracted, else the latest one; StageInputError when there is none."""
    snapshots = lake.read("snapshots")
    if snapshot_id is not None:
        if snapshots.where(sf.col("snapshot_id") == snapshot_id).limit(1).count() == 0:
            raise StageInputError(f"unknown snapshot_id {snapshot_id!r}: no extract wrote it")
        return snapshot_id
    latest = snapshots.orderBy(sf.col("captured_at").desc(), sf.col("snapshot_id").desc()).limit(1).collect()
    if not latest:
        raise StageInputError(f"no snapshot in {lake.root}: run extract first")
    return str(latest[0]["snapshot_id"])
