"""Coverage-guided fuzzing (atheris, libFuzzer) of the decoders hostile input reaches first: state reports on the
reports topic, signed plan records at a group's leader, and Kafka Streams' SubscriptionInfo user data.

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
    from assignor.protocol.streams_subscription import decode_subscription
    from assignor.protocol.streams_wire import StreamsUserDataError
    from jobs.pipeline.intake import Quarantined, Report, parse_report

from assignor.task import TaskId
from tests.support.pipeline_kafka import report, stateful_topology
from tests.support.streams_user_data import subscription_bytes

VECTORS = Path(__file__).resolve().parents[2] / "schemas" / "vectors"
# Inputs that broke a decoder once (issue 13): seeds, so every run tries them whatever libFuzzer draws.
HOSTILE = [
    b'{"group_id": "g", "n": ' + b"7" * 5_000 + b"}",  # past Python's int-from-text digit limit
    b"[" * 50_000 + b"]" * 50_000,  # deeper than any decoder's stack
    b'{"signature": "\u00e9\u00e9", "x": 1}',  # non-ASCII where hex is expected
    b'{"capacity": 1e400, "generation": 1180591620717411303424}',  # past float and int64
]
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
