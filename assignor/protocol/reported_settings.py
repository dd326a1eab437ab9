"""What a state report says about its application's group: its protocol and its effective KIP-441 settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from assignor.configs import AssignmentConfigs


class GroupProtocol(StrEnum):
    """The group protocol an application's group runs."""

    CLASSIC = "classic"  # a consumer group whose leader assigns (our runtime, the plugin, unmodified Streams)
    STREAMS = "streams"  # KIP-1071: the broker assigns


@dataclass(frozen=True)
class ReportedSettings:
    """The KIP-441 settings an application runs with, as its report states them; None: the writer cannot know.

    Writers fill what they know: the runtime and the plugin every value, extract's group-metadata reader only
    ``num_standby_replicas`` (from the standbys held), a streams-protocol reader the group config's standbys."""

    acceptable_recovery_lag: int | None = None
    max_warmup_replicas: int | None = None
    num_standby_replicas: int | None = None
    probing_rebalance_interval_ms: int | None = None
    rack_aware_assignment_tags: tuple[str, ...] | None = None

    @classmethod
    def of(cls, configs: AssignmentConfigs) -> ReportedSettings:
        """Everything known: the settings an assignor runs with."""
        return cls(
            configs.acceptable_recovery_lag,
            configs.max_warmup_replicas,
            configs.num_standby_replicas,
            configs.probing_rebalance_interval_ms,
            configs.rack_aware_assignment_tags,
        )

    def to_json(self) -> dict[str, Any]:
        """The report's ``settings`` object (schemas/state_report.schema.json)."""
        tags = self.rack_aware_assignment_tags
        return {
            "acceptable_recovery_lag": self.acceptable_recovery_lag,
            "max_warmup_replicas": self.max_warmup_replicas,
            "num_standby_replicas": self.num_standby_replicas,
            "probing_rebalance_interval_ms": self.probing_rebalance_interval_ms,
            "rack_aware_assignment_tags": None if tags is None else list(tags),
        }

    @classmethod
    def from_json(cls, fields: Mapping[str, Any]) -> ReportedSettings:
        """The settings of a schema-valid ``settings`` object (absent keys are unknown)."""
        tags = fields.get("rack_aware_assignment_tags")
        return cls(
            acceptable_recovery_lag=fields.get("acceptable_recovery_lag"),
            max_warmup_replicas=fields.get("max_warmup_replicas"),
            num_standby_replicas=fields.get("num_standby_replicas"),
            probing_rebalance_interval_ms=fields.get("probing_rebalance_interval_ms"),
            rack_aware_assignment_tags=None if tags is None else tuple(tags),
        )
