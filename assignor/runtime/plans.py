"""Approved plans as signed records (HMAC-SHA256 over canonical JSON) and the leader's checks before use."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from assignor.assignment import ClientAssignment, GroupAssignment
from assignor.configs import AssignmentConfigs
from assignor.state import GroupState
from assignor.task import TaskId, parse_task_ids

PLAN_SCHEMA_VERSION = 1
_CONFIG_FIELDS = (
    "acceptable_recovery_lag",
    "max_warmup_replicas",
    "num_standby_replicas",
    "probing_rebalance_interval_ms",
)
_REQUIRED = {
    "schema_version": int,
    "plan_id": str,
    "group_id": str,
    "snapshot_id": str,
    "created_at": int,
    "valid_until": int,
    "approved_by": str,
    "approved_at": int,
    "configs": dict,
    "target": dict,
    "move_order": list,
    "signature": str,
}


class PlanRejected(ValueError):
    """A plan record that must not be applied; the message is the reason reported by the group."""


def canonical_json(fields: Mapping[str, Any]) -> bytes:
    """The bytes a plan signature covers: sorted keys, no spaces, UTF-8 (shared/contracts/pipeline.md)."""
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def sign(fields: Mapping[str, Any], key: bytes) -> str:
    """Hex HMAC-SHA256 of every field but the signature."""
    unsigned = {k: v for k, v in fields.items() if k != "signature"}
    return hmac.new(key, canonical_json(unsigned), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class ApprovedPlan:
    """A verified plan record."""

    plan_id: str
    group_id: str
    snapshot_id: str
    created_at: int
    valid_until: int
    approved_by: str
    approved_at: int
    configs: AssignmentConfigs
    target: GroupAssignment
    move_order: tuple[TaskId, ...]

    def to_record(self, key: bytes) -> dict[str, Any]:
        """The signed JSON object published to the plans topic."""
        fields: dict[str, Any] = {
            "schema_version": PLAN_SCHEMA_VERSION,
            "plan_id": self.plan_id,
            "group_id": self.group_id,
            "snapshot_id": self.snapshot_id,
            "created_at": self.created_at,
            "valid_until": self.valid_until,
            "approved_by": self.approved_by,
            "approved_at": self.approved_at,
            "configs": {name: getattr(self.configs, name) for name in _CONFIG_FIELDS},
            "target": {
                pid: {"active": sorted(map(str, ca.active)), "standby": sorted(map(str, ca.standby))}
                for pid, ca in self.target.clients.items()
            },
            "move_order": [str(t) for t in self.move_order],
        }
        fields["signature"] = sign(fields, key)
        return fields


def _tasks(values: Any, where: str) -> frozenset[TaskId]:
    return parse_task_ids(values, f"malformed plan: {where}", PlanRejected)


def _ordered_tasks(values: list[Any]) -> tuple[TaskId, ...]:
    _tasks(values, "move_order")  # validates every entry
    return tuple(dict.fromkeys(TaskId.parse(v) for v in values))


def parse_plan(value: bytes, key: bytes) -> ApprovedPlan:
    """Verify and read a plan record; PlanRejected says why it cannot be used."""
    try:
        record = json.loads(value.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise PlanRejected(f"malformed plan: not UTF-8 JSON ({err})") from None
    if not isinstance(record, dict):
        raise PlanRejected("malformed plan: not a JSON object")
    for name, kind in _REQUIRED.items():
        if not isinstance(record.get(name), kind) or isinstance(record.get(name), bool):
            raise PlanRejected(f"malformed plan: {name} must be {kind.__name__}")
    if record["schema_version"] != PLAN_SCHEMA_VERSION:
        raise PlanRejected(f"unsupported plan schema_version {record['schema_version']}")
    if not hmac.compare_digest(record["signature"], sign(record, key)):
        raise PlanRejected("bad signature")
    try:
        configs = AssignmentConfigs(**{name: record["configs"][name] for name in _CONFIG_FIELDS})
    except (KeyError, TypeError, ValueError) as err:
        raise PlanRejected(f"malformed plan: configs: {err}") from None
    clients = {}
    for pid, roles in record["target"].items():
        if not isinstance(roles, dict):
            raise PlanRejected(f"malformed plan: target[{pid}] must be an object")
        clients[pid] = ClientAssignment(
            active=_tasks(roles.get("active"), f"target[{pid}].active"),
            standby=_tasks(roles.get("standby", []), f"target[{pid}].standby"),
        )
    return ApprovedPlan(
        plan_id=record["plan_id"],
        group_id=record["group_id"],
        snapshot_id=record["snapshot_id"],
        created_at=record["created_at"],
        valid_until=record["valid_until"],
        approved_by=record["approved_by"],
        approved_at=record["approved_at"],
        configs=configs,
        target=GroupAssignment(clients),
        move_order=_ordered_tasks(record["move_order"]),
    )


def unfit_reason(plan: ApprovedPlan, group_id: str, group: GroupState, now_ms: int) -> str | None:
    """Why the plan must not be applied to this live group now, or None when it fits."""
    if plan.group_id != group_id:
        return f"plan {plan.plan_id} is for group {plan.group_id!r}, not {group_id!r}"
    if now_ms > plan.valid_until:
        return f"plan {plan.plan_id} expired at {plan.valid_until} (now {now_ms})"
    live = {c.process_id for c in group.clients}
    planned = set(plan.target.clients)
    if planned - live:
        return f"plan {plan.plan_id} names departed instances: {', '.join(sorted(planned - live))}"
    if live - planned:
        return f"plan {plan.plan_id} does not know instances: {', '.join(sorted(live - planned))}"
    planned_tasks = {t for ca in plan.target.clients.values() for t in ca.active}
    if planned_tasks != group.all_tasks:
        missing, extra = group.all_tasks - planned_tasks, planned_tasks - group.all_tasks
        return (
            f"plan {plan.plan_id} does not match the group's tasks "
            f"(unplanned: {_show(missing)}; unknown: {_show(extra)})"
        )
    return None


def _show(tasks: Sequence[TaskId] | frozenset[TaskId] | set[TaskId]) -> str:
    return ", ".join(str(t) for t in sorted(tasks)[:5]) or "none"
