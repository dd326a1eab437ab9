"""Cases of schemas/vectors/restored_offsets_cases.json: restored-offsets reports that Python and Java both accept
(with the same restores) or both refuse, and the exact bytes both encoders write."""

from __future__ import annotations

from typing import Any

from assignor.protocol.restored_offsets import RestoredOffsetsReport, RestoredRejected, TaskRestore
from assignor.task import TaskId

_AT = 1_790_000_000_000
_KEY = "orders/p1/restored"


def _record(restored: str | None, **over: str) -> str:
    fields = {"schema_version": "1", "group_id": '"orders"', "process_id": '"p1"', "reported_at": str(_AT)} | over
    body = ",".join(f'"{k}":{v}' for k, v in fields.items() if v is not None)
    return "{" + body + (f',"restored_offsets":{restored}' if restored is not None else "") + "}"


def _cases() -> list[tuple[str, str, str]]:
    """(name, key, value as text)."""
    one = '{"0_1":{"offsets":1234,"started_at":' + str(_AT) + "}}"
    return [
        ("one task", _KEY, _record(one)),
        ("nothing restored", _KEY, _record("{}")),
        ("two tasks", _KEY, _record('{"0_0":{"offsets":0,"started_at":0},"1_3":{"offsets":7,"started_at":5}}')),
        ("largest offsets", _KEY, _record('{"0_1":{"offsets":9223372036854775807,"started_at":1}}')),
        ("offsets past int64", _KEY, _record('{"0_1":{"offsets":9223372036854775808,"started_at":1}}')),
        ("offsets of 400 digits", _KEY, _record('{"0_1":{"offsets":' + "9" * 400 + ',"started_at":1}}')),
        ("negative offsets", _KEY, _record('{"0_1":{"offsets":-1,"started_at":1}}')),
        ("offsets with an exponent", _KEY, _record('{"0_1":{"offsets":1e3,"started_at":1}}')),
        ("offsets as a boolean", _KEY, _record('{"0_1":{"offsets":true,"started_at":1}}')),
        ("offsets as a string", _KEY, _record('{"0_1":{"offsets":"5","started_at":1}}')),
        ("started after year 9999", _KEY, _record('{"0_1":{"offsets":5,"started_at":253402300800000}}')),
        ("started_at missing", _KEY, _record('{"0_1":{"offsets":5}}')),
        ("an unknown field in a restore", _KEY, _record('{"0_1":{"offsets":5,"started_at":1,"x":1}}')),
        ("task id with a leading zero", _KEY, _record('{"0_01":{"offsets":5,"started_at":1}}')),
        ("task id past int32", _KEY, _record('{"2147483648_0":{"offsets":5,"started_at":1}}')),
        ("restores not an object", _KEY, _record("[]")),
        ("restored_offsets missing", _KEY, _record(None)),
        ("unknown top-level field ignored", _KEY, _record("{}", note='"hello"')),
        ("schema version 2", _KEY, _record("{}", schema_version="2")),
        ("empty group id", "/p1/restored", _record("{}", group_id='""')),
        ("reported_at negative", _KEY, _record("{}", reported_at="-1")),
        ("key of another process", "orders/p2/restored", _record("{}")),
        ("a duplicate key", _KEY, _record("{}", process_id='"p1","process_id":"p1"')),
        ("not an object", _KEY, "[1]"),
        ("not JSON", _KEY, "{"),
    ]


def restored_vectors() -> dict[str, Any]:
    """Every case with the Python reader's verdict; one encoding case for the writers."""
    cases = []
    for name, key, text in _cases():
        try:
            report = RestoredOffsetsReport.decode(key, text.encode("utf-8"))
        except RestoredRejected:
            cases.append({"name": name, "key": key, "value": text, "accepted": False, "restores": None})
            continue
        restores = {str(t): [r.offsets, r.started_at] for t, r in sorted(report.restores.items())}
        cases.append({"name": name, "key": key, "value": text, "accepted": True, "restores": restores})
    encoded = RestoredOffsetsReport(
        "orders-é", "p1", _AT, {TaskId(1, 2): TaskRestore(500, _AT - 10), TaskId(0, 10): TaskRestore(0, _AT)}
    )
    encoding = {
        "group_id": encoded.group_id,
        "process_id": encoded.process_id,
        "reported_at": encoded.reported_at,
        "restores": {str(t): [r.offsets, r.started_at] for t, r in encoded.restores.items()},
        "key": encoded.key,
        "value": encoded.encode().decode("utf-8"),
    }
    return {"cases": cases, "encoding": encoding}
