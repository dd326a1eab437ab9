"""Reports outside the bounds of docs/formats.md are quarantined with the reason, instead of
failing the whole extract when their values reach Delta columns or the JSON decoder's stack."""

from __future__ import annotations

import json
from typing import Any

import pytest

from jobs.pipeline.intake import MAX_NESTING, MAX_RECORD_BYTES, SCHEMA_VIOLATION, Quarantined, Report, parse_report
from tests.support.pipeline_kafka import report, stateful_topology


def _value(**fields: Any) -> bytes:
    return json.dumps({**report("g", "p1", topology=stateful_topology("g", 1)), **fields}).encode()


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (_value(capacity=1025), "at capacity: 1025 is outside 1..1024"),
        (_value(protocol_version=2**31), "at protocol_version: 2147483648 is outside"),
        (_value(generation=2**63), "at generation: 9223372036854775808 is outside"),
        (_value(reported_at=2**63), "at reported_at: 9223372036854775808 is outside"),
        (_value(task_offset_sums={"0_0": 2**64}), "at task_offset_sums/0_0: 18446744073709551616 is beyond"),
        (_value(process_id="p" * 250), "at process_id: 250 characters, more than 249"),
        (_value(client_tags={"a": {"b": 1}}), "at client_tags/a"),  # the JSON Schema still speaks first
        (_value(plan_id=json.loads("[" * 40 + "]" * 40)), f"nested deeper than {MAX_NESTING} levels"),
        (b"[" * 100_000 + b"]" * 100_000, f"nested deeper than {MAX_NESTING} levels"),
        (b'{"x": "' + b"a" * MAX_RECORD_BYTES + b'"}', f"more than {MAX_RECORD_BYTES}"),
    ],
    ids=["capacity", "int", "bigint", "reported_at", "offset_sum", "id_length", "schema", "nesting", "deep", "size"],
)
def test_out_of_bounds_reports_are_quarantined_with_the_bound(value: bytes, reason: str) -> None:
    outcome = parse_report(b"g/p1", value)
    assert isinstance(outcome, Quarantined), outcome
    assert outcome.reason.startswith(f"{SCHEMA_VIOLATION}: ") and reason in outcome.reason
    assert outcome.raw is not None and len(outcome.raw) == len(value)  # kept as read


def test_values_at_the_bounds_are_kept() -> None:
    value = _value(capacity=1024, generation=2**63 - 1, task_offset_sums={"0_0": 2**63 - 1}, process_id="p" * 249)
    assert isinstance(parse_report(b"g/" + b"p" * 249, value), Report)
    levels = MAX_NESTING - 1  # inside the report's own object: MAX_NESTING levels in all
    nested = json.loads('{"a": ' * levels + "null" + "}" * levels)
    assert isinstance(parse_report(b"g/p1", _value(extra=nested)), Report)
    assert isinstance(parse_report(b"g/p1", _value(extra={"b": nested})), Quarantined)
