"""The one typed settings object: environment variables prefixed RBP_ (see shared/contracts/pipeline.md)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Where the lake and Kafka are, and how plans are signed. Read once at the entry point, passed down."""

    model_config = SettingsConfigDict(env_prefix="RBP_", extra="ignore")

    lake_root: Path = Path("./var/lake")
    kafka_bootstrap: str | None = Field(default=None, description="unset: the embedded broker")
    kafka_config: dict[str, str] = Field(default_factory=dict, description="extra client properties (JSON)")
    plan_signing_key: str | None = Field(default=None, description="HMAC key for plan records")
    reports_topic: str = "_rebalance_reports"
    plans_topic: str = "_rebalance_plans"

    def kafka_properties(self, bootstrap: str) -> dict[str, str]:
        """confluent-kafka client properties: the bootstrap servers plus RBP_KAFKA_CONFIG's extras."""
        return {"bootstrap.servers": bootstrap, **self.kafka_config}
