"""Each group's KIP-441 settings for planning: an explicit override, else what its members report, else Kafka's
default; and what that changes versus the settings the group runs with (docs/group-settings.md)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as sf

from assignor import AssignmentConfigs
from jobs.lakehouse.columns import frame_of_columns
from jobs.settings import Kip441Overrides
from schemas.kip441 import KIP441_NAMES, kip441_settings


class SettingSource(StrEnum):
    """Where a planned setting came from."""

    OVERRIDE = "override"  # RBP_KIP441_OVERRIDES or the run's params: a person's explicit choice
    REPORTED = "reported"  # the group's own, as its members report it
    DEFAULT = "default"  # unknown (e.g. a report-only group): Kafka Streams' default


# Members that disagree (a rolling config change) get the value that keeps more state safe: more standbys, a
# stricter catch-up, fewer warmups at once, rarer probing. The plan is still flagged: no single value is the group's.
_WHEN_MEMBERS_DISAGREE: Mapping[str, Callable[[Iterable[int]], int]] = {
    "acceptable_recovery_lag": min,
    "max_warmup_replicas": min,
    "num_standby_replicas": max,
    "probing_rebalance_interval_ms": max,
}


@dataclass(frozen=True)
class SettingChange:
    """A planned setting that differs from what the group runs with; ``explicit`` when an override asked for it."""

    name: str
    own: tuple[int, ...]  # the distinct values the group's members report
    planned: int
    why: str
    explicit: bool

    def __str__(self) -> str:
        return f"{self.name} {','.join(map(str, self.own))} -> {self.planned} ({self.why})"


@dataclass(frozen=True)
class GroupSettings:
    """The settings one group is planned with, where each came from, and what differs from its own."""

    values: Mapping[str, int]
    sources: Mapping[str, SettingSource]
    changes: tuple[SettingChange, ...] = field(default=())

    def configs(self) -> AssignmentConfigs:
        """The assignor's configs."""
        v = self.values
        return AssignmentConfigs(
            acceptable_recovery_lag=v["acceptable_recovery_lag"],
            max_warmup_replicas=v["max_warmup_replicas"],
            num_standby_replicas=v["num_standby_replicas"],
            probing_rebalance_interval_ms=v["probing_rebalance_interval_ms"],
        )

    @property
    def changes_text(self) -> str | None:
        """Every change, ``"num_standby_replicas 1 -> 0 (override)"``, ``"; "``-separated; None when none."""
        return "; ".join(map(str, self.changes)) or None

    @property
    def unexplained_text(self) -> str | None:
        """The changes no override asked for (validation rejects the plan), or None."""
        return "; ".join(str(c) for c in self.changes if not c.explicit) or None


def resolve(reported: Mapping[str, Sequence[int]], overrides: Mapping[str, int]) -> GroupSettings:
    """One group's settings: ``reported`` holds the distinct values its fresh members report per setting (unknown
    ones left out), ``overrides`` the settings explicitly chosen for it."""
    values: dict[str, int] = {}
    sources: dict[str, SettingSource] = {}
    changes: list[SettingChange] = []
    for name, bounds in kip441_settings().items():
        own = tuple(sorted(set(reported.get(name, ()))))
        if name in overrides:
            planned, sources[name] = overrides[name], SettingSource.OVERRIDE
            if own and own != (planned,):
                changes.append(SettingChange(name, own, planned, str(SettingSource.OVERRIDE), explicit=True))
        elif own:
            chosen = own[0] if len(own) == 1 else _WHEN_MEMBERS_DISAGREE[name](own)
            planned, sources[name] = min(max(chosen, bounds.minimum), bounds.maximum), SettingSource.REPORTED
            if len(own) > 1:
                changes.append(SettingChange(name, own, planned, "members disagree", explicit=False))
            elif planned != chosen:
                why = f"beyond the planning bounds {bounds.minimum}..{bounds.maximum}"
                changes.append(SettingChange(name, own, planned, why, explicit=False))
        else:
            planned, sources[name] = bounds.default, SettingSource.DEFAULT
        values[name] = planned
    return GroupSettings(values, sources, tuple(changes))


def reported_settings(reports: DataFrame) -> dict[str, dict[str, list[int]]]:
    """group_id -> setting -> the distinct values its fresh member_reports rows hold (nulls left out)."""
    fresh = reports.where(~sf.col("stale"))
    present = set(reports.columns)
    names = [n for n in KIP441_NAMES if n in present]  # tables written before the columns existed: all unknown
    if not names:
        return {str(r["group_id"]): {} for r in fresh.select("group_id").distinct().collect()}
    # Columns through Arrow, not a Row per group: a fleet has tens of thousands of groups.
    table = fresh.groupBy("group_id").agg(*[sf.collect_set(n).alias(n) for n in names]).toArrow()
    ids = [str(g) for g in table.column("group_id").to_pylist()]
    values = [table.column(n).to_pylist() for n in names]
    return {
        group_id: {n: [int(v) for v in column[i]] for n, column in zip(names, values, strict=True) if column[i]}
        for i, group_id in enumerate(ids)
    }


def resolve_groups(reports: DataFrame, overrides: Kip441Overrides) -> dict[str, GroupSettings]:
    """Every group of ``reports`` (member_reports rows) with the settings it is planned with."""
    # A fleet's groups mostly report the same few settings: each distinct case is resolved once and its (frozen)
    # result shared.
    resolved: dict[tuple[Any, ...], GroupSettings] = {}
    groups = {}
    for group_id, own in reported_settings(reports).items():
        chosen = overrides.for_group(group_id)
        case = (tuple(sorted((n, tuple(sorted(v))) for n, v in own.items())), tuple(sorted(chosen.items())))
        if case not in resolved:
            resolved[case] = resolve(own, chosen)
        groups[group_id] = resolved[case]
    return groups


def configs_of(groups: Mapping[str, GroupSettings]) -> dict[str, AssignmentConfigs]:
    """group_id -> the assignor's configs, made once per distinct set of values."""
    made: dict[tuple[tuple[str, int], ...], AssignmentConfigs] = {}
    configs = {}
    for group_id, settings in groups.items():
        values = tuple(sorted(settings.values.items()))
        if values not in made:
            made[values] = settings.configs()
        configs[group_id] = made[values]
    return configs


SETTINGS_DDL = (
    "group_id string, acceptable_recovery_lag bigint, max_warmup_replicas int, num_standby_replicas int, "
    "probing_rebalance_interval_ms bigint, settings_sources map<string,string>, settings_changes string, "
    "settings_unexplained string"
)


def settings_frame(spark: SparkSession, groups: Mapping[str, GroupSettings]) -> DataFrame:
    """One row per group (SETTINGS_DDL): the plans columns of its settings, their sources and changes."""
    ordered = sorted(groups.items())
    columns: dict[str, list[Any]] = {"group_id": [group_id for group_id, _ in ordered]}
    columns |= {n: [s.values[n] for _, s in ordered] for n in KIP441_NAMES}
    columns["settings_sources"] = [[(n, str(src)) for n, src in s.sources.items()] for _, s in ordered]
    columns["settings_changes"] = [s.changes_text for _, s in ordered]
    columns["settings_unexplained"] = [s.unexplained_text for _, s in ordered]
    return frame_of_columns(spark, columns, SETTINGS_DDL)
