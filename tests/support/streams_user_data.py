"""Kafka Streams user data built byte by byte for tests, field for field as SubscriptionInfoData.json and
AssignmentInfo lay them out (an independent writer, so the decoders are checked against the format, not
against themselves)."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping, Sequence

from assignor.task import TaskId


def i8(v: int) -> bytes:
    return struct.pack(">b", v)


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


def blob(b: bytes) -> bytes:
    return i32(len(b)) + b


def utf(s: str) -> bytes:
    raw = s.encode()
    return struct.pack(">H", len(raw)) + raw


def subscription_bytes(
    version: int,
    process_id: uuid.UUID,
    *,
    latest: int = 11,
    endpoint: str = "",
    offset_sums: Mapping[TaskId, int] | None = None,
    previous_active: Sequence[TaskId] = (),
    previous_standby: Sequence[TaskId] = (),
    unique_field: int = 0,
    error_code: int = 0,
    tags: Mapping[str, str] | None = None,
    named_topology: str | None = None,
) -> bytes:
    """SubscriptionInfo of ``version`` (1..11) with the fields that version carries."""
    out = i32(version)
    if version >= 3:
        out += i32(latest)
    out += process_id.bytes
    if version <= 6:
        for tasks in (previous_active, previous_standby):
            out += i32(len(tasks)) + b"".join(i32(t.subtopology) + i32(t.partition) for t in tasks)
    if version >= 2:
        out += blob(endpoint.encode())
    sums = dict(offset_sums or {})
    if version >= 10:
        out += i32(len(sums))
        for task, offset_sum in sums.items():
            name = i16(-1) if named_topology is None else i16(len(named_topology)) + named_topology.encode()
            out += i32(task.subtopology) + i32(task.partition) + i64(offset_sum) + name
    elif version >= 7:
        by_sub: dict[int, list[tuple[int, int]]] = {}
        for task, offset_sum in sums.items():
            by_sub.setdefault(task.subtopology, []).append((task.partition, offset_sum))
        out += i32(len(by_sub))
        for sub, parts in by_sub.items():
            out += i32(sub) + i32(len(parts)) + b"".join(i32(p) + i64(s) for p, s in parts)
    if version >= 8:
        out += i8(unique_field)
    if version >= 9:
        out += i32(error_code)
    if version >= 11:
        items = dict(tags or {}).items()
        out += i32(len(items)) + b"".join(blob(k.encode()) + blob(v.encode()) for k, v in items)
    return out


def _task(task: TaskId, version: int) -> bytes:
    return i32(task.subtopology) + i32(task.partition) + (i32(0) if version >= 10 else b"")


def assignment_bytes(
    version: int,
    actives: Sequence[TaskId],
    standbys: Mapping[TaskId, Sequence[tuple[str, int]]] | None = None,
    *,
    hosts: Mapping[str, Sequence[tuple[str, int]]] | None = None,
    error_code: int = 0,
    next_rebalance_ms: int = 2**63 - 1,
) -> bytes:
    """AssignmentInfo of ``version`` (1..11); ``hosts``: "host:port" -> active partitions (interactive queries)."""
    out = i32(version) + (i32(version) if version >= 3 else b"")
    out += i32(len(actives)) + b"".join(_task(t, version) for t in actives)
    standby_items = dict(standbys or {}).items()
    out += i32(len(standby_items))
    for task, parts in standby_items:
        out += _task(task, version) + i32(len(parts)) + b"".join(utf(t) + i32(p) for t, p in parts)
    host_items = dict(hosts or {}).items()
    if 2 <= version <= 4:
        out += i32(len(host_items))
        for host, parts in host_items:
            name, port = host.rsplit(":", 1)
            out += utf(name) + i32(int(port)) + i32(len(parts)) + b"".join(utf(t) + i32(p) for t, p in parts)
    elif version >= 5:
        topics = sorted({t for parts in dict(hosts or {}).values() for t, _ in parts})
        index = {t: i for i, t in enumerate(topics)}
        out += i32(len(topics)) + b"".join(i32(i) + utf(t) for t, i in index.items())
        maps = [host_items] if version == 5 else [host_items, {}.items()]
        for mapping in maps:
            out += i32(len(mapping))
            for host, parts in mapping:
                name, port = host.rsplit(":", 1)
                out += utf(name) + i32(int(port)) + i32(len(parts))
                out += b"".join(i32(index[t]) + i32(p) for t, p in parts)
    if version >= 4:
        out += i32(error_code)
    if version >= 7:
        out += i64(next_rebalance_ms)
    return out
