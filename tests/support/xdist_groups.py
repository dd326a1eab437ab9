"""The suite's xdist groups: every test runs on one worker with the rest of its group (its module, or the group its
``xdist_group`` mark names), and groups are handed out longest first.

pytest-xdist 3.8's own ``--dist loadgroup`` does not group on pytest 9.2 (it renames node ids through an attribute
pytest 9.2 no longer reads: pytest-xdist#1386, tests silently spread one by one), and it would group unmarked tests
not by module but one by one. So each worker writes the groups of what it collected to a file the controller's
scheduler reads (xdist's controller never collects): node ids stay as they are. A worker that dies fails the test
it died in; the rest of its group goes on on its replacement (``GroupScheduling.remove_node``); SIGINT and SIGTERM end
the run with its summary (``honour_stop_signals``)."""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import tempfile
from collections.abc import Generator, Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from xdist.remote import Producer
from xdist.report import report_collection_diff
from xdist.scheduler import LoadScopeScheduling
from xdist.workermanage import WorkerController

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
    processing-time-first list scheduling. A dead worker's group goes on, without the test it died in, on its
    replacement (xdist 3.8's own scope scheduling hangs or loops there: see ``remove_node``)."""

    def __init__(self, config: pytest.Config, log: Producer | None, groups_dir: Path) -> None:
        super().__init__(config, log)
        config.option.loadscopereorder = False  # xdist's reorder (by test count) would undo the longest-first order
        self._groups_dir = groups_dir
        self._groups: dict[str, str] | None = None
        self.crashes: list[tuple[str, str]] = []  # (worker id, node id of the test it died in), in order
        self._unsent: dict[WorkerController, set[str]] = {}  # groups given to a worker already dead: never received
        self._first_id = ""  # the first worker whose collection came in: the one a replacement's is compared with

    def _split_scope(self, nodeid: str) -> str:
        if self._groups is None:
            # A worker writes its file before it reports its collection, and every worker collects the same tests:
            # any registered worker's file will do, even if that worker has died since (its file stays).
            node = next(iter(self.registered_collections))
            written = self._groups_dir / f"{node.gateway.id}.json"
            self._groups = json.loads(written.read_text(encoding="utf-8")) if written.is_file() else {}
        return self._groups.get(nodeid, module_of(nodeid))

    @property
    def collection_is_completed(self) -> bool:
        """The first time: every worker started has collected; later: every live worker has (a replacement gets work
        only once its collection is in, and a dead worker's collection no longer counts)."""
        if self.collection is None:
            return bool(len(self.registered_collections) >= self.numnodes)
        return all(node in self.registered_collections for node in self.assigned_work)

    def add_node_collection(self, node: WorkerController, collection: Sequence[str]) -> None:
        """A replacement's collection may come in any order (work goes out by each worker's own indices), but it must
        hold the same tests; a worker that collected other tests gets none and is shut down, with a collection error."""
        if self.collection is not None and set(collection) != set(self.collection):
            message = report_collection_diff(self.collection, list(collection), self._first_id, node.gateway.id)
            self.config.hook.pytest_collectreport(
                report=pytest.CollectReport(nodeid=node.gateway.id, outcome="failed", longrepr=message, result=[])
            )
            node.shutdown()
            return
        self.registered_collections[node] = list(collection)
        self._first_id = self._first_id or node.gateway.id

    def remove_node(self, node: WorkerController) -> str | None:
        """A worker is gone, at its end or dead: then the test it died in (its first not complete) goes back to xdist,
        which reports it failed, and the rest of its groups go first in the queue, for its replacement."""
        # xdist 3.8 puts a dead worker's whole workload back, completed groups included: such a group later goes out
        # as an empty `runtests` that never completes, so that worker never asks for more nor is shut down, and the
        # run hangs at its end (pytest-xdist#1323, #1378). It also runs the test that took the worker down again, on
        # each replacement in turn, until --max-worker-restart is spent (#1371).
        workload = self.assigned_work.pop(node)
        self.registered_collections.pop(node, None)  # its replacement registers its own
        unsent = self._unsent.pop(node, set())
        left = {scope: [nodeid for nodeid, done in unit.items() if not done] for scope, unit in workload.items()}
        left = {scope: ids for scope, ids in left.items() if ids}
        if not left:
            return None
        crashitem: str | None = None
        started = [scope for scope in left if scope not in unsent]  # in the order the worker runs them
        if started:
            crashitem = left[started[0]].pop(0)
            self.crashes.append((node.gateway.id, crashitem))
        # First in the queue: these groups were the longest waiting when they started, and restart their fixtures.
        for scope, ids in reversed(left.items()):
            if ids:
                self.workqueue[scope] = dict.fromkeys(ids, False)
                self.workqueue.move_to_end(scope, last=False)
        for other in list(self.assigned_work):
            self._reschedule(other)
        return crashitem

    def _assign_work_unit(self, node: WorkerController) -> None:
        try:
            super()._assign_work_unit(node)
        except OSError:
            # The worker died after it sent the event being handled (its pipe is closed): its `errordown`, queued
            # behind, puts this group back, as one it never received (it did not die in it).
            self._unsent.setdefault(node, set()).add(next(reversed(self.assigned_work[node])))

    def _reschedule(self, node: WorkerController) -> None:
        """Give ``node`` a group when it runs short, enough that it can run what it has (a worker runs a test only once
        it knows the next one, or that there is none), and shut it down as soon as no group is left to give."""
        if node.shutting_down or node not in self.registered_collections:
            return  # a replacement gets work once it has collected (``schedule``)
        if self.workqueue and self._pending_of(self.assigned_work[node]) <= 2:
            self._assign_work_unit(node)
        while self.workqueue and self._pending_of(self.assigned_work[node]) < 2:
            self._assign_work_unit(node)
        if not self.workqueue:
            node.shutdown()

    def not_run(self) -> list[str]:
        """Tests still waiting in the queue: what no worker was left to run."""
        return [nodeid for unit in self.workqueue.values() for nodeid, done in unit.items() if not done]


def worker_input(groups_dir: Path, worker_id: str) -> dict[str, Any]:
    """What the controller tells a worker: where to write its groups."""
    return {GROUPS_FILE: str(groups_dir / f"{worker_id}.json")}


class ControllerGroups:
    """Controller side: tells each worker where to write its groups, schedules them, and fails by name the tests a
    crash left unrun (when ``--max-worker-restart`` allowed no replacement to run them)."""

    def __init__(self, groups_dir: Path) -> None:
        self.groups_dir = groups_dir
        self.scheduler: GroupScheduling | None = None

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: WorkerController) -> None:
        node.workerinput.update(worker_input(self.groups_dir, node.gateway.id))

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Producer) -> GroupScheduling:
        self.scheduler = GroupScheduling(config, log, self.groups_dir)
        return self.scheduler

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Generator[None, object, object]:
        try:
            result = yield
        except RuntimeError:
            # xdist's "Unexpectedly no active workers available": after a death, no worker is left to take what the
            # dead one left (its replacement collected other tests). Those tests fail by name and the run ends as a
            # failed one, with every section of its summary (an internal error would print only the counts).
            if not self._report_not_run(session):
                raise
            return True
        self._report_not_run(session)
        return result

    def _report_not_run(self, session: pytest.Session) -> int:
        """Fail by name each test a crash left in the queue; how many."""
        if self.scheduler is None or not self.scheduler.crashes:
            return 0
        crashes = ", ".join(f"{worker} in {nodeid}" for worker, nodeid in self.scheduler.crashes)
        for nodeid in self.scheduler.not_run():
            path = module_of(nodeid)
            report = pytest.TestReport(
                nodeid=nodeid,
                location=(path, None, nodeid.rsplit("::", 1)[-1]),
                keywords={},
                outcome="failed",
                longrepr=f"not run: a worker died ({crashes}) and no worker was left to run it",
                when="call",
            )
            session.config.hook.pytest_runtest_logreport(report=report)
        return len(self.scheduler.not_run())

    def pytest_unconfigure(self) -> None:
        shutil.rmtree(self.groups_dir, ignore_errors=True)


class Terminated(KeyboardInterrupt):
    """SIGTERM, taken as Ctrl-C: pytest stops the run and still prints its summary."""


def _terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated(f"signal {signal.Signals(signum).name}")


def honour_stop_signals(config: pytest.Config, *, terminate: bool) -> None:
    """Let SIGINT (and SIGTERM if ``terminate``) end the run as Ctrl-C does, with its summary, however pytest was
    started; the handlers in place before come back at the end."""
    # A script's background job (`make test &`) starts with SIGINT ignored, and Python leaves it ignored: `kill -INT`
    # then does nothing. SIGTERM (a CI timeout, `kill`) ends a process at once, with no summary.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        config.add_cleanup(functools.partial(_restore, signal.SIGINT, signal.SIG_IGN))
    if terminate and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminated)
        config.add_cleanup(functools.partial(_restore, signal.SIGTERM, signal.SIG_DFL))


def _restore(sig: signal.Signals, handler: signal.Handlers) -> None:
    signal.signal(sig, handler)


def install(config: pytest.Config) -> None:
    """Group the tests when xdist runs them with ``--dist loadgroup``: in a worker, write its tests' groups; in the
    controller, schedule them and honour stop signals (called from the suite's ``pytest_configure``)."""
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        if GROUPS_FILE in workerinput:
            config.pluginmanager.register(WorkerGroups(Path(workerinput[GROUPS_FILE])), "rbp-xdist-groups")
        return
    controller = bool(config.getoption("numprocesses", None))
    # SIGTERM only where no test runs (the xdist controller): code under test may count on its default.
    honour_stop_signals(config, terminate=controller)
    if controller and config.getoption("dist", "no") == "loadgroup":
        groups_dir = Path(tempfile.mkdtemp(prefix="rbp-xdist-groups-"))
        config.pluginmanager.register(ControllerGroups(groups_dir), "rbp-xdist-groups")
