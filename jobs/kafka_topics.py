"""Creating the topics the product relies on, with configurations real Kafka honors (compaction included)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

# Kafka never compacts the active segment, and rolls it only after segment.ms (default 7 days): with the
# defaults, a reports topic would keep every report for a week. An hour-long segment and a low dirty ratio
# let the cleaner fold reports and plans to the latest per key within about an hour.
COMPACTED_SEGMENT_MS = 3_600_000
COMPACTED_MIN_DIRTY_RATIO = 0.1


class TopicError(RuntimeError):
    """A topic could not be created (other than because it already exists)."""


@dataclass(frozen=True)
class TopicSpec:
    """One topic: name, partitions, whether it is compacted, and extra topic configs."""

    name: str
    partitions: int = 1
    compacted: bool = False
    segment_ms: int = COMPACTED_SEGMENT_MS
    replication_factor: int = -1  # -1: the cluster's default.replication.factor
    config: Mapping[str, str] = field(default_factory=dict)

    def new_topic(self) -> NewTopic:
        config = dict(self.config)
        if self.compacted:
            config = {
                "cleanup.policy": "compact",
                "segment.ms": str(self.segment_ms),
                "min.cleanable.dirty.ratio": str(COMPACTED_MIN_DIRTY_RATIO),
                **config,
            }
        return NewTopic(self.name, self.partitions, self.replication_factor, config=config)


def ensure_topics(client_config: Mapping[str, str], specs: Iterable[TopicSpec], timeout_s: float = 15.0) -> list[str]:
    """Create the topics that do not exist yet; return the names created. Existing topics are left as they are."""
    admin = AdminClient(dict(client_config))
    wanted = {spec.name: spec for spec in specs}
    existing = set(admin.list_topics(timeout=timeout_s).topics)
    missing = [spec.new_topic() for name, spec in sorted(wanted.items()) if name not in existing]
    if not missing:
        return []
    created: list[str] = []
    for name, future in admin.create_topics(missing, request_timeout=timeout_s).items():
        try:
            future.result(timeout_s)
            created.append(name)
        except KafkaException as err:
            if err.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:  # someone else created it meanwhile: fine
                raise TopicError(f"cannot create topic {name!r}: {err.args[0].str()}") from err
    return created
