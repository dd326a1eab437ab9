"""Versioned subscription and assignment user data (JSON, UTF-8) with KIP-268 version probing.

Version 1 carries the KIP-441 subscription (process id, capacity, previous tasks, task offset sums,
endpoint); version 2 adds the client's rack tags. Layout: schemas/subscription.schema.json and
schemas/assignment.schema.json.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from assignor.protocol.bounded import PARTITION_RANGE, OutOfBounds, json_int, shown
from assignor.task import UNKNOWN_OFFSET_SUM, TaskId, parse_task_ids

SUPPORTED_VERSIONS = (1, 2)
LATEST_VERSION = max(SUPPORTED_VERSIONS)
# The state-report bounds of docs/formats.md: a member outside them gets an error code, not a crash.
MAX_CAPACITY = 1024
MAX_ID_CHARS = 249

Partition = tuple[str, int]  # (topic, partition)


class ErrorCode(enum.IntEnum):
    """Why a member's assignment is empty."""

    NONE = 0
    VERSION_PROBING = 1  # the leader does not understand the member's version: downgrade and rejoin
    MALFORMED_SUBSCRIPTION = 2  # the leader could not read the member's user data


class ProtocolError(ValueError):
    """User data that cannot be read; the message says what is wrong."""


class NewerVersionError(ProtocolError):
    """User data in a version this side does not understand (KIP-268 version probing)."""

    def __init__(self, version: int, latest_supported_version: int) -> None:
        super().__init__(f"user data version {version} is newer than the supported {LATEST_VERSION}")
        self.version = version
        self.latest_supported_version = latest_supported_version


def _load(data: bytes, what: str) -> dict[str, Any]:
    try:
        # Every integer within int64, its length checked before conversion (a 5,000-digit one is refused here).
        value = json.loads(data.decode("utf-8"), parse_int=json_int)
    except (UnicodeDecodeError, json.JSONDecodeError, OutOfBounds) as err:
        raise ProtocolError(f"{what} user data is not UTF-8 JSON within bounds: {err}") from None
    except RecursionError:
        raise ProtocolError(f"{what} user data is nested too deeply") from None
    if not isinstance(value, dict):
        raise ProtocolError(f"{what} user data must be a JSON object, got {type(value).__name__}")
    version, latest = value.get("version"), value.get("latest_supported_version")
    if not isinstance(version, int) or not isinstance(latest, int) or version < 1 or latest < version:
        raise ProtocolError(f"{what} user data has bad versions: version={version!r}, latest={latest!r}")
    if version > LATEST_VERSION:
        raise NewerVersionError(version, latest)
    return value


def _field(data: Mapping[str, Any], key: str, kind: type, what: str) -> Any:
    value = data.get(key)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ProtocolError(f"{what}.{key} must be {kind.__name__}, got {shown(value)}")
    return value


def _tasks(values: Any, where: str) -> frozenset[TaskId]:
    return parse_task_ids(values, where, ProtocolError)


@dataclass(frozen=True)
class Subscription:
    """What a member tells the leader when it joins (KIP-441 fields, KIP-268 versions)."""

    process_id: str
    capacity: int = 1
    previous_active: frozenset[TaskId] = frozenset()
    previous_standby: frozenset[TaskId] = frozenset()
    task_offset_sums: Mapping[TaskId, int] = field(default_factory=dict)
    endpoint: str = ""
    client_tags: Mapping[str, str] = field(default_factory=dict)  # version 2 and later
    version: int = LATEST_VERSION
    latest_supported_version: int = LATEST_VERSION
    # Bumped on every deliberate rejoin: brokers answer a JoinGroup whose metadata did not change with the
    # current generation instead of a rebalance, so a probing rebalance must change the metadata.
    rejoin_epoch: int = 0

    def encode(self) -> bytes:
        body: dict[str, Any] = {
            "version": self.version,
            "latest_supported_version": self.latest_supported_version,
            "process_id": self.process_id,
            "capacity": self.capacity,
            "previous_active": sorted(str(t) for t in self.previous_active),
            "previous_standby": sorted(str(t) for t in self.previous_standby),
            "task_offset_sums": {str(t): s for t, s in sorted(self.task_offset_sums.items())},
            "endpoint": self.endpoint,
            "rejoin_epoch": self.rejoin_epoch,
        }
        if self.version >= 2:
            body["client_tags"] = dict(sorted(self.client_tags.items()))
        return json.dumps(body, separators=(",", ":")).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes) -> Subscription:
        """Read subscription user data; NewerVersionError for versions above LATEST_VERSION."""
        body = _load(data, "subscription")
        what = "subscription"
        sums_raw = _field(body, "task_offset_sums", dict, what)
        sums: dict[TaskId, int] = {}
        for key, value in sums_raw.items():
            (task,) = _tasks([key], f"{what}.task_offset_sums")
            if not isinstance(value, int) or isinstance(value, bool) or value < UNKNOWN_OFFSET_SUM:
                raise ProtocolError(f"{what}.task_offset_sums[{key}] must be an integer >= -3, got {shown(value)}")
            sums[task] = value
        tags: dict[str, str] = {}
        if body["version"] >= 2:
            tags = _field(body, "client_tags", dict, what)
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in tags.items()):
                raise ProtocolError(f"{what}.client_tags must map strings to strings, got {shown(tags)}")
        epoch = body.get("rejoin_epoch", 0)
        if not isinstance(epoch, int) or isinstance(epoch, bool):
            raise ProtocolError(f"{what}.rejoin_epoch must be an integer, got {shown(epoch)}")
        capacity = _field(body, "capacity", int, what)
        if not 1 <= capacity <= MAX_CAPACITY:
            raise ProtocolError(f"{what}.capacity must be 1..{MAX_CAPACITY}, got {capacity}")
        process_id = _field(body, "process_id", str, what)
        if not 0 < len(process_id) <= MAX_ID_CHARS:
            raise ProtocolError(f"{what}.process_id must be 1..{MAX_ID_CHARS} characters, got {len(process_id)}")
        return cls(
            process_id=process_id,
            capacity=capacity,
            previous_active=_tasks(body.get("previous_active"), f"{what}.previous_active"),
            previous_standby=_tasks(body.get("previous_standby"), f"{what}.previous_standby"),
            task_offset_sums=sums,
            endpoint=_field(body, "endpoint", str, what),
            client_tags=tags,
            version=body["version"],
            latest_supported_version=body["latest_supported_version"],
            rejoin_epoch=epoch,
        )


def _is_partition(pair: Any) -> bool:
    if not isinstance(pair, list) or len(pair) != 2 or not isinstance(pair[0], str):
        return False
    number = pair[1]
    return (
        isinstance(number, int) and not isinstance(number, bool) and PARTITION_RANGE[0] <= number <= PARTITION_RANGE[1]
    )


def _partitions(value: Any, where: str) -> tuple[Partition, ...]:
    if not isinstance(value, list) or not all(_is_partition(p) for p in value):
        low, high = PARTITION_RANGE
        raise ProtocolError(f"{where} must be a list of [topic, partition {low}..{high}] pairs, got {shown(value)}")
    return tuple((topic, partition) for topic, partition in value)


def _task_partitions(value: Any, where: str) -> dict[TaskId, tuple[Partition, ...]]:
    if not isinstance(value, dict):
        raise ProtocolError(f"{where} must map task ids to partitions, got {shown(value)}")
    result = {}
    for key, parts in value.items():
        (task,) = _tasks([key], where)
        result[task] = _partitions(parts, f"{where}[{key}]")
    return result


@dataclass(frozen=True)
class AssignmentInfo:
    """What the leader tells each member: its tasks by role, with the partitions each role reads."""

    active_tasks: Mapping[TaskId, tuple[Partition, ...]] = field(default_factory=dict)  # input partitions
    standby_tasks: Mapping[TaskId, tuple[Partition, ...]] = field(default_factory=dict)  # changelogs
    warmup_tasks: Mapping[TaskId, tuple[Partition, ...]] = field(default_factory=dict)  # changelogs
    plan_id: str | None = None
    fallback_reason: str | None = None
    next_probing_rebalance_ms: int | None = None  # epoch ms; the member holding it triggers the rejoin
    error_code: ErrorCode = ErrorCode.NONE
    version: int = LATEST_VERSION
    latest_supported_version: int = LATEST_VERSION

    def encode(self) -> bytes:
        def roles(tasks: Mapping[TaskId, tuple[Partition, ...]]) -> dict[str, list[list[Any]]]:
            return {str(t): [[topic, p] for topic, p in parts] for t, parts in sorted(tasks.items())}

        body = {
            "version": self.version,
            "latest_supported_version": self.latest_supported_version,
            "active_tasks": roles(self.active_tasks),
            "standby_tasks": roles(self.standby_tasks),
            "warmup_tasks": roles(self.warmup_tasks),
            "plan_id": self.plan_id,
            "fallback_reason": self.fallback_reason,
            "next_probing_rebalance_ms": self.next_probing_rebalance_ms,
            "error_code": int(self.error_code),
        }
        return json.dumps(body, separators=(",", ":")).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes) -> AssignmentInfo:
        """Read assignment user data; NewerVersionError for versions above LATEST_VERSION."""
        body = _load(data, "assignment")
        code = body.get("error_code", 0)
        if code not in set(ErrorCode):
            raise ProtocolError(
                f"assignment.error_code must be one of {[int(c) for c in ErrorCode]}, got {shown(code)}"
            )
        probing = body.get("next_probing_rebalance_ms")
        if probing is not None and (not isinstance(probing, int) or isinstance(probing, bool)):
            raise ProtocolError(
                f"assignment.next_probing_rebalance_ms must be an integer or null, got {shown(probing)}"
            )
        for key in ("plan_id", "fallback_reason"):
            if body.get(key) is not None and not isinstance(body[key], str):
                raise ProtocolError(f"assignment.{key} must be a string or null, got {shown(body[key])}")
        return cls(
            active_tasks=_task_partitions(body.get("active_tasks", {}), "assignment.active_tasks"),
            standby_tasks=_task_partitions(body.get("standby_tasks", {}), "assignment.standby_tasks"),
            warmup_tasks=_task_partitions(body.get("warmup_tasks", {}), "assignment.warmup_tasks"),
            plan_id=body.get("plan_id"),
            fallback_reason=body.get("fallback_reason"),
            next_probing_rebalance_ms=probing,
            error_code=ErrorCode(code),
            version=body["version"],
            latest_supported_version=body["latest_supported_version"],
        )


@dataclass(frozen=True)
class VersionDecision:
    """The leader's answer to a round of subscriptions: the version the group speaks, and who must probe."""

    group_version: int
    probing_members: frozenset[str]


def negotiate_version(members: Mapping[str, tuple[int, int]], leader_latest: int = LATEST_VERSION) -> VersionDecision:
    """Pick the group's version from each member's (version used, latest supported).

    Members speaking a version newer than the leader's are sent back to probe (KIP-268). The group speaks
    the newest version every member and the leader support, so it switches up once all have upgraded.
    """
    probing = frozenset(m for m, (used, _) in members.items() if used > leader_latest)
    supported = [min(latest, leader_latest) for m, (_, latest) in members.items() if m not in probing]
    return VersionDecision(min(supported, default=leader_latest), probing)


def next_version(used: int, info: AssignmentInfo, own_latest: int = LATEST_VERSION) -> tuple[int, bool]:
    """A member's version after receiving ``info``, and whether it must rejoin at once."""
    if info.error_code is ErrorCode.VERSION_PROBING:
        return min(info.latest_supported_version, own_latest), True
    upgrade = min(info.latest_supported_version, own_latest)
    if upgrade > used:
        return upgrade, True
    return used, False
