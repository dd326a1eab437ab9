"""Synthetic fleets in the state-report format: settled, lagging, scaled-out and skewed groups with realistic lags."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Any

from assignor.protocol.reported_settings import GroupProtocol, ReportedSettings
from assignor.protocol.state_report import StateReport, SubtopologyReport
from assignor.task import TaskId

SCENARIOS = ("settled", "restarted", "scaled_out", "skewed")
_WEIGHTS = (0.6, 0.2, 0.15, 0.05)


@dataclass(frozen=True)
class SyntheticGroup:
    """One group's reports plus the changelog end offsets and partition counts its topology implies."""

    group_id: str
    scenario: str
    reports: list[StateReport]
    end_offsets: dict[tuple[str, int], int]  # (changelog topic, partition) -> end offset
    partitions: dict[str, int]  # every source and changelog topic -> partition count


def changelog_topic(group_id: str, subtopology: int) -> str:
    """The changelog topic of a subtopology's store (Streams names them <application>-<store>-changelog)."""
    return f"{group_id}-store{subtopology}-changelog"


def source_topic(group_id: str, subtopology: int) -> str:
    """The source topic of a subtopology."""
    return f"{group_id}-input{subtopology}"


def topology(group_id: str, subtopologies: int) -> dict[int, SubtopologyReport]:
    """The report's topology: every subtopology stateful, one source and one changelog topic each."""
    return {
        s: SubtopologyReport((source_topic(group_id, s),), (changelog_topic(group_id, s),), stateful=True)
        for s in range(subtopologies)
    }


def _tasks(names: list[str]) -> tuple[TaskId, ...]:
    # In the order of their names, as these reports have always listed them.
    return tuple(TaskId.parse(t) for t in sorted(names))


def synthetic_group(
    group_id: str,
    rng: random.Random,
    *,
    subtopologies: int = 4,
    partitions: int = 16,
    instances: int = 6,
    standbys: int = 1,
    reported_at: int = 1_700_000_000_000,
    scenario: str | None = None,
) -> SyntheticGroup:
    """A group in one of SCENARIOS with log-normal changelog sizes and exponential replica lags."""
    scenario = scenario or rng.choices(SCENARIOS, _WEIGHTS)[0]
    tasks = [f"{s}_{p}" for s in range(subtopologies) for p in range(partitions)]
    pids = [f"{group_id}-p{i}" for i in range(instances)]
    ends = {t: int(rng.lognormvariate(math.log(200_000), 1.5)) for t in tasks}
    holders = pids[:-1] if scenario == "scaled_out" else pids
    active: dict[str, list[str]] = {p: [] for p in pids}
    standby: dict[str, list[str]] = {p: [] for p in pids}
    for i, task in enumerate(tasks):
        if scenario == "skewed":
            owner = holders[min(int(rng.expovariate(1.0)), len(holders) - 1)]
        else:
            owner = holders[i % len(holders)]
        active[owner].append(task)
        at = holders.index(owner)
        for k in range(1, min(standbys, len(holders) - 1) + 1):  # next holders round-robin: balanced replicas
            standby[holders[(at + k) % len(holders)]].append(task)
    lagging = rng.choice(holders) if scenario == "restarted" else None
    reports = []
    for pid in pids:
        sums: dict[str, int] = {}
        for task in active[pid]:
            sums[task] = -2
        for task in standby[pid]:
            spread = 5_000 if pid != lagging else ends[task] * rng.uniform(0.3, 1.0)
            sums[task] = max(0, ends[task] - int(rng.expovariate(1 / max(spread, 1.0))))
        if pid == lagging:
            for task in active[pid]:
                sums[task] = max(0, ends[task] - int(rng.uniform(20_000, 2_000_000)))
        reports.append(
            StateReport(
                group_id=group_id,
                process_id=pid,
                member_id=f"{pid}-member",
                client_id=f"{pid}-client",
                host=f"{pid}.example:8080",
                capacity=1,
                client_tags={},
                protocol_version=1,
                generation=7,
                reported_at=reported_at,
                active_tasks=_tasks(active[pid]),
                standby_tasks=_tasks(standby[pid]),
                warmup_tasks=(),
                task_offset_sums={TaskId.parse(t): s for t, s in sorted(sums.items())},
                topology=topology(group_id, subtopologies),
                plan_id=None,
                fallback_reason=None,
                protocol=GroupProtocol.CLASSIC,
                # A synthetic application states the standbys it runs with; the rest it leaves unknown.
                settings=ReportedSettings(num_standby_replicas=standbys),
            )
        )
    end_offsets = {(changelog_topic(group_id, int(t.split("_")[0])), int(t.split("_")[1])): ends[t] for t in tasks}
    counts = {changelog_topic(group_id, s): partitions for s in range(subtopologies)}
    counts.update({source_topic(group_id, s): partitions for s in range(subtopologies)})
    return SyntheticGroup(group_id, scenario, reports, end_offsets, counts)


def synthetic_fleet(groups: int, seed: int = 7, **shape: Any) -> list[SyntheticGroup]:
    """``groups`` synthetic groups named g00000, g00001, ... from one seed."""
    rng = random.Random(seed)
    return [synthetic_group(f"g{i:05d}", rng, **shape) for i in range(groups)]


def fleet_records(fleet: list[SyntheticGroup]) -> dict[bytes, bytes | None]:
    """The fleet's reports as the folded reports topic would hold them: key -> JSON value."""
    return {r.key.encode(): r.encode() for g in fleet for r in g.reports}


def fleet_partitions(fleet: list[SyntheticGroup]) -> dict[str, int]:
    """Partition count of every topic the fleet's topologies name."""
    return {topic: count for g in fleet for topic, count in g.partitions.items()}


def fleet_end_offsets(fleet: list[SyntheticGroup]) -> dict[tuple[str, int], int]:
    """End offset of every changelog partition of the fleet."""
    return {tp: end for g in fleet for tp, end in g.end_offsets.items()}
