"""Kafka Streams' ``AssignmentInfo`` user data (versions 1-11): the tasks a leader gave one member.

Hand-written by Kafka with ``DataOutputStream`` (no message JSON): big-endian integers, int32 counts, topic names
as ``writeUTF`` (uint16 length), and from version 10 a named-topology name per task id (int32 char count, UTF-16
chars). The active task list is parallel to the member's assigned partitions sorted by (topic, partition): entry
i is the task of partition i, which is how a reader learns each active task's source partition.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from assignor.protocol.bounded import shown
from assignor.protocol.streams_wire import StreamsUserDataError, WireReader
from assignor.task import TaskId

__all__ = ["LATEST_ASSIGNMENT_VERSION", "StreamsAssignment", "StreamsUserDataError", "decode_assignment"]

LATEST_ASSIGNMENT_VERSION = 11
_NAMED_TOPOLOGY_SINCE = 10


@dataclass(frozen=True)
class StreamsAssignment:
    """One member's assignment user data; the host maps (interactive-query metadata) are checked, not kept."""

    version: int
    commonly_supported_version: int  # -1 before version 3
    active_tasks: tuple[TaskId, ...]  # parallel to the member's assigned partitions, sorted; may repeat a task
    standby_tasks: Mapping[TaskId, frozenset[tuple[str, int]]] = field(
        default_factory=lambda: MappingProxyType({})
    )  # task -> its changelog partitions (topic, partition)
    error_code: int = 0  # version 4+
    next_rebalance_ms: int | None = None  # version 7+: when the leader scheduled a follow-up (probing) rebalance


def _task(reader: WireReader, version: int, name: str) -> TaskId:
    task = reader.task_id(name)
    if version >= _NAMED_TOPOLOGY_SINCE:
        chars = reader.count(f"{name} named topology", 2)
        raw = reader.take(2 * chars, f"{name} named topology")
        topology = raw.decode("utf-16-be", errors="replace")  # only its emptiness matters
        reader.no_named_topology(topology, task, name)
    return task


def _utf(reader: WireReader, name: str) -> str:
    return reader.text(reader.take(reader.uint16(f"{name} length"), name), name)


def _topic_partitions(reader: WireReader, name: str) -> frozenset[tuple[str, int]]:
    pairs = []
    for _ in range(reader.count(name, 6)):
        topic, partition = _utf(reader, name), reader.int32(name)
        if partition < 0:  # an int32 on the wire: only its sign is left to check
            raise reader.fail(f"{name} has a negative partition {partition} of {shown(topic)}")
        pairs.append((topic, partition))
    return frozenset(pairs)


def _skip_host_map(reader: WireReader, name: str, dictionary: bool) -> None:
    """Host → partitions (interactive queries): read to check the bytes, dropped."""
    for _ in range(reader.count(name, 6 + 4)):
        _utf(reader, f"{name} host")
        reader.int32(f"{name} port")
        if dictionary:
            for _ in range(reader.count(f"{name} partitions", 8)):
                reader.int32(f"{name} topic index")
                reader.int32(f"{name} partition")
        else:
            _topic_partitions(reader, f"{name} partitions")


def _skip_dictionary(reader: WireReader) -> None:
    for _ in range(reader.count("topic dictionary", 6)):
        reader.int32("topic dictionary index")
        _utf(reader, "topic dictionary name")


def decode_assignment(data: bytes) -> StreamsAssignment:
    """Decode a member's AssignmentInfo user data; StreamsUserDataError (with the reason) for anything else."""
    reader = WireReader(data, "Kafka Streams assignment")
    version = reader.int32("version")
    if not 1 <= version <= LATEST_ASSIGNMENT_VERSION:
        raise reader.fail(f"version {version} is not an AssignmentInfo version read here (1..11)")
    common = reader.int32("commonlySupportedVersion") if version >= 3 else -1
    actives = tuple(_task(reader, version, "activeTasks") for _ in range(reader.count("activeTasks", 8)))
    standbys: dict[TaskId, frozenset[tuple[str, int]]] = {}
    for _ in range(reader.count("standbyTasks", 12)):
        task = _task(reader, version, "standbyTasks")
        if task in standbys:
            raise reader.fail(f"standbyTasks lists task {task} twice")
        standbys[task] = _topic_partitions(reader, "standby partitions")
    if version in (2, 3, 4):
        _skip_host_map(reader, "partitionsByHost", dictionary=False)
    elif version == 5:
        _skip_dictionary(reader)
        _skip_host_map(reader, "partitionsByHost", dictionary=True)
    elif version >= 6:
        _skip_dictionary(reader)
        _skip_host_map(reader, "partitionsByHost", dictionary=True)
        _skip_host_map(reader, "standbyPartitionsByHost", dictionary=True)
    error_code = reader.int32("errorCode") if version >= 4 else 0
    next_rebalance = reader.int64("nextRebalanceMs") if version >= 7 else None
    return StreamsAssignment(version, common, actives, MappingProxyType(standbys), error_code, next_rebalance)
