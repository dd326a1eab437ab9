"""The Kafka ACLs of a secured deployment: only the pipeline writes the plans topic; applications read plans and
write their state reports; nobody else touches either (the broker denies whatever no ACL allows). An application may
also be given its own topics and consumer groups by name prefix, as Kafka Streams applications are by application.id."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import cast

from confluent_kafka import KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # public, not in __all__
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialUpsertion,
)

from jobs.polling import wait_until

READER_GROUP_PREFIX = "rbp-reader-"  # the consumer group read_latest_by_key reads compacted topics with
# Kafka refuses fewer than 4,096 PBKDF2 iterations for SCRAM-SHA-512; twice that costs a login ~10 ms more.
SCRAM_ITERATIONS = 8192
MAX_PASSWORD_BYTES = 1024


@dataclass(frozen=True)
class Principals:
    """Who is who on the broker: the pipeline (Airflow's tasks) and each application's user."""

    pipeline: str
    applications: tuple[str, ...]
    # (application user, prefix): the topics and consumer groups that user owns outright (creates, reads, writes)
    own_prefixes: tuple[tuple[str, str], ...] = ()


def _allow(
    principal: str,
    resource: ResourceType,
    name: str,
    operations: Sequence[AclOperation],
    pattern: ResourcePatternType = ResourcePatternType.LITERAL,
) -> list[AclBinding]:
    return [
        AclBinding(resource, name, pattern, f"User:{principal}", "*", op, AclPermissionType.ALLOW) for op in operations
    ]


def acl_bindings(principals: Principals, plans_topic: str, reports_topic: str) -> list[AclBinding]:
    """Every ACL the product needs; an application's own topics and groups are its own ACLs' business."""
    read, write, describe = AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE
    pipeline = principals.pipeline
    bindings = [
        *_allow(pipeline, ResourceType.TOPIC, plans_topic, [write, read, describe]),
        *_allow(pipeline, ResourceType.TOPIC, reports_topic, [read, describe]),
        # extract: every group's members and committed offsets, every changelog's end offsets
        *_allow(pipeline, ResourceType.TOPIC, "*", [describe]),
        # publish to streams-protocol groups sets the group's assignor config on exactly the approved groups and
        # sets it back later (IncrementalAlterConfigs on the group resource)
        *_allow(
            pipeline, ResourceType.GROUP, "*", [describe, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS]
        ),
        *_allow(pipeline, ResourceType.BROKER, "kafka-cluster", [describe]),
        *_allow(pipeline, ResourceType.GROUP, READER_GROUP_PREFIX, [read], ResourcePatternType.PREFIXED),
    ]
    for app in principals.applications:
        bindings += [
            *_allow(app, ResourceType.TOPIC, plans_topic, [read, describe]),
            *_allow(app, ResourceType.TOPIC, reports_topic, [write, describe]),
            *_allow(app, ResourceType.GROUP, READER_GROUP_PREFIX, [read], ResourcePatternType.PREFIXED),
        ]
    for app, prefix in principals.own_prefixes:
        if not prefix or plans_topic.startswith(prefix) or reports_topic.startswith(prefix):
            # ALL on a prefix covering the product's topics would let the application write plans
            raise ValueError(f"{app}'s prefix {prefix!r} is empty or covers {plans_topic} or {reports_topic}")
        everything = [AclOperation.ALL]
        bindings += [
            *_allow(app, ResourceType.TOPIC, prefix, everything, ResourcePatternType.PREFIXED),
            *_allow(app, ResourceType.GROUP, prefix, everything, ResourcePatternType.PREFIXED),
        ]
    return bindings


def apply_acls(admin_config: Mapping[str, str], bindings: Sequence[AclBinding], timeout_s: float = 30) -> int:
    """Create the ACLs (creating an existing one is a no-op) and wait until the broker enforces them; how many
    were asked for. RuntimeError naming the first that failed."""
    admin = AdminClient(dict(admin_config))
    for binding, future in admin.create_acls(list(bindings), request_timeout=timeout_s).items():
        try:
            future.result()
        except KafkaException as err:
            error = err.args[0]  # the broker's message can carry a whole request dump: its code says enough
            raise RuntimeError(f"creating ACL {binding} failed: {error.name()} {error.str()[:160]}") from None
    # None matches any name, principal and host (confluent-kafka's stubs say str).
    everything = AclBindingFilter(
        ResourceType.ANY,
        None,  # type: ignore[arg-type]
        ResourcePatternType.ANY,
        None,  # type: ignore[arg-type]
        None,  # type: ignore[arg-type]
        AclOperation.ANY,
        AclPermissionType.ANY,
    )

    def enforced() -> bool:
        # The controller commits ACLs first; the broker enforces them once it has replayed that commit.
        present = set(admin.describe_acls(everything, request_timeout=timeout_s).result())
        return set(bindings) <= present

    wait_until(enforced, timeout_s, f"{len(bindings)} ACLs to be enforced", error=RuntimeError)
    return len(bindings)


def scram_password_problem(user: str, password: str) -> str | None:
    """Why this user name and password cannot be set, or None."""
    if not user or not password or len(password.encode()) > MAX_PASSWORD_BYTES:
        return f"SCRAM user {user!r}: needs a name and a password of 1..{MAX_PASSWORD_BYTES} bytes"
    return None


def upsert_scram_users(admin_config: Mapping[str, str], passwords: Mapping[str, str], timeout_s: float = 30) -> int:
    """Set each user's SCRAM-SHA-512 password (creating the user if new) and wait until the broker knows them all;
    how many. A cluster formatted before a user existed gets it this way; re-running with a new password rotates it.
    RuntimeError naming the first user that failed."""
    for user, password in passwords.items():
        problem = scram_password_problem(user, password)
        if problem:
            raise ValueError(problem)
    admin = AdminClient(dict(admin_config))
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, SCRAM_ITERATIONS)
    upserts: list[UserScramCredentialAlteration] = [
        UserScramCredentialUpsertion(user, info, password.encode()) for user, password in passwords.items()
    ]
    if not upserts:
        return 0
    for user, future in admin.alter_user_scram_credentials(upserts, request_timeout=timeout_s).items():
        try:
            future.result()
        except KafkaException as err:
            error = err.args[0]
            raise RuntimeError(f"setting SCRAM user {user} failed: {error.name()} {error.str()[:160]}") from None

    def known() -> bool:
        described = cast(
            "dict[str, Future[object]]",
            admin.describe_user_scram_credentials(list(passwords), request_timeout=timeout_s),
        )
        try:
            return all(future.result() is not None for future in described.values())
        except KafkaException:  # RESOURCE_NOT_FOUND until the broker has replayed the controller's commit
            return False

    wait_until(known, timeout_s, f"{len(upserts)} SCRAM users to be known", error=RuntimeError)
    return len(upserts)
