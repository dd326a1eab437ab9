"""The one typed settings object: environment variables prefixed RBP_ (see shared/contracts/pipeline.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

if TYPE_CHECKING:  # the assignor pulls in scipy: DAG files read Settings at parse time and must stay light
    from assignor import AssignmentConfigs
    from assignor.protocol.plan_keys import PlanSigner
    from assignor.protocol.plans import Verifier


class Settings(BaseSettings):
    """Where the lake and Kafka are, and how plans are signed. Read once at the entry point, passed down."""

    model_config = SettingsConfigDict(env_prefix="RBP_", extra="ignore")

    lake_root: Path = Path("./var/lake")
    kafka_bootstrap: str | None = Field(default=None, description="unset: the embedded broker")
    kafka_config: dict[str, str] = Field(default_factory=dict, description="extra client properties (JSON)")
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
    # Pipeline: the KIP-441 settings plans are made and checked with (Kafka Streams' defaults).
    acceptable_recovery_lag: int = Field(default=10_000, ge=0)
    max_warmup_replicas: int = Field(default=2, ge=1)
    num_standby_replicas: int = Field(default=0, ge=0)
    probing_rebalance_interval_ms: int = Field(default=600_000, ge=1_000)
    restore_rate: float | None = Field(default=None, gt=0, description="offsets/second/instance for estimates")
    stale_report_age_ms: int = Field(default=900_000, ge=0, description="older reports are kept but flagged stale")
    plan_valid_ms: int = Field(default=86_400_000, ge=1, description="plans expire this long after approval")
    data_docs_dir: Path | None = Field(default=None, description="unset: data_docs beside the lake")
    kafka_timeout_s: float = Field(default=30.0, gt=0)
    kafka_connect_attempts: int = Field(default=5, ge=1, description="tries to reach Kafka before a stage gives up")
    kafka_retry_backoff_s: float = Field(default=1.0, gt=0, description="wait after the first failure; doubles")
    kafka_retry_backoff_max_s: float = Field(default=30.0, gt=0, description="longest wait between tries")
    jvm_dir: Path = Field(default=Path("./var/jvm"), description="jars fetched from Maven Central (embedded Kafka)")
    # Orchestration (dags/): when the DAGs run and how long a plan waits for a person's decision.
    planning_schedule: str = Field(default="0 2 * * *", description="cron of rebalance_planning; empty: none")
    observe_schedule: str = Field(default="*/15 * * * *", description="cron of rebalance_observe; empty: none")
    approval_timeout_s: float = Field(default=43_200, gt=0, description="unanswered approvals reject after this")
    planner_processes: int = Field(
        default_factory=lambda: os.cpu_count() or 1, ge=1, description="processes planning groups under Sail"
    )

    @property
    def data_docs(self) -> Path:
        """Where Great Expectations writes its Data Docs site: beside the lake unless set."""
        return self.data_docs_dir or self.lake_root.parent / "data_docs"

    def assignment_configs(self) -> AssignmentConfigs:
        """The KIP-441 settings as the assignor's configs."""
        from assignor import AssignmentConfigs  # noqa: PLC0415 (see the TYPE_CHECKING import)

        return AssignmentConfigs(
            acceptable_recovery_lag=self.acceptable_recovery_lag,
            max_warmup_replicas=self.max_warmup_replicas,
            num_standby_replicas=self.num_standby_replicas,
            probing_rebalance_interval_ms=self.probing_rebalance_interval_ms,
        )

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
