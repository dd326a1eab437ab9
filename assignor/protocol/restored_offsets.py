"""Restored offsets: what an instance's state restoration replayed, per task (docs/formats.md).

Two records carry it. The Python runtime writes it into its own state report (field ``restored_offsets``). A Kafka
Streams member cannot: the plugin's reports are written by the group leader, which never sees another member's
restoration, so the plugin's restore listener publishes a small **restored-offsets report** of its own on the
reports topic, key ``<group_id>/<process_id>/restored``. Both hold, per task, the member's latest restore of that
task: ``{"offsets": records replayed, "started_at": epoch ms it began}``. observe sums the restores that began
after a plan was published (jobs/pipeline/restored.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from assignor.protocol.bounded import INT64_MAX, OutOfBounds, check_int, shown
from assignor.protocol.strict_json import MalformedJson, canonical_json, strict_loads
from assignor.task import TaskId

RESTORED_SCHEMA_VERSION: Final = 1
RESTORED_KEY_SUFFIX: Final = "/restored"
MAX_RESTORED_BYTES: Final = 1 << 20
MAX_RESTORED_TASKS: Final = 100_000  # a member holds far fewer; bounds a hostile record's memory
MAX_EPOCH_MS: Final = 253_402_300_799_999  # 9999-12-31, as next_rebalance_at
MAX_ID_CHARS: Final = 249
_FIELDS: Final = frozenset({"schema_version", "group_id", "process_id", "reported_at", "restored_offsets"})


class RestoredRejected(ValueError):
    """A record that is not a usable restored-offsets report; the message names the field and what was expected."""


@dataclass(frozen=True)
class TaskRestore:
    """One task's latest restore on one instance: records replayed from its changelogs, and when it began."""

    offsets: int  # 0..2^63-1
    started_at: int  # epoch ms

    def to_json(self) -> dict[str, int]:
        return {"offsets": self.offsets, "started_at": self.started_at}


def restores_from_json(value: object, what: str = "restored_offsets") -> dict[TaskId, TaskRestore]:
    """The per-task restores of a decoded JSON object; OutOfBounds naming the first task or number that is wrong."""
    if not isinstance(value, dict):
        raise OutOfBounds(f"{what} must be an object of task id -> restore, got {shown(value)}")
    if len(value) > MAX_RESTORED_TASKS:
        raise OutOfBounds(f"{what} names {len(value)} tasks, more than {MAX_RESTORED_TASKS}")
    out: dict[TaskId, TaskRestore] = {}
    for task_text, restore in value.items():
        try:
            task = TaskId.parse(task_text)
        except ValueError as err:
            raise OutOfBounds(f"{what}: {err}") from None
        where = f"{what}/{task_text}"
        if not isinstance(restore, dict) or set(restore) != {"offsets", "started_at"}:
            raise OutOfBounds(f"{where} must be {{offsets, started_at}}, got {shown(restore)}")
        out[task] = TaskRestore(
            check_int(restore["offsets"], 0, INT64_MAX, f"{where}/offsets"),
            check_int(restore["started_at"], 0, MAX_EPOCH_MS, f"{where}/started_at"),
        )
    return out


def restores_to_json(restores: Mapping[TaskId, TaskRestore]) -> dict[str, dict[str, int]]:
    return {str(t): r.to_json() for t, r in sorted(restores.items())}


def restored_key(group_id: str, process_id: str) -> str:
    """The reports-topic key of an instance's restored-offsets report."""
    return f"{group_id}/{process_id}{RESTORED_KEY_SUFFIX}"


def is_restored_key(key: str) -> bool:
    """Whether a reports-topic key is a restored-offsets report's (a state report's key has no such suffix)."""
    return key.endswith(RESTORED_KEY_SUFFIX)


@dataclass(frozen=True)
class RestoredOffsetsReport:
    """What one Kafka Streams instance restored, published by the plugin's restore listener on that instance."""

    group_id: str
    process_id: str
    reported_at: int  # epoch ms
    restores: Mapping[TaskId, TaskRestore]
    schema_version: int = RESTORED_SCHEMA_VERSION

    @property
    def key(self) -> str:
        return restored_key(self.group_id, self.process_id)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version,
            "group_id": self.group_id,
            "process_id": self.process_id,
            "reported_at": self.reported_at,
            "restored_offsets": restores_to_json(self.restores),
        }

    def encode(self) -> bytes:
        """The record's value: canonical JSON, as the plugin writes it (Java and Python agree byte for byte)."""
        return canonical_json(self.to_json())

    @classmethod
    def decode(cls, key: str, value: bytes) -> RestoredOffsetsReport:
        """The report a record holds; RestoredRejected naming the first rule it breaks. Parsing is strict and
        bounded (size, depth, int64 integers checked as text before conversion), as Java's StrictJson."""
        try:
            fields = strict_loads(value, max_bytes=MAX_RESTORED_BYTES)
        except MalformedJson as err:
            raise RestoredRejected(f"malformed: {err}") from None
        if not isinstance(fields, dict):
            raise RestoredRejected("not a JSON object")
        missing = sorted(_FIELDS - set(fields))
        if missing:
            raise RestoredRejected(f"missing field(s) {', '.join(missing)}")
        if fields["schema_version"] != RESTORED_SCHEMA_VERSION or isinstance(fields["schema_version"], bool):
            raise RestoredRejected(
                f"schema_version must be {RESTORED_SCHEMA_VERSION}, got {shown(fields['schema_version'])}"
            )
        for name in ("group_id", "process_id"):
            text = fields[name]
            if not isinstance(text, str) or not 1 <= len(text) <= MAX_ID_CHARS:
                raise RestoredRejected(f"{name} must be a string of 1..{MAX_ID_CHARS} characters, got {shown(text)}")
        try:
            reported_at = check_int(fields["reported_at"], 0, MAX_EPOCH_MS, "reported_at")
            restores = restores_from_json(fields["restored_offsets"])
        except OutOfBounds as err:
            raise RestoredRejected(str(err)) from None
        expected = restored_key(fields["group_id"], fields["process_id"])
        if key != expected:
            raise RestoredRejected(f"key {shown(key)} but the report is from {shown(expected)}")
        return cls(fields["group_id"], fields["process_id"], reported_at, restores)
