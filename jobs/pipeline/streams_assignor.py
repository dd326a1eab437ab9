"""Our broker-side assignor for streams-protocol groups (KIP-1357): whether the brokers have it, selecting it for a
group (its ``streams.assignor.name`` group config), triggering the assignment that reads the plan, setting it back."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # public, not in __all__
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from jobs.pipeline.stage import StageUnavailable
from jobs.settings import Settings

log = logging.getLogger(__name__)

ASSIGNOR_CLASS = "io.rebalanceplanner.broker.PlanFollowingTaskAssignor"
ASSIGNOR_NAME = "rebalance-planner"  # the class's name(): what streams.assignor.name selects
ASSIGNOR_CONFIG = "streams.assignor.name"
BROKER_ASSIGNORS = "group.streams.assignors"  # the broker config listing the assignors a group may select
# The trigger: an assignment config the broker compares on change (measured on 4.4.0: docs/broker-assignor.md).
TRIGGER_CONFIG = "streams.assignment.interval.ms"
SOURCE_SELECTED = "assignor_selected"  # assignment_history.source of a group's selection of our assignor
SOURCE_RELEASED = "assignor_released"


def _admin(settings: Settings, bootstrap: str) -> AdminClient:
    return AdminClient({**settings.kafka_properties(bootstrap), "log_level": 0})


def broker_assignor(settings: Settings, bootstrap: str) -> str | None:
    """The name streams groups select our assignor by, when every broker lists its class in
    ``group.streams.assignors`` (DescribeConfigs); RBP_BROKER_ASSIGNOR overrides (a name, or empty: none)."""
    if settings.broker_assignor is not None:
        return settings.broker_assignor or None
    timeout = settings.kafka_timeout_s
    admin = _admin(settings, bootstrap)
    try:
        nodes = admin.describe_cluster(request_timeout=timeout).result(timeout).nodes
        resources = [ConfigResource(ResourceType.BROKER, str(n.id)) for n in nodes]
        described = admin.describe_configs(resources, request_timeout=timeout)
        for resource, future in described.items():
            entry = future.result(timeout).get(BROKER_ASSIGNORS)
            classes = {c.strip() for c in (entry.value or "").split(",")} if entry is not None else set()
            if ASSIGNOR_CLASS not in classes:
                log.info("broker %s lists no %s in %s: streams groups stay report-only", resource.name, ASSIGNOR_CLASS,
                         BROKER_ASSIGNORS)  # fmt: skip
                return None
    except KafkaException as err:
        log.warning("the brokers' %s could not be read (%s): streams groups stay report-only", BROKER_ASSIGNORS, err)
        return None
    return ASSIGNOR_NAME if resources else None


def _group_configs(admin: AdminClient, group_ids: Iterable[str], timeout: float) -> dict[str, dict[str, Any]]:
    resources = [ConfigResource(ResourceType.GROUP, g) for g in sorted(set(group_ids))]
    if not resources:
        return {}
    described = admin.describe_configs(resources, request_timeout=timeout)
    return {r.name: future.result(timeout) for r, future in described.items()}


def _alter(admin: AdminClient, group_id: str, entries: list[ConfigEntry], timeout: float) -> None:
    resource = ConfigResource(ResourceType.GROUP, group_id, incremental_configs=entries)
    admin.incremental_alter_configs([resource], request_timeout=timeout)[resource].result(timeout)


def select_assignor(settings: Settings, bootstrap: str, group_ids: Iterable[str], name: str) -> list[str]:
    """Set ``streams.assignor.name=name`` on the groups and trigger an assignment; the groups done."""
    timeout = settings.kafka_timeout_s
    admin = _admin(settings, bootstrap)
    done = []
    for group_id in sorted(set(group_ids)):
        try:
            _alter(admin, group_id, [ConfigEntry(ASSIGNOR_CONFIG, name, incremental_operation=AlterConfigOpType.SET)],
                   timeout)  # fmt: skip
            trigger_assignment(admin, group_id, timeout)
        except KafkaException as err:
            raise StageUnavailable(f"group {group_id}: {ASSIGNOR_CONFIG}={name} not set: {err}") from err
        done.append(group_id)
    log.info("publish: %s=%s set on %d streams group(s), assignment triggered", ASSIGNOR_CONFIG, name, len(done))
    return done


def trigger_assignment(admin: AdminClient, group_id: str, timeout: float) -> None:
    """Make the coordinator compute the group's assignment now: selecting an assignor alone waits for the next
    epoch. ``streams.assignment.interval.ms`` is toggled by one millisecond and set back: the broker bumps the
    epoch on a changed value (not on a re-set one) and the interval only paces how often it computes."""
    current = _group_configs(admin, [group_id], timeout)[group_id].get(TRIGGER_CONFIG)
    value = int(current.value) if current is not None and (current.value or "").isdigit() else 1000
    value = min(max(value, 1), 2**31 - 2)  # an int32 config: the toggle stays within it
    was_set = current is not None and not current.is_default
    _alter(admin, group_id, [ConfigEntry(TRIGGER_CONFIG, str(value + 1), incremental_operation=AlterConfigOpType.SET)],
           timeout)  # fmt: skip
    op = AlterConfigOpType.SET if was_set else AlterConfigOpType.DELETE
    _alter(admin, group_id, [ConfigEntry(TRIGGER_CONFIG, str(value), incremental_operation=op)], timeout)


def release_assignor(settings: Settings, bootstrap: str, group_ids: Iterable[str]) -> list[str]:
    """Delete ``streams.assignor.name`` where it selects our assignor (the broker's default assignor then serves the
    group from its next epoch); the groups released. Errors are logged: the next observe tries again."""
    name = settings.broker_assignor or ASSIGNOR_NAME
    timeout = settings.kafka_timeout_s
    admin = _admin(settings, bootstrap)
    released = []
    try:
        configs = _group_configs(admin, group_ids, timeout)
        for group_id, entries in sorted(configs.items()):
            entry = entries.get(ASSIGNOR_CONFIG)
            if entry is None or entry.value != name or entry.is_default:
                continue
            _alter(admin, group_id, [ConfigEntry(ASSIGNOR_CONFIG, "", incremental_operation=AlterConfigOpType.DELETE)],
                   timeout)  # fmt: skip
            released.append(group_id)
    except KafkaException as err:
        log.warning("%s not set back on %s: %s", ASSIGNOR_CONFIG, sorted(group_ids), err)
    if released:
        log.info("%s set back to the broker's default on %s", ASSIGNOR_CONFIG, released)
    return released


def assignor_history_rows(group_plans: dict[str, tuple[str, str]], source: str, now: int) -> list[tuple[Any, ...]]:
    """assignment_history rows (HISTORY_DDL) of selecting (or releasing) our assignor: group -> (plan, snapshot)."""
    return [(now, g, plan, snap, None, None, "ASSIGNOR", source) for g, (plan, snap) in sorted(group_plans.items())]
