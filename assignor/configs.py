"""The KIP-441 settings an assignor runs with."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AssignmentConfigs:
    """Kafka Streams' high-availability assignment settings, with Kafka's defaults."""

    acceptable_recovery_lag: int = 10_000
    max_warmup_replicas: int = 2
    num_standby_replicas: int = 0
    probing_rebalance_interval_ms: int = 600_000
    rack_aware_assignment_tags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        minimums = {
            "acceptable_recovery_lag": 0,
            "max_warmup_replicas": 1,
            "num_standby_replicas": 0,
            "probing_rebalance_interval_ms": 1_000,
        }
        for name, minimum in minimums.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"AssignmentConfigs.{name} must be an integer >= {minimum}, got {value!r}")
        tags = self.rack_aware_assignment_tags
        if isinstance(tags, str) or not all(isinstance(t, str) and t for t in tags):
            raise ValueError(
                f"AssignmentConfigs.rack_aware_assignment_tags must be a tuple of non-empty strings, got {tags!r}"
            )
        object.__setattr__(self, "rack_aware_assignment_tags", tuple(tags))
