"""The KIP-441 settings are defined once (schemas/kip441_settings.json): the assignor, the settings and overrides,
the DAG params, the record schemas and the shared bound vectors (which JUnit runs too) all hold its bounds."""

from __future__ import annotations

import base64
import dataclasses
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from assignor import AssignmentConfigs
from assignor.protocol.plan_keys import VerifyKeys
from assignor.protocol.plans import PlanRejected, Verifier
from jobs.orchestration.params import PLANNING_PARAMS
from jobs.settings import Kip441Override, Kip441Overrides, Kip441Settings, Settings
from schemas import read_json
from schemas.kip441 import KIP441_NAMES, kip441_settings
from tests.support.vectors import VECTORS, config_bound_vectors

BOUNDS = kip441_settings()
VECTOR_FILE = json.loads((VECTORS / "config_bounds.json").read_text(encoding="utf-8"))


def _range(field: Any) -> tuple[int, int]:
    ge = next(m.ge for m in field.metadata if hasattr(m, "ge"))
    le = next(m.le for m in field.metadata if hasattr(m, "le"))
    return ge, le


def test_the_assignor_and_the_settings_hold_the_definitions_defaults_and_bounds() -> None:
    defaults = AssignmentConfigs()
    assert [f.name for f in dataclasses.fields(AssignmentConfigs)][:4] == list(KIP441_NAMES)
    assert tuple(Kip441Settings.model_fields) == KIP441_NAMES == tuple(Kip441Override.model_fields)
    for name, b in BOUNDS.items():
        assert getattr(defaults, name) == b.default == Kip441Settings.model_fields[name].default, name
        assert _range(Kip441Settings.model_fields[name]) == (b.minimum, b.maximum), name
        assert _range(Kip441Override.model_fields[name]) == (b.minimum, b.maximum), name
    # Upper bounds a Java long and every JSON reader can hold: a 7-day interval at most, counts far inside an int.
    assert BOUNDS["probing_rebalance_interval_ms"].maximum == 7 * 24 * 3600 * 1000
    assert BOUNDS["acceptable_recovery_lag"].maximum == 2**53 - 1
    assert BOUNDS["max_warmup_replicas"].maximum <= 2**31 - 1 and BOUNDS["num_standby_replicas"].maximum <= 2**31 - 1


def test_the_plan_schema_the_report_schema_and_the_dag_params_hold_the_same_bounds() -> None:
    configs = read_json("plan.schema.json")["properties"]["configs"]
    assert configs["required"] == list(KIP441_NAMES)
    reported = read_json("state_report.schema.json")["properties"]["settings"]["properties"]
    for name, b in BOUNDS.items():
        assert (configs["properties"][name]["minimum"], configs["properties"][name]["maximum"]) == (
            b.minimum,
            b.maximum,
        )
        # A report states what the application runs (bounded by its column only); planning bounds it.
        assert reported[name]["minimum"] == b.minimum and reported[name]["maximum"] >= b.maximum
        param = PLANNING_PARAMS[name]
        assert (param.schema["minimum"], param.schema["maximum"]) == (b.minimum, b.maximum), name
        assert param.value is None  # no value: each group's own setting, unless a person sets one for the run


@given(name=st.sampled_from(KIP441_NAMES), value=st.integers(-(2**64), 2**64))
def test_the_assignor_accepts_a_setting_exactly_within_its_bounds(name: str, value: int) -> None:
    b = BOUNDS[name]
    values: dict[str, Any] = {name: value}
    if b.minimum <= value <= b.maximum:
        assert getattr(AssignmentConfigs(**values), name) == value
    else:
        with pytest.raises(ValueError, match=rf"{name} must be an integer in {b.minimum}\.\.{b.maximum}"):
            AssignmentConfigs(**values)


def test_the_committed_bound_vectors_are_what_the_rules_produce() -> None:
    assert config_bound_vectors() == VECTOR_FILE
    assert VECTOR_FILE["bounds"] == {n: {"minimum": b.minimum, "maximum": b.maximum} for n, b in BOUNDS.items()}


@pytest.mark.parametrize("case", VECTOR_FILE["cases"], ids=lambda c: c["name"])
def test_bound_vector(case: dict[str, Any]) -> None:
    keys = VerifyKeys.parse(",".join(f"{k}={v}" for k, v in VECTOR_FILE["keys"].items()))
    verifier = Verifier(keys, VECTOR_FILE["clock_skew_ms"])
    value = base64.b64decode(case["record_b64"])
    try:
        plan = verifier.verify(value, case["group_id"], VECTOR_FILE["now_ms"], case["highest_sequence"])
    except PlanRejected as rejected:
        assert (case["outcome"], case["reason_code"]) == ("rejected", str(rejected.code))
    else:
        assert case["outcome"] == "plan" and plan.plan_id == case["plan_id"]
    beyond = "beyond" in case["name"] or "below" in case["name"] or "overflow" in case["name"]
    assert (case["outcome"] == "rejected") == beyond


def test_overrides_are_explicit_per_group_or_fleet_wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RBP_KIP441_OVERRIDES", raising=False)
    assert Settings().kip441_overrides.for_group("orders") == {}  # nothing overridden by default
    monkeypatch.setenv(
        "RBP_KIP441_OVERRIDES",
        '{"*": {"num_standby_replicas": 0, "max_warmup_replicas": 3}, "orders": {"num_standby_replicas": 2}}',
    )
    overrides = Settings().kip441_overrides
    assert overrides.for_group("orders") == {"num_standby_replicas": 2, "max_warmup_replicas": 3}
    assert overrides.for_group("clicks") == {"num_standby_replicas": 0, "max_warmup_replicas": 3}
    # A run's params are fleet-wide overrides: over the fleet-wide ones, under a group's own.
    run = overrides.with_fleet({"num_standby_replicas": 1, "groups": [], "probing_rebalance_interval_ms": None})
    assert run.for_group("clicks") == {"num_standby_replicas": 1, "max_warmup_replicas": 3}
    assert run.for_group("orders")["num_standby_replicas"] == 2


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ('{"*": {"probing_rebalance_interval_ms": 604800001}}', "probing_rebalance_interval_ms"),
        ('{"orders": {"num_standby_replicas": 1001}}', "num_standby_replicas"),
        ('{"orders": {"standbys": 1}}', "standbys"),
    ],
)
def test_an_override_beyond_its_bounds_or_unknown_is_refused_naming_it(
    overrides: str, message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RBP_KIP441_OVERRIDES", overrides)
    with pytest.raises(ValidationError, match=message):
        Settings()
    with pytest.raises(ValidationError, match=message):
        Kip441Overrides.model_validate(json.loads(overrides))
