"""Coverage-guided fuzzing (atheris, libFuzzer) of the decoders hostile input reaches first: state reports on the
reports topic (also with fuzzed keys: task ids, subtopology ids, group and process ids), signed plan records at a
group's leader, Kafka Streams' SubscriptionInfo and AssignmentInfo, and the Python runtime's user data.

``python -m tests.support.fuzz TARGET CORPUS_DIR -runs=N -seed=S`` writes the target's seed corpus (valid records
to mutate) into CORPUS_DIR and fuzzes. A decoder may only answer or refuse with its own error: anything else, or a
refusal without a reason, is a crash and libFuzzer exits non-zero with the input that caused it.
"""

from __future__ import annotations

import base64
import json
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import atheris

with atheris.instrument_imports(include=["assignor", "jobs"]):
    from assignor.protocol.plan_keys import VerifyKeys
    from assignor.protocol.plans import PlanRejected, Verifier
    from assignor.protocol.streams_assignment import decode_assignment
    from assignor.protocol.streams_subscription import decode_subscription
    from assignor.protocol.streams_wire import StreamsUserDataError
    from assignor.runtime.protocol import AssignmentInfo, ProtocolError, Subscription
    from jobs.pipeline.intake import Quarantined, Report, parse_report

from assignor.task import TaskId
from tests.support.pipeline_kafka import report, stateful_topology
from tests.support.streams_user_data import assignment_bytes, subscription_bytes

VECTORS = Path(__file__).resolve().parents[2] / "schemas" / "vectors"
# Inputs that broke a decoder once (issue 13): seeds, so every run tries them whatever libFuzzer draws.
HOSTILE = [
    b'{"group_id": "g", "n": ' + b"7" * 5_000 + b"}",  # past Python's int-from-text digit limit
    b"[" * 50_000 + b"]" * 50_000,  # deeper than any decoder's stack
    b'{"signature": "\u00e9\u00e9", "x": 1}',  # non-ASCII where hex is expected
    b'{"capacity": 1e400, "generation": 1180591620717411303424}',  # past float and int64
    # Numbers in keys (issue 30): a subtopology key of 5,000 digits once failed the extract of every group.
    b'{"topology": {"' + b"9" * 5_000 + b'": {}}, "task_offset_sums": {"0_' + b"9" * 5_000 + b'": 1}}',
    b'{"active_tasks": ["2147483648_0"], "task_lags": {"0_99999999999": 0}, "move_order": ["0_' + b"9" * 4_400 + b'"]}',
]
_INT32 = range(1 << 31)
REASON_CODES = ("malformed_json", "schema_violation", "offset_sum_below_-3", "conflicting_report")


def _report(data: bytes) -> None:
    split = data.find(b"\n")
    key, value = (data[:split], data[split + 1 :]) if split >= 0 else (None, data)
    outcome = parse_report(key, value)
    if isinstance(outcome, Quarantined):
        assert outcome.reason.startswith(REASON_CODES), f"quarantined without a known reason: {outcome.reason!r}"
        assert outcome.raw == value.decode("utf-8", errors="replace"), "the quarantined record lost its bytes"
    else:
        assert isinstance(outcome, Report), f"parse_report returned {type(outcome).__name__}"
        typed = outcome.record
        assert all(t.subtopology in _INT32 and t.partition in _INT32 for t in typed.named_tasks()), "task beyond int32"
        assert all(sub in _INT32 for sub in typed.topology), "subtopology beyond int32"


def _number_text(fdp: atheris.FuzzedDataProvider) -> str:
    kind = fdp.ConsumeIntInRange(0, 3)
    if kind == 0:
        return str(fdp.ConsumeInt(fdp.ConsumeIntInRange(1, 80)))  # up to 640-bit integers, signed
    if kind == 1:
        return "9" * int(fdp.ConsumeIntInRange(1, 6_000))
    return str(fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 24)))


def _task_text(fdp: atheris.FuzzedDataProvider) -> str:
    return f"{_number_text(fdp)}_{_number_text(fdp)}" if fdp.ConsumeBool() else _number_text(fdp)


def _report_keys(data: bytes) -> None:
    """A valid report whose keys (task ids, subtopology ids, group and process ids) the fuzzer chooses."""
    fdp = atheris.FuzzedDataProvider(data)
    body = report("g", "p", topology=stateful_topology("g", 1))
    sub = body["topology"]["0"]
    body["group_id"] = fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 300))
    body["process_id"] = fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 300))
    body["topology"] = {_number_text(fdp): sub for _ in range(fdp.ConsumeIntInRange(1, 3))}
    for name in ("active_tasks", "standby_tasks", "warmup_tasks"):
        body[name] = [_task_text(fdp) for _ in range(fdp.ConsumeIntInRange(0, 2))]
    body["task_offset_sums"] = {_task_text(fdp): fdp.ConsumeInt(9) for _ in range(fdp.ConsumeIntInRange(0, 2))}
    if fdp.ConsumeBool():
        body["task_lags"] = {_task_text(fdp): fdp.ConsumeInt(9) for _ in range(fdp.ConsumeIntInRange(0, 2))}
    key = f"{body['group_id']}/{body['process_id']}" if fdp.ConsumeBool() else fdp.ConsumeUnicodeNoSurrogates(20)
    _report(key.encode() + b"\n" + json.dumps(body).encode())


def _plan_verifier() -> tuple[Verifier, int]:
    vectors = json.loads((VECTORS / "signed_plans.json").read_text(encoding="utf-8"))
    keys = VerifyKeys.parse(",".join(f"{k}={v}" for k, v in vectors["keys"].items()))
    return Verifier(keys, vectors["clock_skew_ms"]), vectors["now_ms"]


_VERIFIER, _NOW = _plan_verifier()


def _plan(data: bytes) -> None:
    try:
        _VERIFIER.verify(data, "orders-app", _NOW, None)
    except PlanRejected as rejected:
        assert str(rejected), "a plan refused without a reason"


def _subscription(data: bytes) -> None:
    try:
        decode_subscription(data)
    except StreamsUserDataError as err:
        assert str(err), "user data refused without a reason"


def _assignment(data: bytes) -> None:
    try:
        decode_assignment(data)
    except StreamsUserDataError as err:
        assert str(err), "user data refused without a reason"


def _user_data(data: bytes) -> None:
    for decode in (Subscription.decode, AssignmentInfo.decode):
        try:
            decode(data)
        except ProtocolError as err:
            assert str(err), "user data refused without a reason"


def _user_data_seeds() -> list[bytes]:
    sums = {TaskId(0, 0): -2, TaskId(1, 3): 120}
    subscription = Subscription("p1", 2, frozenset({TaskId(0, 0)}), frozenset(), sums, "h:1", {"rack": "a"})
    assignment = AssignmentInfo({TaskId(0, 0): (("in", 0),)}, {TaskId(1, 3): (("store-changelog", 3),)})
    return [subscription.encode(), assignment.encode(), *HOSTILE]


def _assignment_seeds() -> list[bytes]:
    standbys = {TaskId(1, 0): [("app-store-changelog", 0)]}
    return [assignment_bytes(v, [TaskId(0, 0), TaskId(0, 1)], standbys) for v in range(1, 12)]


def _report_seeds() -> list[bytes]:
    topology = stateful_topology("orders", 2)
    pid = "3f0c9a52-1d6e-4c1b-9a77-0a1b2c3d4e5f"
    value = report("orders", pid, active=["0_0"], standby=["1_0"], offset_sums={"0_0": -2, "1_0": 120},
                   topology=topology, reported_at=1_790_000_000_000)  # fmt: skip
    record = json.dumps(value).encode()
    return [f"orders/{pid}\n".encode() + record, record, b"{}", b'[1, {"a": [2]}]', *HOSTILE]


def _plan_seeds() -> list[bytes]:
    vectors = json.loads((VECTORS / "signed_plans.json").read_text(encoding="utf-8"))
    return [base64.b64decode(case["record_b64"]) for case in vectors["cases"]] + HOSTILE


def _subscription_seeds() -> list[bytes]:
    pid = uuid.UUID("3f0c9a52-1d6e-4c1b-9a77-0a1b2c3d4e5f")
    sums = {TaskId(0, 0): -2, TaskId(0, 1): 120}
    return [
        subscription_bytes(v, pid, offset_sums=sums, previous_active=[TaskId(0, 0)], tags={"rack": "a"})
        for v in range(1, 12)
    ]


TARGETS: dict[str, tuple[Callable[[bytes], None], Callable[[], list[bytes]]]] = {
    "report": (_report, _report_seeds),
    "plan": (_plan, _plan_seeds),
    "subscription": (_subscription, _subscription_seeds),
    "report_keys": (_report_keys, lambda: [bytes(range(256)), b"\x00" * 64, b"\xff" * 512]),
    "assignment": (_assignment, _assignment_seeds),
    "user_data": (_user_data, _user_data_seeds),
}


def main(argv: list[str]) -> None:
    """Seed CORPUS_DIR with the target's valid records, then hand the rest of ``argv`` to libFuzzer."""
    target, corpus = argv[1], Path(argv[2])
    check, seeds = TARGETS[target]
    corpus.mkdir(parents=True, exist_ok=True)
    for i, seed in enumerate(seeds()):
        (corpus / f"seed-{i}").write_bytes(seed)
    atheris.Setup([argv[0], str(corpus), *argv[3:]], check)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
