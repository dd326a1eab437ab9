"""The KIP-441 settings an assignor runs with."""

from __future__ import annotations

from dataclasses import dataclass

from schemas.kip441 import kip441_settings

# Defaults and bounds come from schemas/kip441_settings.json, the one definition every part follows; the
# defaults are spelled here too because a dataclass needs them at class creation (a unit test keeps them equal).


@dataclass(frozen=True)
class AssignmentConfigs:
    """Kafka Streams' high-availability assignment settings, with Kafka's defaults."""

    acceptable_recovery_lag: int = 10_000
    max_warmup_replicas: int = 2
    num_standby_replicas: int = 0
    probing_rebalance_interval_ms: int = 600_000
    rack_aware_assignment_tags: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name, bounds in kip441_settings().items():
            bounds.check(getattr(self, name), "AssignmentConfigs")
        tags = self.rack_aware_assignment_tags
        if isinstance(tags, str) or not all(isinstance(t, str) and t for t in tags):
            raise ValueError(
                f"AssignmentConfigs.rack_aware_assignment_tags must be a tuple of non-empty strings, got {tags!r}"
            )
        object.__setattr__(self, "rack_aware_assignment_tags", tuple(tags))
