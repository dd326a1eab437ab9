"""Settings: the KIP-441 settings are one nested value (no flat RBP_ names), planning overrides are explicit per
group or fleet-wide; SPARK_REMOTE is a setting; the value converts to the assignor's configs and round-trips through
plan columns."""

from __future__ import annotations

import dataclasses

import pytest
from pydantic import ValidationError

from assignor import AssignmentConfigs
from jobs.cli.main import _build_parser
from jobs.cli.runtime import kip441_configs
from jobs.settings import Kip441Settings, Settings

FLAT = {
    "RBP_ACCEPTABLE_RECOVERY_LAG": "100",
    "RBP_MAX_WARMUP_REPLICAS": "3",
    "RBP_NUM_STANDBY_REPLICAS": "1",
    "RBP_PROBING_REBALANCE_INTERVAL_MS": "10000",
}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [*FLAT, "RBP_KIP441", "RBP_KIP441_OVERRIDES", "SPARK_REMOTE"]:
        monkeypatch.delenv(name, raising=False)


def test_defaults_are_kafka_streams_defaults_and_convert_to_the_assignors_configs() -> None:
    assert Settings().kip441.configs() == AssignmentConfigs()


def test_every_kip441_setting_is_an_assignor_config_with_the_same_default() -> None:
    defaults = AssignmentConfigs()
    names = {f.name for f in dataclasses.fields(AssignmentConfigs)}
    for name, field in Kip441Settings.model_fields.items():
        assert name in names
        assert field.default == getattr(defaults, name), name


def test_the_old_flat_environment_names_are_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in FLAT.items():
        monkeypatch.setenv(name, value)
    assert Settings().kip441 == Kip441Settings()


def test_the_nested_environment_value_sets_the_live_groups_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RBP_KIP441", '{"num_standby_replicas": 1}')
    kip441 = Settings().kip441
    assert (kip441.max_warmup_replicas, kip441.num_standby_replicas) == (2, 1)


def test_keyword_arguments_beat_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RBP_KIP441", '{"max_warmup_replicas": 3}')
    assert Settings(kip441=Kip441Settings(num_standby_replicas=1)).kip441 == Kip441Settings(num_standby_replicas=1)


def test_a_bad_value_names_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RBP_KIP441", '{"max_warmup_replicas": 0}')
    with pytest.raises(ValidationError, match=r"kip441\.max_warmup_replicas"):
        Settings()


def test_overrides_apply_only_the_given_values_and_are_validated() -> None:
    base = Kip441Settings(num_standby_replicas=1)
    assert base.overridden({"max_warmup_replicas": 4, "num_standby_replicas": None, "groups": []}) == Kip441Settings(
        num_standby_replicas=1, max_warmup_replicas=4
    )
    with pytest.raises(ValidationError, match="max_warmup_replicas"):
        base.overridden({"max_warmup_replicas": 0})


def test_the_plan_columns_round_trip_and_an_assignor_config_converts_back() -> None:
    kip441 = Kip441Settings(acceptable_recovery_lag=7, probing_rebalance_interval_ms=5_000)
    assert Kip441Settings.from_columns({**kip441.columns(), "plan_id": "s/g"}) == kip441
    assert Kip441Settings.of(kip441.configs()) == kip441
    with pytest.raises(ValueError, match="rack_aware_assignment_tags"):
        Kip441Settings.of(AssignmentConfigs(rack_aware_assignment_tags=("zone",)))


def test_spark_remote_is_read_from_sparks_own_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings().spark_remote is None
    monkeypatch.setenv("SPARK_REMOTE", "sc://spark:15002")
    assert Settings().spark_remote == "sc://spark:15002"
    assert Settings(spark_remote="sc://other:1").spark_remote == "sc://other:1"


def test_instance_and_fleet_flags_override_single_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RBP_KIP441", '{"num_standby_replicas": 1}')
    args = _build_parser().parse_args(["fleet", "--max-warmup-replicas", "3"])
    assert kip441_configs(args, Settings()) == AssignmentConfigs(num_standby_replicas=1, max_warmup_replicas=3)
    bad = _build_parser().parse_args(["fleet", "--max-warmup-replicas", "0"])
    with pytest.raises(ValueError, match="max_warmup_replicas"):
        kip441_configs(bad, Settings())
