"""Task identity and the offset-sum sentinels Kafka Streams reports."""

from __future__ import annotations

import re
from typing import NamedTuple

from assignor.protocol.bounded import PARTITION_RANGE, SUBTOPOLOGY_RANGE, shown

LATEST_OFFSET = -2
"""Offset-sum sentinel: the task runs as an active here, caught up by definition."""

UNKNOWN_OFFSET_SUM = -3
"""Offset-sum sentinel: the client has state for the task but cannot tell how much."""

# At most ten digits a part, checked by the pattern before int() converts anything; the range after.
_TASK_ID = re.compile(r"(0|[1-9][0-9]{0,9})_(0|[1-9][0-9]{0,9})")


class TaskId(NamedTuple):
    """A task: one partition of one subtopology; ordered by (subtopology, partition)."""

    subtopology: int
    partition: int

    @classmethod
    def parse(cls, text: str) -> TaskId:
        """Parse ``"<subtopology>_<partition>"``, each part 0..2^31-1 as in Kafka; raise ValueError on anything else."""
        match = _TASK_ID.fullmatch(text) if isinstance(text, str) else None
        if match is not None:
            subtopology, partition = int(match.group(1)), int(match.group(2))
            if subtopology <= SUBTOPOLOGY_RANGE[1] and partition <= PARTITION_RANGE[1]:
                return cls(subtopology, partition)
        raise ValueError(
            f"task id must look like '<subtopology>_<partition>' (e.g. '0_3'), each part 0..{PARTITION_RANGE[1]}, "
            f"got {shown(text)}"
        )

    def __str__(self) -> str:
        return f"{self.subtopology}_{self.partition}"


def parse_task_ids(values: object, where: str, error: type[ValueError] = ValueError) -> frozenset[TaskId]:
    """Task ids from a JSON list of ``"<subtopology>_<partition>"`` strings; ``error`` names ``where``."""
    if not isinstance(values, list):
        raise error(f"{where} must be a list of task ids, got {values!r}")
    try:
        return frozenset(TaskId.parse(v) for v in values)
    except ValueError as err:
        raise error(f"{where}: {err}") from None
