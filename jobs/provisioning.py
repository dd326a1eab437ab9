"""``setup``: the product's two topics (reports, plans) with the configs they need, and, where the cluster has an
authorizer, the ACLs of ``jobs.kafka_acls``; idempotent, against any cluster (RBP_KAFKA_CONFIG for SASL/TLS)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # public, not in __all__
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from kafka import KafkaAdminClient
from kafka.admin import (
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePatternFilter,
)
from kafka.admin import ResourceType as KafkaResourceType
from kafka.errors import ClusterAuthorizationFailedError, SecurityDisabledError
from kafka.errors import KafkaError as PyKafkaError

from assignor.runtime.kafka_io import kafka_python_security
from jobs.kafka_acls import Principals, acl_bindings, apply_acls
from jobs.kafka_topics import TopicSpec, ensure_topics

# A report or plan is at most 1 MiB (the contract's bound); the batch around it adds a key, headers and ~100
# bytes of framing, and Kafka's own default (1 MiB + 12) would refuse the largest. 2 MiB leaves room for both.
MAX_MESSAGE_BYTES = 2 * 1024 * 1024


class ProvisioningError(RuntimeError):
    """The cluster refused something setup needs (a topic, a config, an ACL); the message names it."""


@dataclass(frozen=True)
class TopicOutcome:
    """What setup found and did for one topic: ``created``, ``ok``, ``fixed`` (with the configs changed), and what it
    could not fix (``problems``: e.g. a replication factor below the one asked for)."""

    name: str
    action: str
    fixed: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class SetupOutcome:
    """Every topic's outcome and what happened to the ACLs (a sentence)."""

    topics: tuple[TopicOutcome, ...]
    acls: str
    acls_applied: int = 0
    problems: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return not self.problems and all(not t.problems for t in self.topics)


def product_topics(
    reports_topic: str, plans_topic: str, partitions: int = 1, replication_factor: int = -1
) -> list[TopicSpec]:
    """The reports and plans topics as the product needs them: compacted (latest record per key), records up to
    1 MiB, segments that roll hourly so compaction keeps up (``jobs.kafka_topics``)."""
    config = {"max.message.bytes": str(MAX_MESSAGE_BYTES)}
    return [
        TopicSpec(name, partitions, compacted=True, replication_factor=replication_factor, config=config)
        for name in (reports_topic, plans_topic)
    ]


def _wanted_configs(spec: TopicSpec) -> dict[str, str]:
    return {str(k): str(v) for k, v in (spec.new_topic().config or {}).items()}


def config_drift(spec: TopicSpec, actual: Mapping[str, str]) -> dict[str, tuple[str | None, str]]:
    """The configs of an existing topic that fail the product's needs: name -> (found, wanted). Compaction must be
    exactly ``compact`` (``delete`` would drop plans and reports); a larger ``max.message.bytes``, or shorter segments
    and a lower dirty ratio than ours, are kept (the operator chose them, and they serve as well)."""
    wanted = _wanted_configs(spec)
    drift: dict[str, tuple[str | None, str]] = {}
    for name, value in wanted.items():
        found = actual.get(name)
        if found is None:
            drift[name] = (None, value)
        elif name == "cleanup.policy":
            if found.replace(" ", "") != value:
                drift[name] = (found, value)
        elif name in ("max.message.bytes",):
            if not _number(found) or float(found) < float(value):
                drift[name] = (found, value)
        elif name in ("segment.ms", "min.cleanable.dirty.ratio"):
            if not _number(found) or float(found) > float(value):
                drift[name] = (found, value)
        elif found != value:
            drift[name] = (found, value)
    return drift


def _number(text: str) -> bool:
    try:
        float(text[:40])  # bounded: a config value from the broker is short, but never trust length
    except ValueError:
        return False
    return len(text) <= 40


def _error_text(err: KafkaException) -> str:
    error = err.args[0]
    if isinstance(error, KafkaError):
        return f"{error.name()}: {str(error.str())[:160]}"
    return str(error)[:200]


def _describe_topic_configs(admin: AdminClient, names: Sequence[str], timeout_s: float) -> dict[str, dict[str, str]]:
    resources = [ConfigResource(ResourceType.TOPIC, n) for n in names]
    described: dict[str, dict[str, str]] = {}
    for resource, future in admin.describe_configs(resources, request_timeout=timeout_s).items():
        try:
            entries = future.result(timeout_s)
        except KafkaException as err:
            raise ProvisioningError(f"cannot read the configs of topic {resource.name!r}: {_error_text(err)}") from None
        described[resource.name] = {k: e.value for k, e in entries.items() if e.value is not None}
    return described


def _alter(admin: AdminClient, name: str, changes: Mapping[str, str], timeout_s: float) -> None:
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in sorted(changes.items())]
    resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource], request_timeout=timeout_s).values():
        try:
            future.result(timeout_s)
        except KafkaException as err:
            wrong = ", ".join(f"{k} should be {v}" for k, v in sorted(changes.items()))
            raise ProvisioningError(f"topic {name!r}: {wrong}; changing it failed: {_error_text(err)}") from None


def _shape_problems(admin: AdminClient, spec: TopicSpec, timeout_s: float) -> tuple[str, ...]:
    """What setup cannot change on an existing topic: its replication factor (a reassignment is the operator's
    call). Fewer partitions than asked is no problem (the topics are read whole, keyed by group)."""
    if spec.replication_factor < 1:
        return ()
    topic = admin.list_topics(spec.name, timeout=timeout_s).topics.get(spec.name)
    if topic is None or not topic.partitions:
        return ()
    replicas = min(len(p.replicas) for p in topic.partitions.values())
    if replicas < spec.replication_factor:
        return (
            f"replication factor {replicas} is below the {spec.replication_factor} asked for "
            "(reassign its partitions with kafka-reassign-partitions.sh)",
        )
    return ()


def ensure_product_topics(
    client_config: Mapping[str, str], specs: Sequence[TopicSpec], timeout_s: float = 15.0
) -> tuple[TopicOutcome, ...]:
    """Create missing topics; on existing ones, set (incrementally) every config that fails the product's needs."""
    created = set(ensure_topics(client_config, specs, timeout_s))
    admin = AdminClient(dict(client_config))
    existing = [s for s in specs if s.name not in created]
    actual = _describe_topic_configs(admin, [s.name for s in existing], timeout_s) if existing else {}
    outcomes = [TopicOutcome(s.name, "created") for s in specs if s.name in created]
    for spec in existing:
        drift = config_drift(spec, actual.get(spec.name, {}))
        if drift:
            _alter(admin, spec.name, {k: wanted for k, (_, wanted) in drift.items()}, timeout_s)
        fixed = tuple(f"{k}: {found or 'unset'} -> {wanted}" for k, (found, wanted) in sorted(drift.items()))
        problems = _shape_problems(admin, spec, timeout_s)
        outcomes.append(TopicOutcome(spec.name, "fixed" if fixed else "ok", fixed, problems))
    return tuple(sorted(outcomes, key=lambda o: o.name))


def has_authorizer(client_config: Mapping[str, str], timeout_s: float = 15.0) -> bool:
    """Whether the cluster enforces ACLs: a broker without an authorizer answers DescribeAcls with SECURITY_DISABLED
    (kafka-python's client says so; confluent-kafka's answers an empty list), one with an authorizer lists its ACLs
    or refuses a principal that may not see them."""
    admin = KafkaAdminClient(
        bootstrap_servers=client_config["bootstrap.servers"],
        request_timeout_ms=int(timeout_s * 1000),
        client_id="rebalance-planner-setup",
        **kafka_python_security(client_config),
    )
    anything = ACLFilter(
        principal=None,
        host="*",
        operation=ACLOperation.ANY,
        permission_type=ACLPermissionType.ANY,
        resource_pattern=ResourcePatternFilter(KafkaResourceType.ANY, None, ACLResourcePatternType.ANY),
    )
    try:
        admin.describe_acls(anything)
    except SecurityDisabledError:
        return False
    except ClusterAuthorizationFailedError:
        return True
    except PyKafkaError as err:
        raise ProvisioningError(f"cannot tell whether the cluster has an authorizer: {err}") from None
    finally:
        admin.close()
    return True


def provision(
    client_config: Mapping[str, str],
    specs: Sequence[TopicSpec],
    principals: Principals | None,
    timeout_s: float = 15.0,
) -> SetupOutcome:
    """Topics first (so no client ever needs the right to create them), then the ACLs where an authorizer exists."""
    topics = ensure_product_topics(client_config, specs, timeout_s)
    reports, plans = specs[0].name, specs[1].name
    if not has_authorizer(client_config, timeout_s):
        return SetupOutcome(topics, "skipped: the cluster has no authorizer (every client may read and write)")
    if principals is None:
        return SetupOutcome(
            topics,
            "NOT applied: the cluster has an authorizer and no principals were named (--pipeline-user, --app-user)",
        )
    try:
        count = apply_acls(client_config, acl_bindings(principals, plans, reports), timeout_s)
    except RuntimeError as err:
        raise ProvisioningError(str(err)) from None
    apps = len(principals.applications)
    return SetupOutcome(topics, f"{count} ACLs in force for {principals.pipeline} and {apps} application(s)", count)
