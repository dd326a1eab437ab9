"""The approval record: who approved which plans, bound to each plan's digest (schemas/approval_record.schema.json).

It is written by the approval step, outside anything the lake's engine can rewrite, and read by publish, which signs
only the plans it lists and only while their bodies still have the digests approved (docs/plan-lifecycle.md)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

import jsonschema

from assignor.protocol.plans import CONFIG_FIELDS, ApprovedPlan
from assignor.protocol.strict_json import MalformedJson, canonical_json, strict_loads
from schemas import read_json

APPROVAL_SCHEMA_VERSION = 1
MAX_BYTES = 256 * 1024 * 1024  # a million plans' entries fit; a bigger file is not ours
SHORT_DIGEST = 12  # hex digits people compare on the approval page and in logs
Source = Literal["airflow", "cli"]


class ApprovalRecordError(ValueError):
    """An approval record that cannot be used; the message says what is wrong with it."""


@cache
def _validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(read_json("approval_record.schema.json"))


def short(digest: str) -> str:
    """The first hex digits of a digest: what a person reads and compares."""
    return digest[:SHORT_DIGEST]


@dataclass(frozen=True)
class ApprovedDigest:
    """One approved plan: its ids, its plan_digest, and the parts of the body a refusal names when they change."""

    plan_id: str
    group_id: str
    plan_digest: str
    valid_until: int
    target_digest: str
    configs: Mapping[str, int]

    @classmethod
    def of(cls, plan: ApprovedPlan) -> ApprovedDigest:
        """The entry for a plan as it is shown for approval."""
        body = plan.body()
        return cls(plan.plan_id, plan.group_id, plan.plan_digest, plan.valid_until, plan.target_digest, body["configs"])

    def to_json(self) -> dict[str, Any]:
        return {
            "plan_id": self.plan_id,
            "group_id": self.group_id,
            "plan_digest": self.plan_digest,
            "valid_until": self.valid_until,
            "target_digest": self.target_digest,
            "configs": dict(self.configs),
        }

    def differences(self, plan: ApprovedPlan) -> list[str]:
        """What differs between this approved entry and ``plan`` (rebuilt from the lake now); empty when its
        plan_digest is the one approved."""
        if plan.plan_digest == self.plan_digest and plan.plan_id == self.plan_id:
            return []
        body = plan.body()
        found = [
            f"{name} {body['configs'][name]} (approved {self.configs[name]})"
            for name in CONFIG_FIELDS
            if body["configs"][name] != self.configs.get(name)
        ]
        if plan.target_digest != self.target_digest:
            found.append(f"target {short(plan.target_digest)} (approved {short(self.target_digest)})")
        if plan.group_id != self.group_id:
            found.append(f"group {plan.group_id!r} (approved {self.group_id!r})")
        if plan.valid_until != self.valid_until:
            found.append(f"valid_until {plan.valid_until} (approved {self.valid_until})")
        # What is left of the body: the move order, the snapshot or the creation time.
        return found or ["move_order, snapshot_id or created_at"]


@dataclass(frozen=True)
class ApprovalRecord:
    """Who approved (Airflow's record of who answered, or the command line's user), when, and exactly what."""

    approved_by: str
    approved_at: int
    source: Source
    plans: tuple[ApprovedDigest, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": APPROVAL_SCHEMA_VERSION,
            "approved_by": self.approved_by,
            "approved_at": self.approved_at,
            "source": self.source,
            "plans": [p.to_json() for p in self.plans],
        }

    def to_bytes(self) -> bytes:
        return canonical_json(self.to_json())

    @property
    def fingerprint(self) -> str:
        """SHA-256 over the approved (plan_id, plan_digest) pairs: one value naming everything approved at once."""
        return fingerprint((p.plan_id, p.plan_digest) for p in self.plans)

    @classmethod
    def from_json(cls, value: Any) -> ApprovalRecord:
        """The record from its JSON form; ApprovalRecordError naming the first field that breaks the schema."""
        error = jsonschema.exceptions.best_match(_validator().iter_errors(value))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "the record"
            raise ApprovalRecordError(f"approval record: {where}: {error.message}")
        plans = tuple(
            ApprovedDigest(
                p["plan_id"], p["group_id"], p["plan_digest"], p["valid_until"], p["target_digest"], p["configs"]
            )
            for p in value["plans"]
        )
        if len({p.plan_id for p in plans}) != len(plans):
            raise ApprovalRecordError("approval record: a plan_id is listed twice")
        return cls(value["approved_by"], value["approved_at"], value["source"], plans)

    @classmethod
    def from_bytes(cls, raw: bytes) -> ApprovalRecord:
        """The record from a file's bytes (strict JSON: bounded integers, no duplicate keys)."""
        try:
            return cls.from_json(strict_loads(raw, max_bytes=MAX_BYTES))
        except MalformedJson as err:
            raise ApprovalRecordError(f"approval record: {err}") from None


def fingerprint(pairs: Iterable[tuple[str, str]]) -> str:
    """SHA-256 of the canonical JSON of the sorted (plan_id, plan_digest) pairs."""
    return hashlib.sha256(canonical_json(sorted([p, d] for p, d in pairs))).hexdigest()


def approved_entries(records: Sequence[ApprovalRecord]) -> dict[str, tuple[ApprovalRecord, ApprovedDigest]]:
    """plan_id -> (the newest record approving it, its entry there)."""
    found: dict[str, tuple[ApprovalRecord, ApprovedDigest]] = {}
    for record in sorted(records, key=lambda r: r.approved_at):
        for entry in record.plans:
            found[entry.plan_id] = (record, entry)
    return found
