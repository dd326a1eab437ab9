"""Simulation scenarios from plain data (a JSON document), plus the built-in named ones."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, cast

from assignor.configs import AssignmentConfigs
from assignor.simulation import CatchUpModel, EventKind, FullCatchUp, MembershipEvent, RestoreRate, Scenario
from assignor.state import ClientState, GroupState
from assignor.task import LATEST_OFFSET, TaskId, parse_task_ids


class ScenarioError(ValueError):
    """A scenario document is malformed; the message names the field."""


def _get(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str, default: Any = None) -> Any:
    value = data.get(key, default)
    if value is None and default is None:
        raise ScenarioError(f"{where}.{key} is required")
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise ScenarioError(f"{where}.{key} must be {getattr(kind, '__name__', kind)}, got {value!r}")
    return value


def _tasks(values: Any, where: str) -> frozenset[TaskId]:
    return parse_task_ids(values, where, ScenarioError)


def _task_tasks(data: Mapping[str, Any]) -> tuple[frozenset[TaskId], frozenset[TaskId]]:
    if "subtopologies" in data:
        stateful: set[TaskId] = set()
        stateless: set[TaskId] = set()
        for i, sub in enumerate(_get(data, "subtopologies", list, "scenario")):
            where = f"scenario.subtopologies[{i}]"
            if not isinstance(sub, Mapping):
                raise ScenarioError(f"{where} must be an object, got {sub!r}")
            sub_id = _get(sub, "id", int, where)
            partitions = _get(sub, "partitions", int, where)
            target = stateful if _get(sub, "stateful", bool, where, True) else stateless
            target.update(TaskId(sub_id, p) for p in range(partitions))
        return frozenset(stateful), frozenset(stateless)
    tasks = _get(data, "tasks", Mapping, "scenario")
    return (
        _tasks(tasks.get("stateful", []), "scenario.tasks.stateful"),
        _tasks(tasks.get("stateless", []), "scenario.tasks.stateless"),
    )


def _client(data: Any, index: int, ends: Mapping[TaskId, int]) -> ClientState:
    where = f"scenario.clients[{index}]"
    if not isinstance(data, Mapping):
        raise ScenarioError(f"{where} must be an object, got {data!r}")
    active = _tasks(data.get("active", []), f"{where}.active")
    standby = _tasks(data.get("standby", []), f"{where}.standby")
    standby_lag = _get(data, "standby_lag", int, where, 0)
    sums: dict[TaskId, int] = {t: LATEST_OFFSET for t in active}
    sums.update({t: max(ends.get(t, 0) - standby_lag, 0) for t in standby})
    for key, value in _get(data, "task_offset_sums", Mapping, where, {}).items():
        (task,) = _tasks([key], f"{where}.task_offset_sums")
        sums[task] = value
    return ClientState(
        process_id=_get(data, "process_id", str, where),
        capacity=_get(data, "capacity", int, where, 1),
        previous_active=active,
        previous_standby=standby,
        task_offset_sums=sums,
        client_tags=_get(data, "client_tags", Mapping, where, {}),
    )


def _catch_up(data: Mapping[str, Any]) -> CatchUpModel:
    model = _get(data, "model", str, "scenario.catch_up", "full")
    if model == "full":
        return FullCatchUp()
    if model == "rate":
        return RestoreRate(float(_get(data, "offsets_per_second", (int, float), "scenario.catch_up")))
    raise ScenarioError(f"scenario.catch_up.model must be 'full' or 'rate', got {model!r}")


def scenario_from_dict(data: Any) -> Scenario:
    """Build a Scenario from a JSON-like document (format: schemas/scenario.schema.json)."""
    if not isinstance(data, Mapping):
        raise ScenarioError(f"scenario must be a JSON object, got {type(data).__name__}")
    stateful, stateless = _task_tasks(data)
    default_end = _get(data, "default_end_offset_sum", int, "scenario", 0)
    ends = {t: default_end for t in stateful}
    for key, value in _get(data, "changelog_end_offset_sums", Mapping, "scenario", {}).items():
        ends[TaskId.parse(key)] = value
    clients = [_client(c, i, ends) for i, c in enumerate(_get(data, "clients", list, "scenario"))]
    try:
        configs = AssignmentConfigs(**_get(data, "configs", Mapping, "scenario", {}))
    except TypeError as err:
        raise ScenarioError(f"scenario.configs: {err}") from None
    events = []
    for i, e in enumerate(_get(data, "events", list, "scenario", [])):
        where = f"scenario.events[{i}]"
        events.append(
            MembershipEvent(
                at_round=_get(e, "at_round", int, where),
                kind=cast(EventKind, _get(e, "kind", str, where)),
                process_id=_get(e, "process_id", str, where),
                capacity=_get(e, "capacity", int, where, 1),
                client_tags=_get(e, "client_tags", Mapping, where, {}),
                wipe_state=_get(e, "wipe_state", bool, where, False),
            )
        )
    return Scenario(
        name=_get(data, "name", str, "scenario", "scenario"),
        description=_get(data, "description", str, "scenario", ""),
        group=GroupState(clients, stateful, stateless, ends),
        configs=configs,
        events=tuple(events),
        catch_up=_catch_up(_get(data, "catch_up", Mapping, "scenario", {})),
        changelog_growth_per_round=_get(data, "changelog_growth_per_round", int, "scenario", 0),
        max_rounds=_get(data, "max_rounds", int, "scenario", 100),
    )


def _kip441(name: str, description: str, clients: list[dict[str, Any]], tasks: int, events: list[Any], lag: int) -> Any:
    return {
        "name": name,
        "description": description,
        "tasks": {"stateful": [f"0_{i}" for i in range(tasks)]},
        "default_end_offset_sum": 1_000_000,
        "configs": {"num_standby_replicas": 1},
        "clients": [dict(c, standby_lag=lag) for c in clients],
        "events": events,
    }


# KIP-441's "Scaling In" starting state: T1..T4 are tasks 0_0..0_3.
_SCALING_IN_CLIENTS = [
    {"process_id": "I1", "active": ["0_0", "0_3"], "standby": ["0_2"]},
    {"process_id": "I2", "active": ["0_1"], "standby": ["0_0", "0_3"]},
    {"process_id": "I3", "active": ["0_2"], "standby": ["0_1"]},
]

BUILTIN_SCENARIOS: Mapping[str, Mapping[str, Any]] = MappingProxyType(
    {
        "kip441-scaling-out": _kip441(
            "kip441-scaling-out",
            "KIP-441 'Scaling Out': I3 joins I1, I2 (3 tasks, 1 standby); it warms up before taking an active.",
            [
                {"process_id": "I1", "active": ["0_0", "0_2"], "standby": ["0_1"]},
                {"process_id": "I2", "active": ["0_1"], "standby": ["0_0", "0_2"]},
            ],
            3,
            [{"at_round": 0, "kind": "add", "process_id": "I3"}],
            0,
        ),
        "kip441-scaling-in-standbys-in-sync": _kip441(
            "kip441-scaling-in-standbys-in-sync",
            "KIP-441 'Scaling In (Pt. 1)': I1 leaves; in-sync standbys take over at once, no probing.",
            _SCALING_IN_CLIENTS,
            4,
            [{"at_round": 0, "kind": "remove", "process_id": "I1"}],
            0,
        ),
        "kip441-scaling-in-lagging-standbys": _kip441(
            "kip441-scaling-in-lagging-standbys",
            "KIP-441 'Scaling In (Pt. 2)': I1 leaves; standbys lag, so the most caught-up instance restores first.",
            _SCALING_IN_CLIENTS,
            4,
            [{"at_round": 0, "kind": "remove", "process_id": "I1"}],
            50_000,
        ),
        "scale-out-3-to-4": {
            "name": "scale-out-3-to-4",
            "description": "A balanced group of 3 instances with 12 stateful tasks gains a 4th instance.",
            "tasks": {"stateful": [f"0_{i}" for i in range(12)]},
            "default_end_offset_sum": 1_000_000,
            "clients": [{"process_id": f"I{i + 1}", "active": [f"0_{t}" for t in range(i, 12, 3)]} for i in range(3)],
            "events": [{"at_round": 0, "kind": "add", "process_id": "I4"}],
        },
    }
)


def builtin_scenario(name: str) -> Scenario:
    """One of BUILTIN_SCENARIOS by name; ScenarioError lists the known names otherwise."""
    if name not in BUILTIN_SCENARIOS:
        raise ScenarioError(f"unknown scenario {name!r}; built-in scenarios: {', '.join(sorted(BUILTIN_SCENARIOS))}")
    return scenario_from_dict(BUILTIN_SCENARIOS[name])
