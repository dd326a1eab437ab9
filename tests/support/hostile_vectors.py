"""Builds schemas/vectors/hostile_numbers.json: task ids and signed plans carrying hostile numbers (thousands of
digits, beyond int32 or int64, other scripts' digits), which Python and Java must refuse alike, with a short reason.
``python -m tests.support.hostile_vectors`` rewrites the file; a unit test checks it is what the rules produce."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from assignor.protocol.plans import PlanRejected, Verifier
from assignor.task import TaskId
from tests.support.signing import SIGNER
from tests.support.vectors import KEYS, NOW, SKEW, VECTORS, _plan, _resign

FILE = VECTORS / "hostile_numbers.json"
MAX_REASON_CHARS = 400  # a rejection names the value, never repeats a megabyte of it
_HUGE = "9" * 5_000
_TOP = str((1 << 31) - 1)
_BEYOND = str(1 << 31)

TASK_ID_TEXTS = [
    "0_0", f"{_TOP}_{_TOP}", f"0_{_BEYOND}", f"{_BEYOND}_0", "0_9999999999", "0_99999999999", f"0_{_HUGE}",
    f"{_HUGE}_0", "-1_0", "+1_0", "01_0", "0_01", "1_000_0", " 0_0", "0_0 ", "٣_0", "0_٣", "０_0", "0_", "_0", "0",
    "0_0_0", "0x1_0", "1e3_0", "0_0\n",
]  # fmt: skip


def _task_case(text: str) -> dict[str, Any]:
    try:
        task = TaskId.parse(text)
    except ValueError:
        return {"text": text, "task": None}
    return {"text": text, "task": [task.subtopology, task.partition]}


Record = dict[str, Any]


def _first(record: Record) -> dict[str, list[str]]:
    entry: dict[str, list[str]] = next(iter(record["target"].values()))
    return entry


def _signed(change: Callable[[Record], object]) -> bytes:
    record = _plan().to_record(SIGNER)
    change(record)
    return json.dumps(_resign(record)).encode()


def _raw(old: bytes, new: bytes) -> bytes:
    """The signed plan's bytes with one raw edit: a number no JSON encoder of ours would write."""
    return json.dumps(_plan().to_record(SIGNER)).encode().replace(old, new, 1)


def _plan_cases() -> list[tuple[str, bytes]]:
    def move(task: str) -> bytes:
        return _signed(lambda r: r["move_order"].append(task))

    warmups = b'"max_warmup_replicas": 1'
    return [
        ("move_order task id of 5000 digits", move(f"0_{_HUGE}")),
        ("move_order task id with a subtopology beyond int32", move(f"{_BEYOND}_0")),
        ("move_order task id of eleven digits", move("0_99999999999")),
        ("move_order task id with other scripts' digits", move("٣_0")),
        ("move_order task id with the largest parts Kafka allows", move(f"{_TOP}_{_TOP}")),
        ("target active task id of 5000 digits", _signed(lambda r: _first(r)["active"].append(f"{_HUGE}_1"))),
        ("target standby task id beyond int32", _signed(lambda r: _first(r)["standby"].append(f"0_{_BEYOND}"))),
        ("target of a 5,000-character process id with a bad task",
         _signed(lambda r: r["target"].update({"p" * 5_000: {"active": [f"0_{_HUGE}"], "standby": []}}))),
        ("configs value beyond int64", _raw(warmups, b'"max_warmup_replicas": 99999999999999999999')),
        ("configs value of 5000 digits", _raw(warmups, b'"max_warmup_replicas": ' + _HUGE.encode())),
        ("created_at of 5000 negative digits", _raw(b'"created_at": ', b'"created_at": -' + _HUGE.encode() + b',"y":')),
    ]  # fmt: skip


def hostile_vectors() -> dict[str, Any]:
    """Every case with the outcome the Python rules give."""
    plans = []
    for name, value in _plan_cases():
        case: dict[str, Any] = {"name": name, "record_b64": base64.b64encode(value).decode(), "group_id": "orders-app"}
        try:
            plan = Verifier(KEYS, SKEW).verify(value, "orders-app", NOW)
        except PlanRejected as rejected:
            case.update(outcome="rejected", reason_code=str(rejected.code))
        else:
            case.update(outcome="plan", reason_code=None, plan_id=plan.plan_id)
        plans.append(case)
    keys = dict(e.split("=") for e in KEYS.render().split(","))
    return {
        "max_reason_chars": MAX_REASON_CHARS,
        "task_ids": [_task_case(t) for t in TASK_ID_TEXTS],
        "keys": keys,
        "now_ms": NOW,
        "clock_skew_ms": SKEW,
        "signed_plans": plans,
    }


def write(path: Path = FILE) -> None:
    path.write_text(json.dumps(hostile_vectors(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    write()
