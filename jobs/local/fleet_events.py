"""What a fleet's instance processes did, read from their event logs: for the demo, tests and benchmarks."""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, Protocol

from assignor.assignment import GroupAssignment
from jobs.local.fleet import Fleet, InstanceProcess

Event = dict[str, Any]
Stretch = tuple[str, int, int]  # (task, start ms, end ms)


class EventSource(Protocol):
    """An instance whose event log speaks the shared vocabulary (start, processing, stop): a Python runtime
    process or a reference Kafka Streams JVM."""

    @property
    def name(self) -> str: ...

    @property
    def alive(self) -> bool: ...

    def events(self) -> list[Event]: ...


def last_event(instance: EventSource, name: str) -> Event | None:
    return _last(instance.events(), name)


def processing(instance: EventSource) -> set[str]:
    """Tasks the instance is processing now (a 'processing' event not followed by a 'stop')."""
    return set(_stretches(instance.events())[1])


def processing_intervals(instances: Iterable[EventSource]) -> dict[str, list[tuple[str, int, int]]]:
    """Per task: (instance name, start ms, end ms) of every stretch it was processed."""
    now = int(time.time() * 1000)
    spans: dict[str, list[tuple[str, int, int]]] = {}
    for instance in instances:
        closed, still_open, last_t = _stretches(instance.events())
        end = now if instance.alive or not last_t else last_t
        for task, start, stop in [*closed, *((task, start, end) for task, start in still_open.items())]:
            spans.setdefault(task, []).append((instance.name, start, stop))
    return spans


def _last(events: list[Event], name: str) -> Event | None:
    return next((e for e in reversed(events) if e["event"] == name), None)


def _stretches(events: list[Event]) -> tuple[list[Stretch], dict[str, int], int]:
    """One instance's processing stretches that ended, the ones still open (task -> start), the last event time."""
    closed: list[Stretch] = []
    still_open: dict[str, int] = {}
    last_t = 0
    for e in events:
        if e["event"] == "start":  # a restart after a crash: its stretches ended with its last word
            closed.extend((task, start, last_t) for task, start in still_open.items())
            still_open = {}
        last_t = e["t"]
        if e["event"] == "processing":
            still_open[e["task"]] = e["t"]
        elif e["event"] == "stop" and e["task"] in still_open:
            closed.append((e["task"], still_open.pop(e["task"]), e["t"]))
    return closed, still_open, last_t


def double_processing(instances: Iterable[EventSource]) -> list[str]:
    """Tasks two instances processed at the same time (cooperative hand-over must never allow it)."""
    found = []
    for task, spans in sorted(processing_intervals(instances).items()):
        for i, a in enumerate(spans):
            for b in spans[i + 1 :]:
                if a[0] != b[0] and a[1] < b[2] and b[1] < a[2]:
                    found.append(f"{task}: {a[0]} and {b[0]}")
    return found


def longest_pause(instances: Iterable[EventSource], since_ms: int, until_ms: int, tasks: set[str]) -> float:
    """Seconds: the longest stretch in [since, until] during which some task was processed nowhere."""
    worst = 0
    intervals = processing_intervals(instances)
    for task in tasks:
        spans = intervals.get(task, [])  # a task processed nowhere paused for the whole window
        covered = sorted((max(a, since_ms), min(b, until_ms)) for _, a, b in spans if b > since_ms and a < until_ms)
        cursor = since_ms
        for start, end in covered:
            worst = max(worst, start - cursor)
            cursor = max(cursor, end)
        worst = max(worst, until_ms - cursor)
    return worst / 1000


def all_tasks_processed_once(fleet: Fleet, group_id: str, tasks: set[str]) -> bool:
    running = [t for i in fleet.members(group_id) if i.alive for t in processing(i)]
    return sorted(running) == sorted(tasks)


def settled(fleet: Fleet, group_id: str, tasks: set[str]) -> bool:
    """Every task processed once, by live instances that all hold the same generation's assignment, with no
    warmup in flight and no probing rebalance scheduled: nothing moves until something changes.

    Processing every task once is not enough: the first instance to start forms a generation alone and
    processes everything until the next joins."""
    live = [i for i in fleet.members(group_id) if i.alive]
    generations = set()
    held: list[str] = []
    for instance in live:
        events = instance.events()
        assigned = _last(events, "assigned")
        now = set(_stretches(events)[1])
        if assigned is None or assigned["warmup"] or assigned["probing_at"] or set(assigned["active"]) != now:
            return False
        generations.add(assigned["generation"])
        held.extend(now)
    return len(generations) == 1 and sorted(held) == sorted(tasks)


def converged(fleet: Fleet, group_id: str, target: GroupAssignment, plan_id: str) -> bool:
    """Every live instance holds exactly its target tasks, processes its actives, and nothing is moving."""
    by_pid = {i.process_id: i for i in fleet.members(group_id) if i.alive}
    if set(by_pid) != set(target.clients):
        return False
    for pid, instance in by_pid.items():
        events = instance.events()  # one read per poll: the logs grow by a line a second
        assigned = _last(events, "assigned")
        wanted = target.clients[pid]
        if (
            assigned is None
            or assigned["plan_id"] != plan_id
            or set(assigned["active"]) != {str(t) for t in wanted.active}
            or set(assigned["standby"]) != {str(t) for t in wanted.standby}
            or assigned["warmup"]
            or set(_stretches(events)[1]) != {str(t) for t in wanted.active}
        ):
            return False
    return True


def activation_lags(instances: Iterable[InstanceProcess], since_ms: int = 0) -> list[tuple[str, str, int]]:
    """(instance, task, offsets left to restore) at every moment an active task was handed over."""
    return [
        (i.name, e["task"], e["lag"])
        for i in instances
        for e in i.events()
        if e["event"] == "activate" and e["t"] >= since_ms
    ]


def processing_unclaimed_at_join(instance: EventSource) -> list[str]:
    """Tasks still processing when the instance sent a JoinGroup that does not claim their input partition: a
    rebalance listener must stop what it gives up (revoked, lost, or everything under eager) before rejoining."""
    found: list[str] = []
    running: set[str] = set()
    for e in instance.events():
        if e["event"] == "start":
            running = set()
        elif e["event"] == "processing":
            running.add(e["task"])
        elif e["event"] == "stop":
            running.discard(e["task"])
        elif e["event"] == "joining":
            claimed = {int(p.rsplit("-", 1)[1]) for p in e.get("owned", [])}
            found.extend(f"{instance.name}: {t} at {e['t']}" for t in sorted(running) if _partition(t) not in claimed)
    return found


def _partition(task: str) -> int:
    return int(task.split("_")[1])
