"""The one typed settings object: environment variables prefixed RBP_ (see docs/operations.md)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

if TYPE_CHECKING:  # the assignor pulls in scipy: DAG files read Settings at parse time and must stay light
    from assignor import AssignmentConfigs
    from assignor.protocol.plan_keys import PlanSigner
    from assignor.protocol.plans import Verifier


class Kip441Settings(BaseModel):
    """The KIP-441 settings plans are made, checked and honored with: the assignor's AssignmentConfigs as a
    setting (Kafka Streams' defaults). Built once at the entry point, converted by ``configs()`` alone."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    acceptable_recovery_lag: int = Field(default=10_000, ge=0, description="a task this close to its end is caught up")
    max_warmup_replicas: int = Field(default=2, ge=1, description="warmups placed at once")
    num_standby_replicas: int = Field(default=0, ge=0, description="standby copies of every stateful task")
    probing_rebalance_interval_ms: int = Field(default=600_000, ge=1_000, description="between probing rebalances")

    @classmethod
    def of(cls, configs: AssignmentConfigs) -> Kip441Settings:
        """The settings whose ``configs()`` are ``configs`` (rack-aware tags are no setting of the pipeline)."""
        if configs.rack_aware_assignment_tags:
            raise ValueError("rack_aware_assignment_tags cannot be a pipeline setting")
        return cls.model_validate({name: getattr(configs, name) for name in cls.model_fields})

    @classmethod
    def from_columns(cls, row: Mapping[str, Any]) -> Kip441Settings:
        """The settings recorded in a row that has one column per setting (``plans``)."""
        return cls.model_validate({name: row[name] for name in cls.model_fields})

    def overridden(self, given: Mapping[str, Any]) -> Kip441Settings:
        """These settings with ``given``'s non-null values for any of them (a run's params, a command's flags)."""
        chosen = {name: given[name] for name in type(self).model_fields if given.get(name) is not None}
        return type(self).model_validate({**self.model_dump(), **chosen})

    def columns(self) -> dict[str, int]:
        """One value per setting, named as the ``plans`` columns and the DAG params that hold them."""
        return self.model_dump()

    def configs(self) -> AssignmentConfigs:
        """The assignor's configs."""
        from assignor import AssignmentConfigs  # noqa: PLC0415 (see the TYPE_CHECKING import)

        return AssignmentConfigs(**self.model_dump())


class _FlatKip441Source(PydanticBaseSettingsSource):
    """``RBP_ACCEPTABLE_RECOVERY_LAG`` and its three siblings: the settings' environment names from before they
    were one nested value, still read (``RBP_KIP441`` as JSON is the nested spelling)."""

    def __init__(self, settings_cls: type[BaseSettings], env: EnvSettingsSource) -> None:
        super().__init__(settings_cls)
        self.env = env

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False  # __call__ reads the four names itself

    def __call__(self) -> dict[str, Any]:
        found = {}
        for name in Kip441Settings.model_fields:
            key = self.env.env_prefix + name
            value = self.env.env_vars.get(key if self.env.case_sensitive else key.lower())
            if value is not None:
                found[name] = value
        return found


def _fold_kip441(data: dict[str, Any]) -> dict[str, Any]:
    """Move flat KIP-441 keys (old keyword arguments, the flat environment names) into the nested value; a
    nested mapping wins per key, a complete nested value wins over all of them."""
    flat = {name: data.pop(name) for name in list(data) if name in Kip441Settings.model_fields}
    if not flat:
        return data
    nested = data.get("kip441")
    if nested is None:
        data["kip441"] = flat
    elif isinstance(nested, Mapping):
        data["kip441"] = {**flat, **nested}
    return data


class Settings(BaseSettings):
    """Where the lake and Kafka are, and how plans are signed. Read once at the entry point, passed down."""

    model_config = SettingsConfigDict(env_prefix="RBP_", extra="ignore")

    lake_root: Path = Path("./var/lake")
    kafka_bootstrap: str | None = Field(default=None, description="unset: the embedded broker")
    kafka_config: dict[str, str] = Field(default_factory=dict, description="extra client properties (JSON)")
    # Spark's own variable, not an RBP_ one: the Spark Connect endpoint every Spark client understands.
    spark_remote: str | None = Field(
        default=None,
        validation_alias=AliasChoices("SPARK_REMOTE", "spark_remote"),
        description="sc://host:port of a Spark Connect server; unset: the embedded Sail engine",
    )
    plan_signing_key_file: Path | None = Field(
        default=None, description="the pipeline's Ed25519 private key (PEM, from `keys generate`): publish signs"
    )
    plan_key_id: str | None = Field(default=None, description="the signing key's id; unset: its fingerprint")
    plan_verify_keys: str = Field(
        default="", description="key_id=<64 hex Ed25519 public key>[,...]: the keys live groups accept plans from"
    )
    plan_clock_skew_ms: int = Field(default=60_000, ge=0, description="how far in the future a plan may be dated")
    reports_topic: str = "_rebalance_reports"
    plans_topic: str = "_rebalance_plans"
    broker_assignor: str | None = Field(
        default=None,
        max_length=249,
        description="streams.assignor.name of our broker-side assignor for streams-protocol groups; unset: found in "
        "the brokers' group.streams.assignors; empty: not installed (such groups stay report-only)",
    )
    # Pipeline: the KIP-441 settings plans are made and checked with (Kafka Streams' defaults).
    kip441: Kip441Settings = Field(default_factory=Kip441Settings)
    restore_rate: float | None = Field(default=None, gt=0, description="offsets/second/instance for estimates")
    stale_report_age_ms: int = Field(default=900_000, ge=0, description="older reports are kept but flagged stale")
    plan_valid_ms: int = Field(default=86_400_000, ge=1, description="plans expire this long after approval")
    lake_lock_timeout_s: float = Field(
        default=1_800, gt=0, description="how long a stage waits for another to finish writing the lake"
    )
    data_docs_dir: Path | None = Field(default=None, description="unset: data_docs beside the lake")
    kafka_timeout_s: float = Field(default=30.0, gt=0)
    kafka_connect_attempts: int = Field(default=5, ge=1, description="tries to reach Kafka before a stage gives up")
    kafka_retry_backoff_s: float = Field(default=1.0, gt=0, description="wait after the first failure; doubles")
    kafka_retry_backoff_max_s: float = Field(default=30.0, gt=0, description="longest wait between tries")
    jvm_dir: Path = Field(default=Path("./var/jvm"), description="jars fetched from Maven Central (embedded Kafka)")
    streams_reader_jar: Path | None = Field(
        default=None, description="extract's streams-groups reader jar (KIP-1071 groups); unset: the one `make` built"
    )
    # Orchestration (dags/): when the DAGs run and how long a plan waits for a person's decision.
    planning_schedule: str = Field(default="0 2 * * *", description="cron of rebalance_planning; empty: none")
    observe_schedule: str = Field(default="*/15 * * * *", description="cron of rebalance_observe; empty: none")
    approval_timeout_s: float = Field(default=43_200, gt=0, description="unanswered approvals reject after this")
    stage_timeout_s: float = Field(
        default=4 * 3600,
        gt=0,
        description="a DAG stage running longer fails and is retried (a hung engine query or broker call must not "
        "hold the run, and the lake's writer lock, forever); the approval's wait has its own timeout",
    )
    # NoDecode: "alice,bob" in the environment, not JSON.
    approvers: Annotated[tuple[str, ...], NoDecode] = Field(
        default=(),
        description="Airflow users allowed to answer the approval, comma-separated, each `id` or `id:name` (the auth "
        "manager's id: FAB's number from `airflow users list`, the simple auth manager's username; the name is what "
        "the approval page shows); empty: any",
    )
    stage_bucket_groups: int = Field(
        default=10_000,
        ge=1,
        description="groups a stage (lags, plan, validate) queries and writes at once: its memory follows this, "
        "not the fleet's size",
    )
    planner_processes: int = Field(
        default_factory=lambda: os.cpu_count() or 1, ge=1, description="processes planning groups under Sail"
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        assert isinstance(env_settings, EnvSettingsSource)
        flat = _FlatKip441Source(settings_cls, env_settings)
        return init_settings, env_settings, flat, dotenv_settings, file_secret_settings

    @field_validator("approvers", mode="before")
    @classmethod
    def _split_approvers(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(v.strip() for v in value.split(",") if v.strip())
        return value

    @model_validator(mode="before")
    @classmethod
    def _nest_kip441(cls, data: Any) -> Any:
        return _fold_kip441(dict(data)) if isinstance(data, Mapping) else data

    @property
    def data_docs(self) -> Path:
        """Where Great Expectations writes its Data Docs site: beside the lake unless set."""
        return self.data_docs_dir or self.lake_root.parent / "data_docs"

    def plan_signer(self) -> PlanSigner:
        """The pipeline's signing key; ValueError naming the setting when it is missing or unusable."""
        from assignor.protocol.plan_keys import PlanSigner  # noqa: PLC0415 (see the TYPE_CHECKING import)

        if self.plan_signing_key_file is None:
            raise ValueError("RBP_PLAN_SIGNING_KEY_FILE is not set: plans cannot be signed (see `keys generate`)")
        try:
            pem = self.plan_signing_key_file.read_bytes()
        except OSError as err:
            raise ValueError(f"RBP_PLAN_SIGNING_KEY_FILE {self.plan_signing_key_file}: {err.strerror}") from None
        return PlanSigner.from_pem(pem, self.plan_key_id)

    def plan_verifier(self) -> Verifier:
        """What a live group checks plans with: RBP_PLAN_VERIFY_KEYS and the clock-skew allowance."""
        from assignor.protocol.plan_keys import VerifyKeys  # noqa: PLC0415
        from assignor.protocol.plans import Verifier  # noqa: PLC0415

        return Verifier(VerifyKeys.parse(self.plan_verify_keys), self.plan_clock_skew_ms)

    def kafka_properties(self, bootstrap: str) -> dict[str, str]:
        """confluent-kafka client properties: the bootstrap servers plus RBP_KAFKA_CONFIG's extras."""
        return {"bootstrap.servers": bootstrap, **self.kafka_config}
