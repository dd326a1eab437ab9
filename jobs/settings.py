"""The one typed settings object: environment variables prefixed RBP_ (see docs/operations.md)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from schemas.kip441 import KIP441_NAMES, kip441_settings

if TYPE_CHECKING:  # the assignor pulls in scipy: DAG files read Settings at parse time and must stay light
    from assignor import AssignmentConfigs
    from assignor.protocol.plan_keys import Signer
    from assignor.protocol.plans import Verifier
    from jobs.orchestration.airflow_api import AirflowLogin


def _setting(name: str, *, optional: bool = False) -> Any:
    """A KIP-441 setting's field: its default, bounds and description from schemas/kip441_settings.json, their one
    definition (null by default where ``optional``)."""
    b = kip441_settings()[name]
    return Field(default=None if optional else b.default, ge=b.minimum, le=b.maximum, description=b.description)


class Kip441Settings(BaseModel):
    """A complete set of KIP-441 settings (a live group's own, or what a plan was made with): the assignor's
    AssignmentConfigs as a setting, Kafka Streams' defaults. Converted by ``configs()`` alone."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    acceptable_recovery_lag: int = _setting("acceptable_recovery_lag")
    max_warmup_replicas: int = _setting("max_warmup_replicas")
    num_standby_replicas: int = _setting("num_standby_replicas")
    probing_rebalance_interval_ms: int = _setting("probing_rebalance_interval_ms")

    @classmethod
    def of(cls, configs: AssignmentConfigs) -> Kip441Settings:
        """The settings whose ``configs()`` are ``configs`` (rack-aware tags are no setting of the pipeline)."""
        if configs.rack_aware_assignment_tags:
            raise ValueError("rack_aware_assignment_tags cannot be a pipeline setting")
        return cls.model_validate({name: getattr(configs, name) for name in KIP441_NAMES})

    @classmethod
    def from_columns(cls, row: Mapping[str, Any]) -> Kip441Settings:
        """The settings recorded in a row that has one column per setting (``plans``)."""
        return cls.model_validate({name: row[name] for name in KIP441_NAMES})

    def overridden(self, given: Mapping[str, Any]) -> Kip441Settings:
        """These settings with ``given``'s non-null values for any of them (a command's flags)."""
        chosen = {name: given[name] for name in KIP441_NAMES if given.get(name) is not None}
        return type(self).model_validate({**self.model_dump(), **chosen})

    def columns(self) -> dict[str, int]:
        """One value per setting, named as the ``plans`` columns and the DAG params that hold them."""
        return self.model_dump()

    def configs(self) -> AssignmentConfigs:
        """The assignor's configs."""
        from assignor import AssignmentConfigs  # noqa: PLC0415 (see the TYPE_CHECKING import)

        return AssignmentConfigs(**self.model_dump())


class Kip441Override(BaseModel):
    """Some KIP-441 settings chosen explicitly for the groups it applies to; null: not overridden."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    acceptable_recovery_lag: int | None = _setting("acceptable_recovery_lag", optional=True)
    max_warmup_replicas: int | None = _setting("max_warmup_replicas", optional=True)
    num_standby_replicas: int | None = _setting("num_standby_replicas", optional=True)
    probing_rebalance_interval_ms: int | None = _setting("probing_rebalance_interval_ms", optional=True)

    def given(self) -> dict[str, int]:
        """The settings this override sets."""
        return {name: value for name, value in self.model_dump().items() if value is not None}


FLEET = "*"  # the overrides' key for every group


class Kip441Overrides(BaseModel):
    """Explicit KIP-441 overrides: ``"*"`` for every group, a group id for that group (which wins per setting).
    Without one, a group is planned with the settings it reports, else Kafka's defaults (docs/group-settings.md)."""

    model_config = ConfigDict(frozen=True)

    by_group: dict[str, Kip441Override] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _from_mapping(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "by_group" not in data:
            return {"by_group": dict(data)}
        return data

    @classmethod
    def fleet(cls, **values: int) -> Kip441Overrides:
        """Overrides of ``values`` for every group."""
        return cls(by_group={FLEET: Kip441Override.model_validate(values)})

    def for_group(self, group_id: str) -> dict[str, int]:
        """The settings explicitly chosen for ``group_id``: its own override over the fleet-wide one."""
        fleet = self.by_group.get(FLEET)
        own = self.by_group.get(group_id)
        return {**(fleet.given() if fleet else {}), **(own.given() if own else {})}

    def with_fleet(self, given: Mapping[str, Any]) -> Kip441Overrides:
        """These overrides with ``given``'s non-null settings (a DAG run's params) over the fleet-wide ones;
        per-group overrides still win for their group."""
        chosen = {name: given[name] for name in KIP441_NAMES if given.get(name) is not None}
        if not chosen:
            return self
        fleet = self.by_group.get(FLEET)
        merged = Kip441Override.model_validate({**(fleet.given() if fleet else {}), **chosen})
        return Kip441Overrides(by_group={**self.by_group, FLEET: merged})


def default_home() -> Path:
    """The product's data home when RBP_HOME is unset: ``$XDG_DATA_HOME/rebalance-planner``, else
    ``~/.local/share/rebalance-planner``; never the working directory, so every command finds the same lake and jars."""
    xdg = os.environ.get("XDG_DATA_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "share"
    return base / "rebalance-planner"


def env_jvm_dir() -> Path:
    """Settings.jvm_dir as the environment sets it (RBP_JVM_DIR, else RBP_HOME/jvm), for default arguments that
    exist before any Settings (jobs.local.jvm)."""
    jvm_dir, home = os.environ.get("RBP_JVM_DIR", ""), os.environ.get("RBP_HOME", "")
    if jvm_dir:
        return Path(jvm_dir).expanduser()
    return (Path(home).expanduser() if home else default_home()) / "jvm"


class Settings(BaseSettings):
    """Where the lake and Kafka are, and how plans are signed. Read once at the entry point, passed down."""

    model_config = SettingsConfigDict(env_prefix="RBP_", extra="ignore")

    home: Path = Field(
        default_factory=default_home,
        description="the data home: lake, jars, Data Docs, demo and fleet folders default under it "
        "(unset: $XDG_DATA_HOME/rebalance-planner or ~/.local/share/rebalance-planner)",
    )
    lake_root: Path = Field(
        default_factory=lambda data: Path(data["home"]) / "lake", description="the Delta lake (default RBP_HOME/lake)"
    )
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
    plan_signing_passphrase_file: Path | None = Field(
        default=None,
        description="file (mode 0600) holding the passphrase of an encrypted RBP_PLAN_SIGNING_KEY_FILE; read by the "
        "signing entry points only (publish, withdraw, keys revoke)",
    )
    plan_verify_keys: str = Field(
        default="", description="key_id=<64 hex Ed25519 public key>[,...]: the keys live groups accept plans from"
    )
    plan_clock_skew_ms: int = Field(default=60_000, ge=0, description="how far in the future a plan may be dated")
    reports_topic: str = Field(default="_rebalance_reports", description="compacted topic of the state reports")
    plans_topic: str = Field(default="_rebalance_plans", description="compacted topic of the signed plans")
    broker_assignor: str | None = Field(
        default=None,
        max_length=249,
        description="streams.assignor.name of our broker-side assignor for streams-protocol groups; unset: found in "
        "the brokers' group.streams.assignors; empty: not installed (such groups stay report-only)",
    )
    step_min_interval_ms: int = Field(
        default=30_000, ge=0, le=86_400_000, description="streams groups: never trigger a plan's next step sooner"
    )
    step_max_wait_ms: int = Field(
        default=600_000,
        ge=0,
        le=86_400_000,
        description="streams groups: trigger a pending step this long after the last trigger, caught up or not",
    )
    # The KIP-441 settings of the live groups this process runs (`fleet`, `instance`, the demo's groups).
    kip441: Kip441Settings = Field(default_factory=Kip441Settings)
    # Pipeline: groups are planned with their own settings; these are the explicit exceptions.
    kip441_overrides: Kip441Overrides = Field(
        default_factory=Kip441Overrides,
        description='explicit KIP-441 overrides for planning, JSON {"*": {...}, "<group>": {...}}; '
        "unset: every group is planned with its own settings",
    )
    restore_rate: float | None = Field(default=None, gt=0, description="offsets/second/instance for estimates")
    stale_report_age_ms: int = Field(default=900_000, ge=0, description="older reports are kept but flagged stale")
    quarantine_cap_per_source: int = Field(
        default=1_000,
        ge=1,
        le=1_000_000,
        description="quarantine rows a source a night; beyond, one row counts the rest",
    )
    plan_valid_ms: int = Field(default=86_400_000, ge=1, description="plans expire this long after approval")
    lake_lock_timeout_s: float = Field(
        default=1_800, gt=0, description="how long a stage waits for another to finish writing the lake"
    )
    data_docs_dir: Path | None = Field(default=None, description="unset: data_docs beside the lake")
    data_docs_assets_dir: Path = Field(
        default_factory=lambda data: Path(data["home"]) / "data-docs-assets",
        description="the Data Docs' styles and scripts from npm (`make data-docs-assets`; default RBP_HOME/...)",
    )
    kafka_timeout_s: float = Field(default=30.0, gt=0, description="how long one Kafka request may take")
    kafka_connect_attempts: int = Field(default=5, ge=1, description="tries to reach Kafka before a stage gives up")
    kafka_retry_backoff_s: float = Field(default=1.0, gt=0, description="wait after the first failure; doubles")
    kafka_retry_backoff_max_s: float = Field(default=30.0, gt=0, description="longest wait between tries")
    jvm_dir: Path = Field(
        default_factory=lambda data: Path(data["home"]) / "jvm",
        description="jars fetched from Maven Central: embedded Kafka, delta-spark (default RBP_HOME/jvm)",
    )
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
    production: bool = Field(
        default=False,
        description="production mode: RBP_APPROVERS must name who may approve, the two-person rule applies, and "
        "publish needs RBP_PLAN_VERIFY_KEYS to verify what it signs (the demo leaves it off)",
    )
    two_person_rule: bool | None = Field(
        default=None,
        description="the user who triggered a planning run may not approve its plans; unset: on in production mode",
    )
    airflow_api_url: str | None = Field(
        default=None,
        max_length=2048,
        description="Airflow's api-server (https://host:port) where publish reads the person's answer from the "
        "approval's HITL record; unset: a publish under Airflow refuses to sign",
    )
    airflow_api_user: str = Field(
        default="rbp-signer",
        max_length=256,
        description="the read-only (Viewer) Airflow login publish reads the answer with",
    )
    airflow_api_password_file: Path | None = Field(
        default=None, description="file (mode 0600) holding RBP_AIRFLOW_API_USER's password: only where publish runs"
    )
    approvals_dir: Path | None = Field(
        default=None,
        description="where `approve` writes its approval records (0600 files) for `publish`; keep it out of reach "
        "of the lake's engine (unset: approvals beside the lake)",
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

    @field_validator("home", mode="after")
    @classmethod
    def _expand_home(cls, value: Path) -> Path:
        return value.expanduser()  # RBP_HOME=~/rbp as a shell would leave it quoted

    @field_validator("approvers", mode="before")
    @classmethod
    def _split_approvers(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(v.strip() for v in value.split(",") if v.strip())
        return value

    @property
    def data_docs(self) -> Path:
        """Where Great Expectations writes its Data Docs site: beside the lake unless set."""
        return self.data_docs_dir or self.lake_root.parent / "data_docs"

    @property
    def approval_records(self) -> Path:
        """The folder of the command line's approval records: RBP_APPROVALS_DIR, else beside the lake."""
        return self.approvals_dir or self.lake_root.parent / "approvals"

    @property
    def two_persons(self) -> bool:
        """Whether the one who triggered a run may not approve it: the setting, else production mode."""
        return self.production if self.two_person_rule is None else self.two_person_rule

    def required_approvers(self) -> tuple[str, ...]:
        """RBP_APPROVERS; ValueError in production mode when it is empty (anyone could approve)."""
        if self.production and not self.approvers:
            raise ValueError("RBP_PRODUCTION is set but RBP_APPROVERS is empty: name who may approve plans")
        return self.approvers

    def airflow_login(self) -> AirflowLogin:
        """The login publish reads the approval's answer with; ValueError naming the missing setting."""
        from jobs.orchestration.airflow_api import AirflowLogin  # noqa: PLC0415

        if not self.airflow_api_url or self.airflow_api_password_file is None:
            raise ValueError(
                "RBP_AIRFLOW_API_URL and RBP_AIRFLOW_API_PASSWORD_FILE must be set where publish runs under Airflow: "
                "it signs by the person's answer as Airflow's HITL record keeps it"
            )
        return AirflowLogin(self.airflow_api_url, self.airflow_api_user, self.airflow_api_password_file)

    def plan_signer(self) -> Signer:
        """The pipeline's signing key, through the file key service (decrypted here: call it only where plans are
        signed); ValueError naming the setting when it is missing or unusable. Production mode refuses a key that
        is not encrypted at rest."""
        from jobs.signing import FileKeyService, ServiceSigner, read_passphrase  # noqa: PLC0415

        if self.plan_signing_key_file is None:
            raise ValueError("RBP_PLAN_SIGNING_KEY_FILE is not set: plans cannot be signed (see `keys generate`)")
        file = self.plan_signing_passphrase_file
        passphrase = read_passphrase(file) if file is not None else None
        service = FileKeyService.open(
            self.plan_signing_key_file, self.plan_key_id, passphrase, require_encrypted=self.production
        )
        return ServiceSigner(service, service.key_ids()[0])

    def plan_verifier(self) -> Verifier:
        """What a live group checks plans with: RBP_PLAN_VERIFY_KEYS and the clock-skew allowance."""
        from assignor.protocol.plan_keys import VerifyKeys  # noqa: PLC0415
        from assignor.protocol.plans import Verifier  # noqa: PLC0415

        return Verifier(VerifyKeys.parse(self.plan_verify_keys), self.plan_clock_skew_ms)

    def kafka_properties(self, bootstrap: str) -> dict[str, str]:
        """confluent-kafka client properties: the bootstrap servers plus RBP_KAFKA_CONFIG's extras."""
        return {"bootstrap.servers": bootstrap, **self.kafka_config}


def shown_remote(url: str) -> str:
    """A Spark Connect URL as logs and the settings command may show it: its token parameter masked."""
    return re.sub(r"(;token=)[^;]*", r"\1***", url)
