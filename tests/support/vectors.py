"""Builds schemas/vectors/*.json from the Python rules: ``python -m tests.support.vectors`` rewrites them.

Everything is deterministic (fixed keys, seeded groups, Ed25519 signatures are deterministic), so a unit test can
check that the committed files are exactly what the current rules produce."""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from assignor import (
    AssignmentConfigs,
    ClientState,
    GroupAssignment,
    GroupState,
    TaskId,
    assign_high_availability,
    compute_lags,
    plan_group,
)
from assignor.assignment import ClientAssignment
from assignor.catch_up import catch_up_fully
from assignor.honor import honor_target
from assignor.protocol.deferral import DeferralSettings, Departure, defer, pending_departures
from assignor.protocol.plan_keys import PlanSigner, VerifyKeys
from assignor.protocol.plans import (
    BODY_FIELDS,
    MAX_SEQUENCE,
    ApprovedPlan,
    PlanRejected,
    Verifier,
    Withdrawal,
    body_digest,
    fit_rejection,
    target_for,
)
from assignor.protocol.strict_json import canonical_json
from jobs.pipeline.streams_steps import lag as heartbeat_lag
from schemas.kip441 import kip441_settings
from tests.support.ledger_vectors import ledger_vectors
from tests.support.restored_vectors import restored_vectors
from tests.support.revocation_vectors import revocation_vectors
from tests.support.signing import FORGER, SIGNER
from tests.support.strategies import build_group

VECTORS = Path(__file__).resolve().parents[2] / "schemas" / "vectors"
NOW = 1_790_000_000_000
SKEW = 60_000
ROTATED = PlanSigner("rotated-2026", Ed25519PrivateKey.from_private_bytes(bytes(range(100, 132))))
KEYS = VerifyKeys({**SIGNER.verify_keys().keys, **ROTATED.verify_keys().keys})
Record = dict[str, Any]


def _plan() -> ApprovedPlan:
    t = [TaskId(0, p) for p in range(4)] + [TaskId(1, 0)]
    target = GroupAssignment(
        {
            "3f0c9a52-1d6e-4c1b-9a77-0a1b2c3d4e5f": ClientAssignment(frozenset({t[0], t[1], t[4]}), frozenset({t[2]})),
            "a81e2b40-77c3-4f4e-8d1c-5e6f7a8b9c0d": ClientAssignment(frozenset({t[2], t[3]}), frozenset({t[0], t[1]})),
        }
    )
    configs = AssignmentConfigs(
        acceptable_recovery_lag=100, max_warmup_replicas=1, num_standby_replicas=0, probing_rebalance_interval_ms=10_000
    )
    return ApprovedPlan(
        "plan-7d1e", "orders-app", "20261122T020000Z-abc123", NOW - 3_600_000, NOW + 3_600_000, "alice@example.com",
        NOW - 1_800_000, configs, target, (t[2], t[0]),
    )  # fmt: skip


def _resign(record: Record, signer: PlanSigner = SIGNER, digest: bool = True) -> Record:
    """A changed record signed again by a key holder: only checks after the signature can catch the change.
    ``digest``: plan_digest follows the change too (as publish would compute it), so only the changed field's own
    check catches it."""
    fields = {k: v for k, v in record.items() if k != "signature"}
    if digest and "plan_digest" in fields and all(name in fields for name in BODY_FIELDS):
        fields["plan_digest"] = body_digest(fields)
    return {
        **fields,
        "key_id": signer.key_id,
        "signature": signer.sign(canonical_json({**fields, "key_id": signer.key_id})),
    }


def _edit(change: Callable[[Record], object], resign: bool = False, digest: bool = True) -> Record:
    record = _plan().to_record(SIGNER)
    change(record)
    return _resign(record, digest=digest) if resign else record


def _entry(record: Record) -> dict[str, list[str]]:
    """The first target entry of a record."""
    entry: dict[str, list[str]] = next(iter(record["target"].values()))
    return entry


def _swap(old: bytes, new: bytes) -> bytes:
    """The valid record's bytes with one raw edit, for what a JSON encoder would never write."""
    return _json(_plan().to_record(SIGNER)).replace(old, new, 1)


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def _json(record: Record) -> bytes:
    return json.dumps(record).encode()


def _signed_cases() -> list[tuple[str, bytes, dict[str, Any]]]:
    """(name, record bytes, verifier inputs beyond the defaults)."""
    plan = _plan()
    good = plan.to_record(SIGNER)
    seq = good["sequence"]
    tricky = '\x00\x1f\x7f\u2028 é " \\ / \t\n\r\b\f \U0001f600 \uff01'
    cases: list[tuple[str, bytes, dict[str, Any]]] = [
        ("valid plan", _json(good), {}),
        ("valid plan, pretty-printed with ASCII escapes", json.dumps(good, indent=2, ensure_ascii=True).encode(), {}),
        ("valid plan signed with a second configured key (rotation)", _json(plan.to_record(ROTATED)), {}),
        ("valid plan with unknown extra fields covered by the signature",
         _json(_edit(lambda r: r.update(note=tricky, **{"\uff01": 1, "\U0001f600": 2, "a": -0}), resign=True)), {}),
        ("valid plan with an extension nested to the limit", _json(_edit(lambda r: r.update(x=_nested(31)), True)), {}),
        ("extension nested one level too deep", _json(_edit(lambda r: r.update(x=_nested(32)), True)), {}),
        ("same plan again: its sequence equals the highest known", _json(good), {"highest_sequence": seq}),
        ("withdrawal", _json(Withdrawal(plan.plan_id, plan.group_id, NOW - 60_000).to_record(SIGNER)), {}),
        ("withdrawal with a sequence lower than the highest known",
         _json(Withdrawal(plan.plan_id, plan.group_id, NOW - 60_000, seq - 1).to_record(SIGNER)),
         {"highest_sequence": seq}),
        ("withdrawal signed by a forger", _json(Withdrawal(plan.plan_id, plan.group_id, NOW).to_record(FORGER)), {}),
        ("withdrawn is not a boolean", _json(_edit(lambda r: r.update(withdrawn="yes"), True)), {}),
        ("forged: same key id, another private key", _json(plan.to_record(FORGER)), {}),
        ("field changed after signing", _json(_edit(lambda r: r.update(approved_by="mallory"))), {}),
        ("target changed after signing", _json(_edit(lambda r: r["target"].popitem())), {}),
        ("signature of zeros", _json(_edit(lambda r: r.update(signature="0" * 128))), {}),
        ("signature in upper case", _json(_edit(lambda r: r.update(signature=r["signature"].upper()))), {}),
        ("signature too short", _json(_edit(lambda r: r.update(signature=r["signature"][:64]))), {}),
        ("signature with a non-ASCII char", _json(_edit(lambda r: r.update(signature="é" + r["signature"][1:]))), {}),
        ("signature is a number", _json(_edit(lambda r: r.update(signature=7))), {}),
        ("unknown key id", _json(_edit(lambda r: r.update(key_id="retired-2024"))), {}),
        ("key id longer than 64", _json(_edit(lambda r: r.update(key_id="k" * 65))), {}),
        ("empty key id", _json(_edit(lambda r: r.update(key_id=""))), {}),
        ("unsupported schema version", _json(_edit(lambda r: r.update(schema_version=3), True)), {}),
        ("version-1 record (before plan_digest and sequence)",
         _json(_edit(lambda r: [r.pop("plan_digest"), r.pop("sequence"), r.update(schema_version=1)], True)), {}),
        ("schema version is a string", _json(_edit(lambda r: r.update(schema_version="2"), True)), {}),
        ("missing plan_digest", _json(_edit(lambda r: r.pop("plan_digest"), True)), {}),
        ("plan_digest in upper case",
         _json(_edit(lambda r: r.update(plan_digest=r["plan_digest"].upper()), True, digest=False)), {}),
        ("plan_digest does not match the body (valid_until changed, signed again)",
         _json(_edit(lambda r: r.update(valid_until=NOW + 7_200_000), True, digest=False)), {}),
        ("plan_digest does not match the body (move_order changed, signed again)",
         _json(_edit(lambda r: r["move_order"].reverse(), True, digest=False)), {}),
        ("missing sequence", _json(_edit(lambda r: r.pop("sequence"), True)), {}),
        ("withdrawal without a sequence",
         _json(_resign({k: v for k, v in Withdrawal(plan.plan_id, plan.group_id, NOW).to_record(SIGNER).items()
                        if k != "sequence"})), {}),
        ("sequence 0", _json(_edit(lambda r: r.update(sequence=0), True)), {}),
        ("sequence 2^53 (beyond what every JSON reader holds exactly)",
         _json(_edit(lambda r: r.update(sequence=MAX_SEQUENCE + 1), True)), {}),
        ("sequence 2^53 - 1", _json(_edit(lambda r: r.update(sequence=MAX_SEQUENCE), True)), {}),
        ("sequence is a boolean", _json(_edit(lambda r: r.update(sequence=True), True)), {}),
        ("missing target", _json(_edit(lambda r: r.pop("target"))), {}),
        ("missing target_digest", _json(_edit(lambda r: r.pop("target_digest"))), {}),
        ("empty plan id", _json(_edit(lambda r: r.update(plan_id=""))), {}),
        ("created_at is a boolean", _json(_edit(lambda r: r.update(created_at=True))), {}),
        ("created_at is a string", _json(_edit(lambda r: r.update(created_at=str(r["created_at"])))), {}),
        ("created_at before 1970", _json(_edit(lambda r: r.update(created_at=-1), True)), {}),
        ("created_at with a fraction", _swap(b'"created_at": ', b'"created_at": 1.5e0 ,"x":'), {}),
        ("integer beyond 64 bits", _swap(b'"valid_until": ', b'"valid_until": 9223372036854775808,"y":'), {}),
        ("5000-digit integer", _swap(b'"valid_until": ', b'"valid_until": ' + b"9" * 5000 + b',"y":'), {}),
        ("NaN", _swap(b'"valid_until": ', b'"valid_until": NaN,"y":'), {}),
        ("duplicate key", _swap(b'{"schema_version": 2', b'{"schema_version": 2, "schema_version": 2'), {}),
        ("lone surrogate", _json(_edit(lambda r: r.update(approved_by="\ud800"))), {}),
        ("invalid UTF-8", _swap(b'"alice@', b'"\xff\xfe@'), {}),
        ("byte-order mark", b"\xef\xbb\xbf" + _json(good), {}),
        ("not JSON", b"\x00garbage", {}),
        ("trailing data", _json(good) + b" {}", {}),
        ("top level is an array", b"[" + _json(good) + b"]", {}),
        ("nested 10000 levels", b"[" * 10_000 + b"]" * 10_000, {}),
        ("valid plan padded with spaces to exactly 1 MiB", _json(good), {"pad_with_spaces_to": 1 << 20}),
        ("valid plan padded with spaces to 1 MiB + 1 byte", _json(good), {"pad_with_spaces_to": (1 << 20) + 1}),
        ("task id with a leading zero", _json(_edit(lambda r: _entry(r)["active"].append("01_1"), True)), {}),
        ("task id beyond 32 bits", _json(_edit(lambda r: r["move_order"].append("0_2147483648"), True)), {}),
        ("target entry without standby", _json(_edit(lambda r: _entry(r).pop("standby"), True)), {}),
        ("configs out of range", _json(_edit(lambda r: r["configs"].update(max_warmup_replicas=0), True)), {}),
        ("configs value a boolean", _json(_edit(lambda r: r["configs"].update(num_standby_replicas=False), True)), {}),
        ("target_digest does not match the target", _json(_edit(lambda r: _entry(r)["standby"].clear(), True)), {}),
        ("plan for another group", _json(good), {"group_id": "payments-app"}),
        ("dated in the future beyond the skew", _json(_edit(lambda r: r.update(created_at=NOW + SKEW + 1), True)), {}),
        ("dated in the future within the skew", _json(_edit(lambda r: r.update(created_at=NOW + SKEW), True)), {}),
        ("replayed: sequence lower than the highest known", _json(good), {"highest_sequence": seq + 1}),
        ("expired", _json(_edit(lambda r: r.update(valid_until=NOW - 1), True)), {}),
        ("valid until exactly now", _json(_edit(lambda r: r.update(valid_until=NOW), True)), {}),
    ]  # fmt: skip
    return cases


def _set_config(record: Record, name: str, value: int) -> None:
    record["configs"][name] = value


def _bound_cases() -> list[tuple[str, bytes, dict[str, Any]]]:
    """A signed plan with each setting at, and one past, each of its bounds (schemas/kip441_settings.json)."""
    cases: list[tuple[str, bytes, dict[str, Any]]] = []
    for name, bounds in kip441_settings().items():
        for label, value in (
            ("at its lower bound", bounds.minimum),
            ("one below its lower bound", bounds.minimum - 1),
            ("at its upper bound", bounds.maximum),
            ("one beyond its upper bound", bounds.maximum + 1),
        ):
            record = _edit(partial(_set_config, name=name, value=value), True)
            cases.append((f"{name} {label}", _json(record), {}))
    overflow = _edit(lambda r: r["configs"].update(probing_rebalance_interval_ms=2**63 - 1), True)
    cases.append(("probing interval of 2^63 - 1: a deadline now + interval would overflow", _json(overflow), {}))
    return cases


def config_bound_vectors() -> dict[str, Any]:
    """Signed plans whose configs sit at or beyond the settings' bounds, with the bounds themselves: both
    languages refuse the same records and hold the same bounds."""
    bounds = {name: {"minimum": b.minimum, "maximum": b.maximum} for name, b in kip441_settings().items()}
    return {**signed_plan_vectors(_bound_cases()), "bounds": bounds}


def signed_plan_vectors(signed: list[tuple[str, bytes, dict[str, Any]]] | None = None) -> dict[str, Any]:
    """Every signed-record case (``signed``, else the signed_plans.json ones) with the Python verifier's outcome."""
    cases = []
    for name, value, inputs in _signed_cases() if signed is None else signed:
        group_id = inputs.get("group_id", "orders-app")
        pad = inputs.get("pad_with_spaces_to")
        newest = inputs.get("highest_sequence")
        case: dict[str, Any] = {
            "name": name,
            "record_b64": base64.b64encode(value).decode(),
            "group_id": group_id,
            "highest_sequence": newest,
        }
        if pad is not None:  # kept short in the file: the verifier sees the record followed by spaces
            case["pad_with_spaces_to"] = pad
        try:
            plan = Verifier(KEYS, SKEW).verify(value.ljust(pad or 0, b" "), group_id, NOW, newest)
        except PlanRejected as rejected:
            outcome = "withdrawn" if rejected.code == "withdrawn" else "rejected"
            case.update(outcome=outcome, reason_code=str(rejected.code))
        else:
            case.update(outcome="plan", reason_code=None, plan_id=plan.plan_id)
        cases.append(case)
    return {"keys": {k: v for k, v in (e.split("=") for e in KEYS.render().split(","))}, "now_ms": NOW,
            "clock_skew_ms": SKEW, "cases": cases}  # fmt: skip


def key_revocation_vectors() -> dict[str, Any]:
    """key_revocation_cases.json: revocation records, and records folded with revocations among them."""
    return revocation_vectors(_plan(), ROTATED, KEYS, NOW, SKEW)


def plan_ledger_vectors() -> dict[str, Any]:
    """plan_ledger_cases.json: records in topic order and the plan their leader honors."""
    return ledger_vectors(_plan(), KEYS, NOW, SKEW)


def _group_json(group: GroupState) -> dict[str, Any]:
    return {
        "clients": [
            {
                "process_id": c.process_id,
                "capacity": c.capacity,
                "previous_active": sorted(map(str, c.previous_active)),
                "previous_standby": sorted(map(str, c.previous_standby)),
                "task_offset_sums": {str(t): s for t, s in sorted(c.task_offset_sums.items())},
                "client_tags": dict(sorted(c.client_tags.items())),
            }
            for c in sorted(group.clients, key=lambda c: c.process_id)
        ],
        "stateful_tasks": sorted(map(str, group.stateful_tasks)),
        "stateless_tasks": sorted(map(str, group.stateless_tasks)),
        "changelog_end_offset_sums": {str(t): e for t, e in sorted(group.changelog_end_offset_sums.items())},
    }


def assignment_json(assignment: GroupAssignment) -> dict[str, Any]:
    return {
        pid: {"active": sorted(map(str, ca.active)), "standby": sorted(map(str, ca.standby)),
              "warmup": sorted(map(str, ca.warmup))}
        for pid, ca in sorted(assignment.clients.items())
    }  # fmt: skip


def _honor_case(name: str, plan: ApprovedPlan, group: GroupState) -> tuple[dict[str, Any], GroupAssignment | None]:
    rejection = fit_rejection(plan, group)
    live = None if rejection else honor_target(target_for(plan.target, group), group, plan.configs, plan.move_order)
    expected: dict[str, Any]
    if live is None:
        expected = {"fallback": str(rejection.code if rejection else "")}
    else:
        expected = {"assignment": assignment_json(live), "followup_rebalance": live.probing_rebalance_needed}
    case = {
        "name": name,
        "configs": {
            "acceptable_recovery_lag": plan.configs.acceptable_recovery_lag,
            "max_warmup_replicas": plan.configs.max_warmup_replicas,
            "num_standby_replicas": plan.configs.num_standby_replicas,
            "probing_rebalance_interval_ms": plan.configs.probing_rebalance_interval_ms,
        },
        "group": _group_json(group),
        "lags": {pid: {str(t): lag for t, lag in lags.items()} for pid, lags in sorted(compute_lags(group).items())},
        "target": {
            pid: {"active": sorted(map(str, ca.active)), "standby": sorted(map(str, ca.standby))}
            for pid, ca in sorted(plan.target.clients.items())
        },
        "move_order": [str(t) for t in plan.move_order],
        "expected": expected,
    }
    return case, live


def _random_plan(seed: int) -> tuple[ApprovedPlan, GroupState]:
    """A random group, often with newcomers that hold no state (a scale-out: the moves honor_plan paces)."""
    rng = random.Random(seed)
    subs = rng.randint(1, 3)
    group = build_group(
        rng, rng.randint(2, 5), [rng.randint(1, 8) for _ in range(subs)], [rng.random() < 0.75 for _ in range(subs)]
    )
    scale_out = seed % 3 == 0  # a plain scale-out: no standbys to lend their slots, so warmups carry the moves
    count = rng.choice((1, 2)) if scale_out else rng.choice((0, 1, 1, 2))
    newcomers = tuple(ClientState(f"new-{seed}-{i}", capacity=rng.randint(1, 2)) for i in range(count))
    group = replace(group, clients=(*group.clients, *newcomers))
    configs = AssignmentConfigs(
        acceptable_recovery_lag=0 if scale_out else rng.choice((0, 100, 100, 10_000)),
        max_warmup_replicas=rng.randint(1, 3),
        num_standby_replicas=0 if scale_out else rng.randint(0, 2),
        probing_rebalance_interval_ms=10_000,
    )
    planned = plan_group(group, configs)
    plan = replace(_plan(), plan_id=f"plan-{seed}", configs=configs, target=planned.target,
                   move_order=tuple(planned.move_order))  # fmt: skip
    return plan, group


def honor_vectors(groups: int = 80, max_rounds: int = 10) -> dict[str, Any]:
    """Random groups honored round by round to convergence, plus one case per fallback reason."""
    cases = []
    for seed in range(groups):
        plan, group = _random_plan(seed)
        for round_ in range(max_rounds):
            case, live = _honor_case(f"group {seed}, round {round_}", plan, group)
            cases.append(case)
            if live is None or not live.probing_rebalance_needed:
                break
            group = catch_up_fully(group, live)
    plan, group = _random_plan(1)
    pids = sorted(plan.target.clients)
    first = plan.target.clients[pids[0]]
    some_task = sorted(first.active)[0]
    broken: dict[str, tuple[ApprovedPlan, GroupState]] = {
        "departed_instances": (plan, replace(group, clients=tuple(c for c in group.clients if c.process_id != pids[0]))),  # noqa: E501
        "unknown_instances": (plan, replace(group, clients=(*group.clients, ClientState("newcomer")))),
        "tasks_changed": (plan, replace(group, stateful_tasks=group.stateful_tasks | {TaskId(9, 0)})),
        "invalid_target: active twice": (
            replace(plan, target=GroupAssignment({**plan.target.clients, pids[1]: replace(
                plan.target.clients[pids[1]], active=plan.target.clients[pids[1]].active | {some_task})})),
            group,
        ),
        "invalid_target: active and standby on one client": (
            replace(plan, target=GroupAssignment({**plan.target.clients, pids[0]: replace(
                first, standby=first.standby | {some_task})})),
            group,
        ),
    }  # fmt: skip
    for name, (bad_plan, live_group) in broken.items():
        cases.append(_honor_case(f"fallback {name}", bad_plan, live_group)[0])
    # A drain's target names the drained instance with nothing: it fits while the instance runs, and still fits
    # the others once it was stopped (the group reached the target, so honoring it changes nothing).
    drained = next(c.process_id for c in group.clients if c.previous_active)
    configs = replace(plan.configs, num_standby_replicas=0)  # two instances: no standby could stay beside
    planned = plan_group(group, configs, draining=frozenset({drained}))
    drain = replace(plan, plan_id="plan-drain", configs=configs, target=planned.target,
                    move_order=tuple(planned.move_order))  # fmt: skip
    reached = group
    for step in planned.steps:
        reached = catch_up_fully(reached, step)
    gone = replace(reached, clients=tuple(c for c in reached.clients if c.process_id != drained))
    for name, live_group in (("drain: drained instance running", reached), ("drain: drained instance gone", gone)):
        cases.append(_honor_case(name, drain, live_group)[0])
    return {"cases": cases}


def ha_vectors(groups: int = 120) -> dict[str, Any]:
    """The KIP-441 baseline (the plugin's fallback) on random groups, tagged and not, with every configs mix."""
    cases = []
    for seed in range(groups):
        rng = random.Random(10_000 + seed)
        subs = rng.randint(1, 3)
        tagged = seed % 4 == 0
        group = build_group(
            rng,
            rng.randint(1, 6),
            [rng.randint(0, 10) for _ in range(subs)],
            [rng.random() < 0.7 for _ in range(subs)],
            tagged=tagged,
            with_history=seed % 5 != 0,
        )
        configs = AssignmentConfigs(
            acceptable_recovery_lag=rng.choice((0, 100, 10_000)),
            max_warmup_replicas=rng.randint(1, 3),
            num_standby_replicas=rng.randint(0, 2),
            probing_rebalance_interval_ms=60_000,
            rack_aware_assignment_tags=("zone", "rack") if tagged else (),
        )
        result = assign_high_availability(group, configs)
        cases.append(
            {
                "name": f"group {seed}",
                "configs": {
                    "acceptable_recovery_lag": configs.acceptable_recovery_lag,
                    "max_warmup_replicas": configs.max_warmup_replicas,
                    "num_standby_replicas": configs.num_standby_replicas,
                    "probing_rebalance_interval_ms": configs.probing_rebalance_interval_ms,
                    "rack_aware_assignment_tags": list(configs.rack_aware_assignment_tags),
                },
                "group": _group_json(group),
                "lags": {
                    pid: {str(t): lag for t, lag in tl.items()} for pid, tl in sorted(compute_lags(group).items())
                },
                "expected": {
                    "assignment": assignment_json(result),
                    "followup_rebalance": result.probing_rebalance_needed,
                },
            }
        )
    return {"cases": cases}


def _departures_json(departures: dict[str, Departure]) -> dict[str, Any]:
    return {
        pid: {"departed_at_ms": d.departed_at_ms, "active": sorted(map(str, d.active))}
        for pid, d in sorted(departures.items())
    }


def _deferral_case(
    name: str,
    group: GroupState,
    previous: GroupAssignment | None,
    departures: dict[str, Departure],
    now_ms: int,
    settings: DeferralSettings,
) -> dict[str, Any]:
    configs = AssignmentConfigs(acceptable_recovery_lag=10, num_standby_replicas=1)
    pending = pending_departures(previous, group, departures, now_ms, settings)
    expected: dict[str, Any] = {"pending": _departures_json(pending), "deferred": False}
    if pending and previous is not None:
        deferral = defer(previous, group, configs, pending, now_ms, settings)
        expected = {**expected, "deferred": True, "assignment": assignment_json(deferral.assignment),
                    "held": sorted(map(str, deferral.held)), "rebalance_in_ms": deferral.rebalance_in_ms}  # fmt: skip
    return {
        "name": name,
        "configs": {
            "acceptable_recovery_lag": configs.acceptable_recovery_lag,
            "num_standby_replicas": configs.num_standby_replicas,
        },
        "settings": {
            "scheduled_rebalance_max_delay_ms": settings.scheduled_rebalance_max_delay_ms,
            "hold_without_caught_up_copy": settings.hold_without_caught_up_copy,
        },
        "group": _group_json(group),
        "lags": {pid: {str(t): lag for t, lag in tl.items()} for pid, tl in sorted(compute_lags(group).items())},
        "previous": assignment_json(previous) if previous is not None else None,
        "departures": _departures_json(departures),
        "now_ms": now_ms,
        "expected": expected,
    }


def deferral_vectors() -> dict[str, Any]:
    """Deferred resolution: which departures are pending, and what the group runs meanwhile."""
    t = [TaskId(0, p) for p in range(4)]
    stateless = TaskId(1, 0)
    end = 1_000

    def client(pid: str, active: set[TaskId], sums: dict[TaskId, int], capacity: int = 1) -> ClientState:
        return ClientState(pid, capacity, frozenset(active), frozenset(), sums)

    def group(*clients: ClientState) -> GroupState:
        return GroupState(list(clients), frozenset(t), frozenset({stateless}), dict.fromkeys(t, end))

    def ca(active: set[TaskId], standby: set[TaskId] = set()) -> ClientAssignment:  # noqa: B006
        return ClientAssignment(frozenset(active), frozenset(standby))

    previous = GroupAssignment({"a": ca({t[0], t[1]}, {t[2]}), "b": ca({t[2], stateless}, {t[0]}),
                                "c": ca({t[3]}, {t[1]})})  # fmt: skip
    # "a" left: "b" holds a caught-up standby of 0_0, nobody is caught up on 0_1 ("c" lags 500).
    b = client("b", {t[2], stateless}, {t[2]: -2, t[0]: end})
    c = client("c", {t[3]}, {t[3]: -2, t[1]: 500})
    without_a = group(b, c)
    away = {"a": Departure("a", 1_000, frozenset({t[0], t[1]}))}
    delay = DeferralSettings(30_000)
    hold = DeferralSettings(30_000, hold_without_caught_up_copy=True)
    caught_up_c = client("c", {t[3]}, {t[3]: -2, t[1]: end - 5})
    # Four members, two leave 4 s apart: the earlier deadline schedules the follow-up.
    four = GroupAssignment({"a": ca({t[0]}), "b": ca({t[1]}, {t[0]}), "c": ca({t[2], stateless}, {t[3]}),
                            "d": ca({t[3]}, {t[2]})})  # fmt: skip
    b4 = client("b", {t[1]}, {t[1]: -2, t[0]: end})
    d4 = client("d", {t[3]}, {t[3]: -2, t[2]: -3}, capacity=2)
    a_back = client("a", set(), {t[0]: end - 3, t[1]: end, t[2]: end - 1})
    cases = [
        _deferral_case("delay 0: no place is kept", without_a, previous, {}, 1_000, DeferralSettings()),
        _deferral_case("departure noticed: fail over, no caught-up copy moves to the most caught-up member",
                       without_a, previous, {}, 1_000, delay),
        _deferral_case("departure noticed: no caught-up copy is held", without_a, previous, {}, 1_000, hold),
        _deferral_case("fail over to caught-up standbys only", group(b, caught_up_c), previous, {}, 1_000, hold),
        _deferral_case("still away at a later rebalance, within the delay", without_a,
                       GroupAssignment({"b": ca({t[0], t[2], stateless}), "c": ca({t[3]}, {t[1]})}), away, 20_000,
                       hold),
        _deferral_case("stays away past the deadline", without_a, previous, away, 31_000, hold),
        _deferral_case("returns in time: the ordinary decision", group(a_back, b, c), previous, away, 5_000, hold),
        _deferral_case("two departures: the earlier deadline is the follow-up", group(b4, d4), four,
                       {"a": Departure("a", 1_000, frozenset({t[0]}))}, 5_000, delay),
        _deferral_case("two departures, held", group(b4, d4), four,
                       {"a": Departure("a", 1_000, frozenset({t[0]}))}, 5_000, hold),
        _deferral_case("no previous assignment: a new leader knows no departures", without_a, None, {}, 1_000, hold),
    ]  # fmt: skip
    return {"cases": cases}


def heartbeat_lag_vectors() -> dict[str, Any]:
    """One copy's lag from a streams-protocol heartbeat's task offset sum and end offset sum (null: unknown)."""
    big = (1 << 63) - 1
    cases = [
        ("behind", 950, 1_000),
        ("at the end", 1_000, 1_000),
        ("caught up as Kafka Streams 4.4 reports it: offset sums next offsets, end sums last offsets", 4_933, 4_932),
        ("ahead by more than one: an end snapshot older than the offsets", 5_200, 5_000),
        ("no records yet", 0, 0),
        ("nothing restored of a long changelog", 0, big - 1),
        ("end unknown (Long.MAX_VALUE)", 1_000, big),
        ("offset unknown (Long.MAX_VALUE)", big, 1_000),
        ("offset unknown (-3)", -3, 1_000),
        ("negative end", 10, -1),
        ("both unknown", big, big),
    ]
    rows = [{"name": n, "offset_sum": o, "end_offset_sum": e, "lag": heartbeat_lag(o, e)} for n, o, e in cases]
    return {"cases": rows}


def write(directory: Path = VECTORS) -> None:
    """Rewrite the vector files."""
    for name, content in (
        ("signed_plans.json", signed_plan_vectors()),
        ("plan_ledger_cases.json", plan_ledger_vectors()),
        ("key_revocation_cases.json", key_revocation_vectors()),
        ("config_bounds.json", config_bound_vectors()),
        ("honor_cases.json", honor_vectors()),
        ("high_availability_cases.json", ha_vectors()),
        ("deferral_cases.json", deferral_vectors()),
        ("heartbeat_lags.json", heartbeat_lag_vectors()),
        ("restored_offsets_cases.json", restored_vectors()),
    ):
        (directory / name).write_text(json.dumps(content, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    write()
