"""State reports: what each live instance tells the pipeline about itself (docs/formats.md).

``StateReport`` is the one reader and writer of the record: the Python runtime encodes with it, the pipeline's
intake decodes with it. The Kafka Streams plugin writes the same fields in Java (origin ``kafka-streams``, lags
instead of offset sums, canonical JSON), which this reader takes as they are.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from typing import Any

import jsonschema
import jsonschema_rs

from assignor.protocol.bounded import INT32_MAX, OutOfBounds, parse_int
from assignor.protocol.reported_settings import GroupProtocol, ReportedSettings
from assignor.protocol.restored_offsets import TaskRestore, restores_from_json, restores_to_json
from assignor.task import TaskId
from schemas import read_json

REPORT_SCHEMA_VERSION = 1
# Bounds of docs/formats.md beyond the JSON Schema: a value outside them would not fit its Delta
# column (or the decoder's stack) and fail a whole extract, so its record is rejected instead.
MAX_RECORD_BYTES = 1 << 20
MAX_NESTING = 32
MAX_ID_CHARS = 249
MAX_CAPACITY = 1024
_INT = 2**31 - 1
_BIGINT = 2**63 - 1
_INTEGER_BOUNDS = {
    "schema_version": (-_INT - 1, _INT),
    "capacity": (1, MAX_CAPACITY),
    "protocol_version": (-_INT - 1, _INT),
    "generation": (-_BIGINT - 1, _BIGINT),
    "reported_at": (0, _BIGINT),
}


class RejectReason(StrEnum):
    """Why a record is not a usable report; the quarantine's reason codes."""

    MALFORMED_JSON = "malformed_json"
    SCHEMA_VIOLATION = "schema_violation"
    OFFSET_SUM_BELOW_SENTINEL = "offset_sum_below_-3"
    CONFLICTING_REPORT = "conflicting_report"


class ReportRejected(ValueError):
    """A record that is not a usable state report; ``str()`` is ``"<code>: <detail>"``."""

    def __init__(self, code: RejectReason, detail: str, group_id: str | None = None) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail
        self.group_id = group_id  # when the record decodes far enough to name its group


class ReportOrigin(StrEnum):
    """Who wrote a report."""

    PYTHON_RUNTIME = "python-runtime"
    KAFKA_STREAMS = "kafka-streams"  # the plugin on the group leader, for every member
    GROUP_METADATA = "group-metadata"  # extract, from the broker's metadata of a group that reports nothing
    BROKER_STREAMS = "broker-streams"  # extract, from the broker's description of a streams-protocol group


# Origins whose ``generation`` is the group's (classic protocol, the instance's own report): a streams-protocol
# member epoch is each member's own count, and group metadata is the broker's copy.
GROUP_GENERATION_ORIGINS = frozenset({ReportOrigin.PYTHON_RUNTIME, ReportOrigin.KAFKA_STREAMS})


@dataclass(frozen=True)
class SubtopologyReport:
    """One subtopology as a report describes it."""

    source_topics: tuple[str, ...]
    changelog_topics: tuple[str, ...]
    stateful: bool


@dataclass(frozen=True)
class StateReport:
    """One instance's state: its tasks by role, its offset sums (or lags), its topology, the plan it honors."""

    group_id: str
    process_id: str
    member_id: str
    client_id: str
    host: str
    capacity: int
    client_tags: Mapping[str, str]
    protocol_version: int
    generation: int
    reported_at: int  # epoch ms
    active_tasks: tuple[TaskId, ...]
    standby_tasks: tuple[TaskId, ...]
    warmup_tasks: tuple[TaskId, ...]
    task_offset_sums: Mapping[TaskId, int]  # -2 running active, -3 unknown
    topology: Mapping[int, SubtopologyReport]
    plan_id: str | None
    fallback_reason: str | None
    origin: ReportOrigin | None = None
    task_lags: Mapping[TaskId, int] | None = None  # the plugin's leader-computed lags
    task_offset_sums_error: str | None = None  # the plugin's reason for sending no offset sums
    protocol: GroupProtocol | None = None  # None: a report from before the field existed
    settings: ReportedSettings | None = None  # the application's effective KIP-441 settings; None: unknown
    restored_offsets: Mapping[TaskId, TaskRestore] | None = None  # each task's latest restore; None: not reported
    schema_version: int = REPORT_SCHEMA_VERSION
    extra: Mapping[str, Any] = field(default_factory=dict)  # fields this version does not know, kept as read

    @property
    def key(self) -> str:
        """The record's key on the compacted reports topic."""
        return f"{self.group_id}/{self.process_id}"

    def named_tasks(self) -> set[TaskId]:
        """Every task the report mentions, in any role or with any offset sum or lag."""
        named = set(self.active_tasks) | set(self.standby_tasks) | set(self.warmup_tasks)
        return named | set(self.task_offset_sums) | set(self.task_lags or {})

    def topology_json(self) -> dict[str, dict[str, Any]]:
        return {
            str(sub_id): {
                "source_topics": list(sub.source_topics),
                "changelog_topics": list(sub.changelog_topics),
                "stateful": sub.stateful,
            }
            for sub_id, sub in self.topology.items()
        }

    def to_json(self) -> dict[str, Any]:
        """The record as a JSON object (schemas/state_report.schema.json); optional fields only when set."""
        body: dict[str, Any] = {
            **self.extra,
            "schema_version": self.schema_version,
            "group_id": self.group_id,
            "process_id": self.process_id,
            "member_id": self.member_id,
            "client_id": self.client_id,
            "host": self.host,
            "capacity": self.capacity,
            "client_tags": dict(self.client_tags),
            "protocol_version": self.protocol_version,
            "generation": self.generation,
            "reported_at": self.reported_at,
            "active_tasks": [str(t) for t in self.active_tasks],
            "standby_tasks": [str(t) for t in self.standby_tasks],
            "warmup_tasks": [str(t) for t in self.warmup_tasks],
            "task_offset_sums": {str(t): s for t, s in self.task_offset_sums.items()},
            "topology": self.topology_json(),
            "plan_id": self.plan_id,
            "fallback_reason": self.fallback_reason,
        }
        if self.origin is not None:
            body["origin"] = str(self.origin)
        if self.task_lags is not None:
            body["task_lags"] = {str(t): lag for t, lag in self.task_lags.items()}
        if self.task_offset_sums_error is not None:
            body["task_offset_sums_error"] = self.task_offset_sums_error
        if self.protocol is not None:
            body["protocol"] = str(self.protocol)
        if self.settings is not None:
            body["settings"] = self.settings.to_json()
        if self.restored_offsets is not None:
            body["restored_offsets"] = restores_to_json(self.restored_offsets)
        return body

    def encode(self) -> bytes:
        """The record's value on the reports topic."""
        return json.dumps(self.to_json(), sort_keys=True).encode("utf-8")

    @classmethod
    def from_json(cls, fields: Mapping[str, Any]) -> StateReport:
        """The typed report of a JSON object that passed ``check_report`` (or was written by ``to_json``)."""
        known = set(cls.__dataclass_fields__) - {"extra"}
        lags = fields.get("task_lags")
        origin = fields.get("origin")
        return cls(
            group_id=fields["group_id"],
            process_id=fields["process_id"],
            member_id=fields["member_id"],
            client_id=fields["client_id"],
            host=fields["host"],
            capacity=fields["capacity"],
            client_tags=dict(fields["client_tags"]),
            protocol_version=fields["protocol_version"],
            generation=fields["generation"],
            reported_at=fields["reported_at"],
            active_tasks=tuple(TaskId.parse(t) for t in fields["active_tasks"]),
            standby_tasks=tuple(TaskId.parse(t) for t in fields["standby_tasks"]),
            warmup_tasks=tuple(TaskId.parse(t) for t in fields["warmup_tasks"]),
            task_offset_sums={TaskId.parse(t): s for t, s in fields["task_offset_sums"].items()},
            topology={
                int(sub_id): SubtopologyReport(
                    tuple(sub["source_topics"]), tuple(sub["changelog_topics"]), bool(sub["stateful"])
                )
                for sub_id, sub in fields["topology"].items()
            },
            plan_id=fields["plan_id"],
            fallback_reason=fields["fallback_reason"],
            origin=None if origin is None else ReportOrigin(origin),
            task_lags=None if lags is None else {TaskId.parse(t): lag for t, lag in lags.items()},
            task_offset_sums_error=fields.get("task_offset_sums_error"),
            protocol=None if fields.get("protocol") is None else GroupProtocol(fields["protocol"]),
            settings=None if fields.get("settings") is None else ReportedSettings.from_json(fields["settings"]),
            restored_offsets=None
            if "restored_offsets" not in fields
            else restores_from_json(fields["restored_offsets"]),
            schema_version=fields["schema_version"],
            extra={k: v for k, v in fields.items() if k not in known},
        )

    @classmethod
    def decode(cls, key: str, value: bytes) -> StateReport:
        """The report a record holds; ``ReportRejected`` naming the first rule it breaks."""
        return cls.from_json(check_report(key, value))


def check_report(key: str, value: bytes) -> dict[str, Any]:
    """The decoded JSON object of a record that keeps every rule of the contract, checked in a fixed order (size,
    syntax, depth, sentinels, schema, bounds, key, roles); ``ReportRejected`` naming the first rule it breaks."""
    if len(value) > MAX_RECORD_BYTES:
        raise ReportRejected(
            RejectReason.SCHEMA_VIOLATION, f"a record of {len(value)} bytes, more than {MAX_RECORD_BYTES}"
        )
    try:
        fields = json.loads(value.decode("utf-8"))
    except ValueError as err:  # bad UTF-8, bad JSON, or an integer past Python's digit limit
        raise ReportRejected(RejectReason.MALFORMED_JSON, str(err)) from None
    except RecursionError:  # nested deeper than the decoder's stack allows
        raise ReportRejected(RejectReason.SCHEMA_VIOLATION, f"nested deeper than {MAX_NESTING} levels") from None
    if not isinstance(fields, dict):
        raise ReportRejected(RejectReason.MALFORMED_JSON, "not a JSON object")
    group = fields.get("group_id") if isinstance(fields.get("group_id"), str) else None
    if _depth(fields) > MAX_NESTING:
        raise ReportRejected(RejectReason.SCHEMA_VIOLATION, f"nested deeper than {MAX_NESTING} levels", group)
    sums = fields.get("task_offset_sums")
    if isinstance(sums, dict):
        below = sorted(t for t, s in sums.items() if isinstance(s, int) and not isinstance(s, bool) and s < -3)
        if below:
            detail = ", ".join(f"{t}={sums[t]}" for t in below[:5])
            raise ReportRejected(RejectReason.OFFSET_SUM_BELOW_SENTINEL, _brief(detail), group)
    violation = schema_violation(fields)
    if violation is not None:
        raise ReportRejected(RejectReason.SCHEMA_VIOLATION, violation, group)
    beyond = _out_of_bounds(fields)
    if beyond is not None:
        raise ReportRejected(RejectReason.SCHEMA_VIOLATION, beyond, group)
    expected_key = f"{fields['group_id']}/{fields['process_id']}"
    if key != expected_key:
        detail = f"key {key!r} but the report is from {expected_key!r}"
        raise ReportRejected(RejectReason.CONFLICTING_REPORT, _brief(detail), group)
    roles = [set(fields["active_tasks"]), set(fields["standby_tasks"]), set(fields["warmup_tasks"])]
    twice = sorted((roles[0] & roles[1]) | (roles[0] & roles[2]) | (roles[1] & roles[2]))
    if twice:
        detail = f"task(s) {', '.join(twice[:5])} held in two roles by one process"
        raise ReportRejected(RejectReason.CONFLICTING_REPORT, detail, group)
    return fields


@cache
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(read_json("state_report.schema.json"))


@cache
def _fast_validator() -> jsonschema_rs.Draft202012Validator:
    return jsonschema_rs.Draft202012Validator(read_json("state_report.schema.json"))


def schema_violation(fields: Mapping[str, Any]) -> str | None:
    """Where and how the record breaks the JSON Schema, or None. The compiled (Rust) validator decides first
    (~0.05 ms a report where ``jsonschema`` takes ~1.5: a minute and a half per 60,000 reports); a record it
    refuses, or cannot take (an integer past 64 bits), gets ``jsonschema``'s best message. Where only the compiled
    one refuses, its verdict stands: its ``pattern`` is ECMA-262's, as JSON Schema specifies, where Python's ``$``
    also matches before a final newline."""
    fast = _fast_validator()
    try:
        if fast.is_valid(fields):
            return None
        refused = next(iter(fast.iter_errors(fields)), None)
    except Exception:  # it cannot represent the value: only jsonschema can judge it
        refused = None
    error = jsonschema.exceptions.best_match(_validator().iter_errors(fields))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        return _brief(f"at {where}: {error.message}")
    if refused is not None:
        where = "/".join(str(p) for p in refused.instance_path) or "(top level)"
        return _brief(f"at {where}: {refused.message}")
    return None


def _brief(message: str, limit: int = 400) -> str:
    """A validator's message cut in its middle when it quotes a long value: its start says where, its end what
    was expected."""
    if len(message) <= limit:
        return message
    return f"{message[: limit // 2]}... ({len(message)} characters) ...{message[-limit // 4 :]}"


def _depth(value: Any) -> int:
    """Levels of nesting of a decoded JSON value (a scalar is 0, ``{}`` is 1), without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is not None:
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in children)
    return deepest


def _out_of_bounds(fields: Mapping[str, Any]) -> str | None:
    """Why a schema-valid report is still outside the contract's bounds, or None."""
    for name, (low, high) in _INTEGER_BOUNDS.items():
        if not low <= fields[name] <= high:
            return f"at {name}: {fields[name]} is outside {low}..{high}"
    for name in ("task_offset_sums", "task_lags"):
        values = fields.get(name) or {}
        too_big = sorted(t for t, v in values.items() if v > _BIGINT)
        if too_big:
            return f"at {name}/{too_big[0]}: {values[too_big[0]]} is beyond a 64-bit offset"
    restored = fields.get("restored_offsets") or {}
    for task, restore in restored.items():
        if restore["offsets"] > _BIGINT:  # the schema says so too, but its compiled validator cannot hold the value
            return f"at restored_offsets/{task}/offsets: {restore['offsets']} is beyond a 64-bit offset"
    for name in ("group_id", "process_id"):
        if len(fields[name]) > MAX_ID_CHARS:
            return f"at {name}: {len(fields[name])} characters, more than {MAX_ID_CHARS}"
    return _keys_out_of_bounds(fields)


def _keys_out_of_bounds(fields: Mapping[str, Any]) -> str | None:
    """Why a subtopology or task id (as a key or in a task list) is beyond Kafka's int32 parts, or None: the
    schema's patterns take any number of digits, and one such key once failed the extract of every group."""
    try:
        for sub_id in fields["topology"]:
            parse_int(sub_id, 0, INT32_MAX, "topology key")
    except OutOfBounds as err:
        return f"at topology: {err}"
    for name in ("active_tasks", "standby_tasks", "warmup_tasks", "task_offset_sums", "task_lags", "restored_offsets"):
        try:
            for task in fields.get(name) or ():
                TaskId.parse(task)
        except ValueError as err:
            return f"at {name}: {err}"
    return None
