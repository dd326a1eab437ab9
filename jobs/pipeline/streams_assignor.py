"""Our broker-side assignor for streams-protocol groups (KIP-1357): whether the brokers have it, selecting it for a
group (its ``streams.assignor.name`` group config), triggering the assignment that reads the plan, setting it back."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # public, not in __all__
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from assignor.runtime.kafka_io import read_latest_by_key
from jobs.pipeline.stage import StageUnavailable
from jobs.settings import Settings

log = logging.getLogger(__name__)

ASSIGNOR_CLASS = "io.rebalanceplanner.broker.PlanFollowingTaskAssignor"
ASSIGNOR_NAME = "rebalance-planner"  # the class's name(): what streams.assignor.name selects
ASSIGNOR_CONFIG = "streams.assignor.name"
BROKER_ASSIGNORS = "group.streams.assignors"  # the broker config listing the assignors a group may select
# The trigger (measured on 4.4.0, docs/broker-assignor.md): the broker bumps a streams group's epoch when the group's
# rack-aware assignment tags change. A tag no client carries changes no placement; its presence is toggled.
TRIGGER_CONFIG = "streams.rack.aware.assignment.tags"
TRIGGER_TAG = "rebalance.planner.step"
DECISIONS_TOPIC = "_rebalance_assignor_decisions"  # the assignor's default rebalance.planner.decisions.topic
MAX_TRIGGERS = 3  # per group and publish: the first assignment after a broker start always falls back
SOURCE_SELECTED = "assignor_selected"  # assignment_history.source of a group's selection of our assignor
SOURCE_RELEASED = "assignor_released"
SOURCE_STEP = "step_triggered"  # observe triggered a later step of the plan (streams_steps.py)


def assignor_admin(settings: Settings, bootstrap: str) -> AdminClient:
    """The Admin client the group configs are read and changed with."""
    return AdminClient({**settings.kafka_properties(bootstrap), "log_level": 0})


_admin = assignor_admin


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


def select_assignor(
    settings: Settings, bootstrap: str, processes: Mapping[str, Iterable[str]], name: str
) -> dict[str, str | None]:
    """Set ``streams.assignor.name=name`` on the groups (group -> its plan's process ids) and trigger an assignment;
    per group, the outcome of our assignor's decision (``plan``, ``sticky: <reason>``) or None if none was seen."""
    selected = _select(settings, bootstrap, processes, name)
    return confirm_first_step(settings, bootstrap, {g: processes[g] for g in selected}, time.time() * 1000)


def latest_decision(
    latest: Mapping[bytes, bytes | None], group_id: str, process_ids: Iterable[str], since_ms: float
) -> Any:
    """The group's newest decision since ``since_ms``: keyed by group id, or by its first process id while unmatched."""
    for key in (group_id, f"process:{min(process_ids, default='')}"):
        raw = latest.get(key.encode())
        try:
            decision = json.loads(raw) if raw else None
        except ValueError:
            continue
        if isinstance(decision, dict) and int(decision.get("decided_at") or 0) >= since_ms:
            return decision
    return None


def confirm_first_step(
    settings: Settings, bootstrap: str, processes: Mapping[str, Iterable[str]], since_ms: float
) -> dict[str, str | None]:
    """Read our assignor's decisions (its decisions topic) until each group has one; trigger again where it fell
    back because the plans were not read yet (the broker starts the reader at its first assignment). Bounded by
    ``kafka_timeout_s``; a group without a decision by then is left to the next trigger (logged)."""
    outcomes: dict[str, str | None] = dict.fromkeys(processes)
    triggers = dict.fromkeys(processes, 1)
    since = dict.fromkeys(processes, since_ms)
    admin = _admin(settings, bootstrap)
    deadline = time.monotonic() + settings.kafka_timeout_s
    while time.monotonic() < deadline and any(v is None for v in outcomes.values()):
        try:
            latest = read_latest_by_key(bootstrap, DECISIONS_TOPIC, settings.kafka_config, settings.kafka_timeout_s)
        except Exception as err:  # whatever it raises: the plan and the selection are done, this only confirms
            log.warning("publish: %s not readable (%s): first steps not confirmed", DECISIONS_TOPIC, err)
            break
        for group_id, pids in processes.items():
            decision = latest_decision(latest, group_id, pids, since[group_id]) if outcomes[group_id] is None else None
            if decision is None:
                continue
            reason = str(decision.get("fallback_reason") or "")
            if reason.startswith("plans_unreadable") and triggers[group_id] < MAX_TRIGGERS:
                triggers[group_id] += 1
                since[group_id] = time.time() * 1000
                trigger_assignment(admin, group_id, settings.kafka_timeout_s)
                continue
            outcomes[group_id] = "plan" if decision.get("outcome") == "plan" else f"sticky: {reason}"
        time.sleep(1.0)  # the coordinator assigns a few seconds after the trigger; no sooner answer to wait for
    for group_id, outcome in sorted(outcomes.items()):
        log.info("publish: streams group %s after %d trigger(s): %s", group_id, triggers[group_id],
                 outcome or "no decision yet (the next trigger will tell)")  # fmt: skip
    return outcomes


def _select(settings: Settings, bootstrap: str, group_ids: Iterable[str], name: str) -> list[str]:
    """Set the group config on each group and trigger its first assignment; StageUnavailable if a broker refuses."""
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


def _tags(entries: dict[str, Any]) -> list[str]:
    entry = entries.get(TRIGGER_CONFIG)
    value = entry.value if entry is not None else None
    return [t.strip() for t in (value or "").split(",") if t.strip()]


def _set_tags(admin: AdminClient, group_id: str, tags: list[str], timeout: float) -> None:
    op = AlterConfigOpType.SET if tags else AlterConfigOpType.DELETE
    _alter(admin, group_id, [ConfigEntry(TRIGGER_CONFIG, ",".join(tags), incremental_operation=op)], timeout)


def trigger_assignment(admin: AdminClient, group_id: str, timeout: float) -> None:
    """Make the coordinator assign the group again: selecting an assignor alone waits for the next epoch. Toggles
    our tag in the group's rack-aware assignment tags (a change bumps the epoch; a value set and set back before
    the coordinator looks does not, nor does re-setting the same value)."""
    _set_tags(admin, group_id, toggled_tags(_tags(_group_configs(admin, [group_id], timeout)[group_id])), timeout)


def toggled_tags(tags: list[str]) -> list[str]:
    """The group's rack-aware tags with our trigger tag added when absent, removed when present."""
    return [t for t in tags if t != TRIGGER_TAG] if TRIGGER_TAG in tags else [*tags, TRIGGER_TAG]


def selecting_assignor(settings: Settings, bootstrap: str, group_ids: Iterable[str]) -> set[str]:
    """The groups whose ``streams.assignor.name`` still selects our assignor (one DescribeConfigs); none on an
    error (logged: the next observe asks again)."""
    name = settings.broker_assignor or ASSIGNOR_NAME
    try:
        configs = _group_configs(_admin(settings, bootstrap), group_ids, settings.kafka_timeout_s)
    except KafkaException as err:
        log.warning("%s of %s not read: %s", ASSIGNOR_CONFIG, sorted(group_ids), err)
        return set()
    return {g for g, entries in configs.items() if getattr(entries.get(ASSIGNOR_CONFIG), "value", None) == name}


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
            if entry is None or entry.value != name:
                continue
            _alter(admin, group_id, [ConfigEntry(ASSIGNOR_CONFIG, "", incremental_operation=AlterConfigOpType.DELETE)],
                   timeout)  # fmt: skip
            tags = _tags(entries)
            if TRIGGER_TAG in tags:  # the group's own tags back; the epoch this bumps hands it to the default
                _set_tags(admin, group_id, [t for t in tags if t != TRIGGER_TAG], timeout)
            released.append(group_id)
    except KafkaException as err:
        log.warning("%s not set back on %s: %s", ASSIGNOR_CONFIG, sorted(group_ids), err)
    if released:
        log.info("%s set back to the broker's default on %s", ASSIGNOR_CONFIG, released)
    return released


def assignor_history_rows(group_plans: dict[str, tuple[str, str]], source: str, now: int) -> list[tuple[Any, ...]]:
    """assignment_history rows (HISTORY_DDL) of selecting (or releasing) our assignor: group -> (plan, snapshot)."""
    return [(now, g, plan, snap, None, None, "ASSIGNOR", source) for g, (plan, snap) in sorted(group_plans.items())]
