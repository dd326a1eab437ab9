"""The suite's xdist groups: every test runs on one worker with the rest of its group (its module, or the group its
``xdist_group`` mark names), and groups are handed out longest first.

pytest-xdist 3.8's own ``--dist loadgroup`` does not group on pytest 9.2 (it renames node ids through an attribute
pytest 9.2 no longer reads: pytest-xdist#1386, tests silently spread one by one), and it would group unmarked tests
not by module but one by one. So each worker writes the groups of what it collected to a file the controller's
scheduler reads (xdist's controller never collects): node ids stay as they are."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling

# Seconds per test module of a whole CI run (`python -m tests.support.durations JUNIT --write`): the order in which
# the groups are handed out. A module not in it counts as its tier's typical module.
DURATIONS = Path(__file__).resolve().parents[1] / "durations.json"
TIER_SECONDS = {"unit": 2.0, "integration": 20.0, "system": 60.0}
GROUPS_FILE = "rbp_xdist_groups"  # the workerinput key: where a worker writes node id -> group


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def group_of(item: pytest.Item) -> str:
    """The test's group: its ``xdist_group`` mark's name, else its module (module-scoped fixtures start once)."""
    marker = item.get_closest_marker("xdist_group")
    if marker is None:
        return module_of(item.nodeid)
    return str(marker.args[0] if marker.args else marker.kwargs.get("name", "default"))


def expected_seconds(module: str, durations: dict[str, float]) -> float:
    """A module's seconds in the measured run, else its tier's typical module's."""
    if module in durations:
        return durations[module]
    parts = module.split("/")
    return TIER_SECONDS.get(parts[1] if len(parts) > 2 else "", TIER_SECONDS["integration"])


def longest_first(items: list[pytest.Item]) -> dict[str, str]:
    """Reorder ``items`` group by group, the longest expected group first (keeping each group's own order: pytest's
    grouping by parametrized fixtures); node id -> group."""
    durations = json.loads(DURATIONS.read_text(encoding="utf-8")) if DURATIONS.is_file() else {}
    groups: dict[str, list[pytest.Item]] = {}
    modules: dict[str, set[str]] = {}
    for item in items:
        group = group_of(item)
        groups.setdefault(group, []).append(item)
        modules.setdefault(group, set()).add(module_of(item.nodeid))
    weight = {g: sum(expected_seconds(m, durations) for m in ms) for g, ms in modules.items()}
    order = sorted(groups, key=lambda g: -weight[g])  # stable: equal weights keep collection order
    items[:] = [item for group in order for item in groups[group]]
    return {item.nodeid: group for group in order for item in groups[group]}


class WorkerGroups:
    """Worker side: orders the collection longest group first and writes each test's group for the controller."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @pytest.hookimpl(trylast=True)  # after pytest's own reordering by parametrized fixtures, kept within each group
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        groups = longest_first(items)
        partial = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        partial.write_text(json.dumps(groups), encoding="utf-8")
        partial.replace(self.path)  # the controller reads a whole file or none


class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]  # xdist ships no type hints (no py.typed)
    """xdist's scope scheduling with our groups as the scopes: a group's tests go to one worker; the groups in the
    workers' collection order (longest first), each to whichever worker runs short of work first: longest-
    processing-time-first list scheduling."""

    def __init__(self, config: pytest.Config, log: Producer | None, groups_dir: Path) -> None:
        super().__init__(config, log)
        config.option.loadscopereorder = False  # xdist's reorder (by test count) would undo the longest-first order
        self._groups_dir = groups_dir
        self._groups: dict[str, str] | None = None

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:
            # Every worker wrote its file before it reported its collection; they collected the same tests.
            written = sorted(self._groups_dir.glob("*.json"))
            self._groups = json.loads(written[0].read_text(encoding="utf-8")) if written else {}
        return self._groups.get(nodeid, module_of(nodeid))


def worker_input(groups_dir: Path, worker_id: str) -> dict[str, Any]:
    """What the controller tells a worker: where to write its groups."""
    return {GROUPS_FILE: str(groups_dir / f"{worker_id}.json")}
