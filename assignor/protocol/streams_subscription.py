"""Kafka Streams' ``SubscriptionInfo`` user data (assignor protocol ``stream``, versions 1-11) as a typed value.

The layout is that of Kafka's ``SubscriptionInfoData.json`` (a non-flexible generated message, unchanged from
Kafka 3.0 through 4.4.0): big-endian fixed-width integers, int32 array counts and byte lengths, int16 string
lengths. Like Kafka's reader, bytes after the last field of the version are ignored.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from assignor.protocol.streams_wire import StreamsUserDataError, WireReader
from assignor.task import LATEST_OFFSET, UNKNOWN_OFFSET_SUM, TaskId

__all__ = ["LATEST_SUBSCRIPTION_VERSION", "StreamsSubscription", "StreamsUserDataError", "decode_subscription"]

LATEST_SUBSCRIPTION_VERSION = 11
"""The newest SubscriptionInfo version this decoder reads (Kafka Streams 3.0 to 4.4.0 send 11)."""

UNKNOWN_VERSION = -1
"""``latest_supported_version`` of versions 1 and 2, which do not carry it."""

_OFFSET_SUMS_SINCE = 7  # before: previous active and standby task lists
_FLAT_OFFSET_SUMS_SINCE = 10  # before: offset sums nested per subtopology

_EMPTY: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True)
class StreamsSubscription:
    """One Kafka Streams member's subscription user data. Fields a version does not carry hold their defaults:
    ``task_offset_sums`` is empty before version 7, ``previous_active``/``previous_standby`` are empty from it on."""

    version: int
    latest_supported_version: int  # UNKNOWN_VERSION for versions 1-2
    process_id: str  # the instance's UUID, as Java prints it
    user_endpoint: str | None = None  # application.server, "host:port"; None when not set (or before version 2)
    task_offset_sums: Mapping[TaskId, int] = field(default_factory=lambda: MappingProxyType({}))
    previous_active: frozenset[TaskId] = frozenset()  # versions 1-6
    previous_standby: frozenset[TaskId] = frozenset()  # versions 1-6
    unique_field: int | None = None  # version 8+: a byte that changes so the leader always sees new metadata
    error_code: int | None = None  # version 9+: the instance's AssignorError code (0: none)
    client_tags: Mapping[str, str] = field(default_factory=lambda: _EMPTY)  # version 11+: rack-aware standby tags

    def offset_sums(self) -> Mapping[TaskId, int]:
        """Task offset sums as Kafka's leader sees them: versions 1-6 list tasks instead, so a previous active
        reads as the running-active sentinel (-2) and a previous standby as unknown (-3)."""
        if self.version >= _OFFSET_SUMS_SINCE:
            return self.task_offset_sums
        sums = dict.fromkeys(self.previous_standby, UNKNOWN_OFFSET_SUM)
        sums.update(dict.fromkeys(self.previous_active, LATEST_OFFSET))
        return MappingProxyType(sums)


def _task_list(reader: WireReader, name: str) -> frozenset[TaskId]:
    tasks = [reader.task_id(name) for _ in range(reader.count(name, 8))]
    if len(set(tasks)) != len(tasks):
        raise reader.fail(f"{name} lists a task twice")
    return frozenset(tasks)


def _bytes(reader: WireReader, name: str) -> bytes:
    size = reader.int32(f"{name} length")
    if size < 0:
        raise reader.fail(f"{name} is null but may not be")
    return reader.take(size, name)


def _add_sum(reader: WireReader, sums: dict[TaskId, int], task: TaskId, offset_sum: int) -> None:
    if task in sums:
        raise reader.fail(f"taskOffsetSums lists task {task} twice")
    sums[task] = offset_sum  # any int64, the -2/-3 sentinels included: range checks belong to the value's user


def _offset_sums(reader: WireReader, version: int) -> Mapping[TaskId, int]:
    sums: dict[TaskId, int] = {}
    if version >= _FLAT_OFFSET_SUMS_SINCE:
        for _ in range(reader.count("taskOffsetSums", 18)):
            task = reader.task_id("taskOffsetSums")
            offset_sum = reader.int64("offsetSum")
            length = reader.int16("namedTopology length")
            name = None if length < 0 else reader.text(reader.take(length, "namedTopology"), "namedTopology")
            reader.no_named_topology(name, task, "taskOffsetSums")
            _add_sum(reader, sums, task, offset_sum)
    else:
        for _ in range(reader.count("taskOffsetSums", 8)):
            subtopology = reader.int32("topicGroupId")
            if subtopology < 0:
                raise reader.fail(f"taskOffsetSums has a negative subtopology {subtopology}")
            for _ in range(reader.count("partitionToOffsetSum", 12)):
                partition = reader.int32("partition")
                if partition < 0:
                    raise reader.fail(f"taskOffsetSums has a negative partition {partition}")
                _add_sum(reader, sums, TaskId(subtopology, partition), reader.int64("offsetSum"))
    return MappingProxyType(sums)


def _client_tags(reader: WireReader) -> Mapping[str, str]:
    tags: dict[str, str] = {}
    for _ in range(reader.count("clientTags", 8)):
        key = reader.text(_bytes(reader, "clientTag key"), "clientTag key")
        value = reader.text(_bytes(reader, "clientTag value"), "clientTag value")
        if key in tags:
            raise reader.fail(f"clientTags has key {key!r} twice")
        tags[key] = value
    return MappingProxyType(tags)


def decode_subscription(data: bytes) -> StreamsSubscription:
    """Decode a member's SubscriptionInfo user data; StreamsUserDataError (with the reason) for anything else."""
    reader = WireReader(data, "Kafka Streams subscription")
    version = reader.int32("version")
    if version < 1:
        raise reader.fail(f"version {version} is not a SubscriptionInfo version (1..{LATEST_SUBSCRIPTION_VERSION})")
    if version > LATEST_SUBSCRIPTION_VERSION:
        # Kafka reads only (version, latest supported) of a newer member, for version probing; we cannot plan
        # with that, so such a member is not read.
        raise reader.fail(f"version {version} is newer than the newest read here ({LATEST_SUBSCRIPTION_VERSION})")
    latest = reader.int32("latestSupportedVersion") if version >= 3 else UNKNOWN_VERSION
    if version >= 3 and latest < version:
        raise reader.fail(f"latest supported version {latest} is below the version used ({version})")
    process_id = str(uuid.UUID(bytes=reader.take(16, "processId")))
    previous_active = previous_standby = frozenset[TaskId]()
    if version < _OFFSET_SUMS_SINCE:
        previous_active = _task_list(reader, "prevTasks")
        previous_standby = _task_list(reader, "standbyTasks")
    endpoint = reader.text(_bytes(reader, "userEndPoint"), "userEndPoint") if version >= 2 else ""
    sums = _offset_sums(reader, version) if version >= _OFFSET_SUMS_SINCE else MappingProxyType({})
    unique_field = reader.int8("uniqueField") if version >= 8 else None
    error_code = reader.int32("errorCode") if version >= 9 else None
    tags = _client_tags(reader) if version >= 11 else _EMPTY
    return StreamsSubscription(
        version=version,
        latest_supported_version=latest,
        process_id=process_id,
        user_endpoint=endpoint or None,
        task_offset_sums=sums,
        previous_active=previous_active,
        previous_standby=previous_standby,
        unique_field=unique_field,
        error_code=error_code,
        client_tags=tags,
    )
