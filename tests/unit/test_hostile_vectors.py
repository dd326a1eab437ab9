"""The hostile-number vectors (schemas/vectors/hostile_numbers.json) against the Python rules; JUnit runs the same
file against the plugin, so both languages refuse the same task ids and plans."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from assignor.protocol.plan_keys import VerifyKeys
from assignor.protocol.plans import PlanRejected, Verifier
from assignor.task import TaskId
from tests.support.hostile_vectors import FILE, hostile_vectors

VECTORS = json.loads(FILE.read_text(encoding="utf-8"))


def test_the_committed_hostile_vectors_are_what_the_rules_produce() -> None:
    # A rule change comes with regenerated vectors (python -m tests.support.hostile_vectors) that Java then meets.
    assert hostile_vectors() == VECTORS


@pytest.mark.parametrize("case", VECTORS["task_ids"], ids=lambda c: repr(c["text"][:24]))
def test_task_id(case: dict[str, Any]) -> None:
    if case["task"] is None:
        with pytest.raises(ValueError) as refused:
            TaskId.parse(case["text"])
        assert len(str(refused.value)) <= VECTORS["max_reason_chars"]
    else:
        assert TaskId.parse(case["text"]) == TaskId(*case["task"])


@pytest.mark.parametrize("case", VECTORS["signed_plans"], ids=lambda c: c["name"])
def test_signed_plan(case: dict[str, Any]) -> None:
    keys = VerifyKeys.parse(",".join(f"{k}={v}" for k, v in VECTORS["keys"].items()))
    verifier = Verifier(keys, VECTORS["clock_skew_ms"])
    value = base64.b64decode(case["record_b64"])
    try:
        plan = verifier.verify(value, case["group_id"], VECTORS["now_ms"])
    except PlanRejected as rejected:
        assert (case["outcome"], case["reason_code"]) == ("rejected", rejected.code)
        assert len(str(rejected)) <= VECTORS["max_reason_chars"]
    else:
        assert case["outcome"] == "plan" and case["plan_id"] == plan.plan_id
