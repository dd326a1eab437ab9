"""Approved plans as Ed25519-signed records, and the checks a verifier makes before using one.

The rules and their order are fixed by schemas/vectors/README.md; the Java plugin implements the same ones."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from assignor.assignment import ClientAssignment, GroupAssignment
from assignor.configs import AssignmentConfigs
from assignor.invariants import validity_violations
from assignor.protocol.bounded import shown
from assignor.protocol.plan_keys import Signer, VerifyKeys
from assignor.protocol.strict_json import MalformedJson, canonical_json, strict_loads
from assignor.state import GroupState
from assignor.task import TaskId

PLAN_SCHEMA_VERSION = 2  # 2: signed plan_digest and sequence; a version-1 record is unsupported_version
# A sequence is a JSON integer every reader holds exactly (IEEE double, JavaScript): 1..2^53-1.
MAX_SEQUENCE = 2**53 - 1
CONFIG_FIELDS = (
    "acceptable_recovery_lag",
    "max_warmup_replicas",
    "num_standby_replicas",
    "probing_rebalance_interval_ms",
)
DEFAULT_CLOCK_SKEW_MS = 60_000
SIGNATURE = re.compile(r"^[0-9a-f]{128}$")  # an Ed25519 signature as records carry it
_DIGEST = re.compile(r"^[0-9a-f]{64}$")
_COMMON: dict[str, type] = {
    "schema_version": int,
    "plan_id": str,
    "group_id": str,
    "created_at": int,
    "sequence": int,
    "key_id": str,
    "signature": str,
}
_PLAN: dict[str, type] = {
    **_COMMON,
    "snapshot_id": str,
    "valid_until": int,
    "approved_by": str,
    "approved_at": int,
    "configs": dict,
    "target": dict,
    "move_order": list,
    "target_digest": str,
    "plan_digest": str,
}
_TIMES = ("created_at", "valid_until", "approved_at")


class Reason(StrEnum):
    """Why a plan was not honored; reports say ``"<code>: <detail>"`` (shared with the Java plugin)."""

    MALFORMED = "malformed"
    UNSUPPORTED_VERSION = "unsupported_version"
    UNKNOWN_KEY = "unknown_key"
    REVOKED_KEY = "revoked_key"
    BAD_SIGNATURE = "bad_signature"
    DIGEST_MISMATCH = "digest_mismatch"
    WRONG_GROUP = "wrong_group"
    FUTURE = "future"
    REPLAYED = "replayed"
    WITHDRAWN = "withdrawn"
    EXPIRED = "expired"
    DEPARTED_INSTANCES = "departed_instances"
    UNKNOWN_INSTANCES = "unknown_instances"
    TASKS_CHANGED = "tasks_changed"
    INVALID_TARGET = "invalid_target"
    PLANS_UNREADABLE = "plans_unreadable"
    INTERNAL_ERROR = "internal_error"


class PlanRejected(ValueError):
    """A plan record that must not be applied; ``str()`` is the reason a group reports."""

    def __init__(self, code: Reason, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


def target_json(target: GroupAssignment) -> dict[str, dict[str, list[str]]]:
    """The target as the record carries it: process id -> sorted active and standby task ids."""
    return {
        pid: {"active": sorted(map(str, ca.active)), "standby": sorted(map(str, ca.standby))}
        for pid, ca in sorted(target.clients.items())
    }


def target_digest(target: Mapping[str, Any] | GroupAssignment) -> str:
    """SHA-256 of the canonical JSON of a target: what approval binds and publish re-checks."""
    body = target_json(target) if isinstance(target, GroupAssignment) else target
    return hashlib.sha256(canonical_json(body)).hexdigest()


def _signed(fields: dict[str, Any], signer: Signer) -> dict[str, Any]:
    fields = {**fields, "key_id": signer.key_id}
    fields["signature"] = signer.sign(canonical_json(fields))
    return fields


@dataclass(frozen=True)
class ApprovedPlan:
    """A plan's content: what was approved for one group, without its signature."""

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
    sequence: int | None = None  # assigned at publish, not approved (outside body()); set on a verified record

    @property
    def target_digest(self) -> str:
        return target_digest(self.target)

    def body(self) -> dict[str, Any]:
        """What a person approves: every field of the plan except who approved it, when, and the signature."""
        return {
            "plan_id": self.plan_id,
            "group_id": self.group_id,
            "snapshot_id": self.snapshot_id,
            "created_at": self.created_at,
            "valid_until": self.valid_until,
            "configs": {name: getattr(self.configs, name) for name in CONFIG_FIELDS},
            "target": target_json(self.target),
            "move_order": [str(t) for t in self.move_order],
        }

    @property
    def plan_digest(self) -> str:
        """SHA-256 of the canonical JSON of body(): what approval binds and publish re-checks before signing."""
        return hashlib.sha256(canonical_json(self.body())).hexdigest()

    def to_record(self, signer: Signer, sequence: int | None = None) -> dict[str, Any]:
        """The signed JSON object published to the plans topic. ``sequence``: the one publish assigned
        (jobs/pipeline/plan_sequence.py); None takes ``created_at`` (tests and fixtures that publish by hand)."""
        body = {k: v for k, v in self.body().items() if k not in ("configs", "target", "move_order")}
        return _signed(
            {
                "schema_version": PLAN_SCHEMA_VERSION,
                **body,  # the committed vectors keep this field order (signatures cover the sorted form)
                "approved_by": self.approved_by,
                "approved_at": self.approved_at,
                "configs": {name: getattr(self.configs, name) for name in CONFIG_FIELDS},
                "target": target_json(self.target),
                "move_order": [str(t) for t in self.move_order],
                "target_digest": self.target_digest,
                "plan_digest": self.plan_digest,
                "sequence": _sequence(self.created_at if sequence is None else sequence),
            },
            signer,
        )


@dataclass(frozen=True)
class Withdrawal:
    """A signed record that takes a group's plan back: the group returns to Kafka's own assignment."""

    plan_id: str
    group_id: str
    created_at: int
    sequence: int | None = None  # assigned at publish like a plan's; None takes created_at (tests)

    def to_record(self, signer: Signer) -> dict[str, Any]:
        return _signed(
            {
                "schema_version": PLAN_SCHEMA_VERSION,
                "plan_id": self.plan_id,
                "group_id": self.group_id,
                "created_at": self.created_at,
                "sequence": _sequence(self.created_at if self.sequence is None else self.sequence),
                "withdrawn": True,
            },
            signer,
        )


SignedRecord = ApprovedPlan | Withdrawal


def _sequence(value: int) -> int:
    if not 1 <= value <= MAX_SEQUENCE:
        raise ValueError(f"sequence {value} is outside 1..{MAX_SEQUENCE}")
    return value


def record_sequence(record: SignedRecord) -> int:
    """The sequence of a record read by read_record (always set there)."""
    if record.sequence is None:
        raise ValueError(f"plan {record.plan_id} was not read from a record: it has no sequence")
    return record.sequence


def _malformed(detail: str) -> PlanRejected:
    return PlanRejected(Reason.MALFORMED, detail)


def field_problem(record: Mapping[str, Any], required: Mapping[str, type]) -> str | None:
    """The first field of ``required`` that ``record`` lacks or holds as another JSON type, said plainly; or None."""
    for name, kind in required.items():
        if name not in record:
            return f"{name} is missing"
        if not isinstance(record[name], kind) or isinstance(record[name], bool):
            return f"{name} must be a JSON {_JSON_TYPE[kind]}"
    return None


def signature_verifies(record: Mapping[str, Any], keys: VerifyKeys) -> bool:
    """Whether ``signature`` (checked as SIGNATURE) is the Ed25519 signature, by the trusted key ``key_id`` names,
    of the canonical JSON of every other field."""
    unsigned = {k: v for k, v in record.items() if k != "signature"}
    return keys.verifies(record["key_id"], bytes.fromhex(record["signature"]), canonical_json(unsigned))


def _check_fields(record: dict[str, Any], required: Mapping[str, type]) -> None:
    problem = field_problem(record, required)
    if problem is not None:
        raise _malformed(problem)
    for name in ("plan_id", "group_id", "key_id", "signature"):
        if not record[name]:
            raise _malformed(f"{name} is empty")
    for name in _TIMES:
        if name in required and record[name] < 0:
            raise _malformed(f"{name} {record[name]} is before 1970")
    if not 1 <= record["sequence"] <= MAX_SEQUENCE:
        raise _malformed(f"sequence {record['sequence']} is outside 1..{MAX_SEQUENCE}")
    if "plan_digest" in required and not _DIGEST.fullmatch(record["plan_digest"]):
        raise _malformed("plan_digest must be 64 lowercase hex digits")
    if len(record["key_id"]) > 64:
        raise _malformed("key_id is longer than 64 characters")
    if not SIGNATURE.fullmatch(record["signature"]):
        raise _malformed("signature must be 128 lowercase hex digits")


_JSON_TYPE = {int: "integer", str: "string", dict: "object", list: "array"}


def _task(value: Any, where: str) -> TaskId:
    try:
        return TaskId.parse(value)  # each part 0..2^31-1, refused by its form before conversion
    except ValueError as err:
        raise _malformed(f"{where}: {err}") from None


def _tasks(values: Any, where: str) -> tuple[TaskId, ...]:
    if not isinstance(values, list):
        raise _malformed(f"{where} must be an array of task ids")
    return tuple(_task(v, where) for v in values)


def _plan(record: dict[str, Any]) -> ApprovedPlan:
    """Step 6 of the rules: a verified record's plan fields, read and checked."""
    raw_configs = record["configs"]
    try:
        values = {name: raw_configs[name] for name in CONFIG_FIELDS}
        if any(not isinstance(v, int) or isinstance(v, bool) for v in values.values()):
            raise TypeError("every setting must be an integer")
        configs = AssignmentConfigs(**values)
    except (KeyError, TypeError, ValueError) as err:
        raise _malformed(f"configs: {err}") from None
    clients = {}
    for pid, roles in record["target"].items():
        if not pid:
            raise _malformed("target names an empty process id")
        where = f"target[{shown(pid)}]"  # a process id may be as long as the record: reasons stay short
        if not isinstance(roles, dict) or not isinstance(roles.get("active"), list):
            raise _malformed(f"{where} must be {{active: [...], standby: [...]}}")
        if not isinstance(roles.get("standby"), list):
            raise _malformed(f"{where} must be {{active: [...], standby: [...]}}")
        clients[pid] = ClientAssignment(
            active=frozenset(_tasks(roles["active"], f"{where}.active")),
            standby=frozenset(_tasks(roles["standby"], f"{where}.standby")),
        )
    order = tuple(dict.fromkeys(_tasks(record["move_order"], "move_order")))
    if target_digest(record["target"]) != record["target_digest"]:
        raise PlanRejected(Reason.DIGEST_MISMATCH, "target_digest does not match the target")
    plan = ApprovedPlan(
        plan_id=record["plan_id"],
        group_id=record["group_id"],
        snapshot_id=record["snapshot_id"],
        created_at=record["created_at"],
        valid_until=record["valid_until"],
        approved_by=record["approved_by"],
        approved_at=record["approved_at"],
        configs=configs,
        target=GroupAssignment(clients),
        move_order=order,
        sequence=record["sequence"],
    )
    if body_digest(record) != record["plan_digest"]:
        raise PlanRejected(Reason.DIGEST_MISMATCH, "plan_digest does not match the plan's body")
    return plan


def body_digest(record: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of a record's body fields exactly as it carries them: equal to plan_digest
    for a record to_record wrote (it writes body() unchanged), recomputed by every verifier."""
    body = {name: record[name] for name in BODY_FIELDS}
    return hashlib.sha256(canonical_json(body)).hexdigest()


BODY_FIELDS = ("plan_id", "group_id", "snapshot_id", "created_at", "valid_until", "configs", "target", "move_order")


def read_record(value: bytes, keys: VerifyKeys, revoked: frozenset[str] = frozenset()) -> SignedRecord:
    """Steps 1-6: parse, check the signature with the key the record names (not a revoked one), read the plan or
    withdrawal."""
    try:
        record = strict_loads(value)
    except MalformedJson as err:
        raise _malformed(str(err)) from None
    if not isinstance(record, dict):
        raise _malformed("not a JSON object")
    withdrawn = record.get("withdrawn", False)
    if not isinstance(withdrawn, bool):
        raise _malformed("withdrawn must be a JSON boolean")
    version = record.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise _malformed("schema_version must be a JSON integer")
    if version != PLAN_SCHEMA_VERSION:  # before the fields: an older record lacks fields this version requires
        raise PlanRejected(Reason.UNSUPPORTED_VERSION, f"schema_version {version} (supported: {PLAN_SCHEMA_VERSION})")
    _check_fields(record, _COMMON if withdrawn else _PLAN)
    key_id = record["key_id"]
    if key_id not in keys.keys:
        raise PlanRejected(Reason.UNKNOWN_KEY, f"key_id {key_id!r} is not among the verify keys")
    if key_id in revoked:
        raise PlanRejected(Reason.REVOKED_KEY, f"key_id {key_id!r} was revoked by a signed key revocation")
    if not signature_verifies(record, keys):
        raise PlanRejected(Reason.BAD_SIGNATURE, f"signature does not verify with key {key_id!r}")
    if withdrawn:
        return Withdrawal(record["plan_id"], record["group_id"], record["created_at"], record["sequence"])
    return _plan(record)


@dataclass(frozen=True)
class Verifier:
    """What a group's leader checks a plan against: its keys, its clock and the highest sequence it knows."""

    keys: VerifyKeys
    clock_skew_ms: int = DEFAULT_CLOCK_SKEW_MS
    revoked: frozenset[str] = frozenset()  # key ids a verified key revocation took back (protocol.key_revocation)

    def revoking(self, key_ids: frozenset[str]) -> Verifier:
        """This verifier refusing ``key_ids`` too (revocations are never undone)."""
        return self if key_ids <= self.revoked else replace(self, revoked=self.revoked | key_ids)

    def check(self, value: bytes, group_id: str, now_ms: int, highest_sequence: int | None = None) -> SignedRecord:
        """Steps 1-9: a verified plan or withdrawal of this group, not from the future, not older than
        ``highest_sequence`` (the highest verified sequence the leader knows for the group; None = none)."""
        record = read_record(value, self.keys, self.revoked)
        if record.group_id != group_id:
            raise PlanRejected(Reason.WRONG_GROUP, f"plan {record.plan_id} is for group {record.group_id!r}")
        if record.created_at > now_ms + self.clock_skew_ms:
            raise PlanRejected(
                Reason.FUTURE, f"plan {record.plan_id} is dated {record.created_at}, after now ({now_ms}) + skew"
            )
        sequence = record_sequence(record)
        if highest_sequence is not None and sequence < highest_sequence:
            raise PlanRejected(
                Reason.REPLAYED,
                f"plan {record.plan_id} has sequence {sequence}, lower than {highest_sequence} already seen",
            )
        return record

    def verify(self, value: bytes, group_id: str, now_ms: int, highest_sequence: int | None = None) -> ApprovedPlan:
        """Steps 1-11: a plan to honor; PlanRejected otherwise (code ``withdrawn`` for a verified withdrawal)."""
        return usable(self.check(value, group_id, now_ms, highest_sequence), now_ms)


def usable(record: SignedRecord, now_ms: int) -> ApprovedPlan:
    """Steps 10-11 on a checked record: its plan, unless it is a withdrawal or has expired."""
    if isinstance(record, Withdrawal):
        raise PlanRejected(Reason.WITHDRAWN, f"plan {record.plan_id} was withdrawn")
    if now_ms > record.valid_until:
        raise PlanRejected(Reason.EXPIRED, f"plan {record.plan_id} expired at {record.valid_until} (now {now_ms})")
    return record


def target_for(target: GroupAssignment, group: GroupState) -> GroupAssignment:
    """The target without the instances it gives nothing that are no longer members: a drained instance that was
    stopped. Its leaving changes nothing the target asks of the others, so the plan still fits them; without this
    the group would fall back to KIP-441, which may reshuffle (and restore) what the drain had just settled."""
    live = {c.process_id for c in group.clients}
    return GroupAssignment(
        {pid: ca for pid, ca in target.clients.items() if pid in live or ca.active or ca.standby},
        target.probing_rebalance_needed,
    )


def fit_rejection(plan: ApprovedPlan, group: GroupState) -> PlanRejected | None:
    """Why a verified plan's target does not fit exactly this live group, or None when it does. An instance the
    target gives nothing may have left (see target_for)."""
    live = {c.process_id for c in group.clients}
    target = target_for(plan.target, group)
    planned = set(target.clients)
    if planned - live:
        return PlanRejected(Reason.DEPARTED_INSTANCES, f"plan {plan.plan_id} names {_show(planned - live)}")
    if live - planned:
        return PlanRejected(Reason.UNKNOWN_INSTANCES, f"plan {plan.plan_id} does not know {_show(live - planned)}")
    planned_tasks = {t for ca in target.clients.values() for t in ca.active}
    if planned_tasks != group.all_tasks:
        missing, extra = group.all_tasks - planned_tasks, planned_tasks - group.all_tasks
        return PlanRejected(
            Reason.TASKS_CHANGED,
            f"plan {plan.plan_id} does not match the group's tasks (unplanned: {_show(missing)}; "
            f"unknown: {_show(extra)})",
        )
    problems = validity_violations(target, group, plan.configs)
    if problems:
        return PlanRejected(Reason.INVALID_TARGET, f"plan {plan.plan_id}: {problems[0]}")
    return None


def _show(items: set[str] | frozenset[TaskId] | set[TaskId]) -> str:
    return ", ".join(str(i) for i in sorted(items)[:5]) or "none"
