"""The pipeline's stages, each registered once: what the CLI builds its subcommands from and Airflow dispatches through.

Light to import (the CLI reads it at start): a stage's module, with Spark, Delta or Great Expectations behind it,
loads only when the stage runs.
"""
# ruff: noqa: PLC0415 -- each runner imports its stage's module when it runs (validate's GX alone takes seconds)

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jobs.settings import Settings

if TYPE_CHECKING:
    from jobs.lakehouse.lake import Lake
    from jobs.pipeline.approval_record import ApprovalRecord, ApprovedDigest
    from jobs.pipeline.stage import StageResult


@dataclass(frozen=True)
class Argument:
    """One command-line option of a stage, as argparse takes it (``--plan-id`` fills StageRequest.plan_ids)."""

    flag: str
    help: str
    action: str = "store"
    type: Callable[[str], Any] | None = None


@dataclass(frozen=True)
class StageRequest:
    """What one run of a stage is given, by the CLI's arguments or an Airflow task."""

    settings: Settings
    bootstrap: str | None = None
    snapshot_id: str | None = None
    plan_ids: tuple[str, ...] = ()
    by: str | None = None
    reject: bool = False
    reason: str | None = None
    drains: tuple[str, ...] = ()  # "<group_id>/<process_id>", see drain_requests
    # approve: the digests the approval page showed (Airflow); publish: what was approved (Airflow's XCom), else
    # the approval files named (--approval), else every file in RBP_APPROVALS_DIR.
    offered: Mapping[str, ApprovedDigest] | None = None
    approvals: tuple[ApprovalRecord, ...] | None = None
    approval_files: tuple[str, ...] = ()
    at: int | None = None  # approve: when the person answered (ms; Airflow's record of the answer); unset: now
    follow_s: float = 0.0  # observe: repeat for this long (streams groups' steps between epochs)

    def kafka(self) -> str:
        """The bootstrap of a stage that needs Kafka (callers check first, with advice on where to set it)."""
        if not self.bootstrap:
            from jobs.pipeline.stage import StageInputError

            raise StageInputError("no Kafka bootstrap")
        return self.bootstrap


@dataclass(frozen=True)
class Stage:
    """A pipeline stage: its name (CLI subcommand), what it does, how to run it and what it takes.

    ``retried``: a part that did not answer (StageUnavailable, Kafka, Spark) makes its Airflow task retry later;
    otherwise every failure fails the task at once.
    """

    name: str
    help: str
    run: Callable[[Lake, StageRequest], StageResult]
    arguments: tuple[Argument, ...] = ()
    needs_kafka: bool = False
    retried: bool = True

    def execute(self, lake: Lake, request: StageRequest) -> StageResult:
        """Run the stage holding the lake's writer lock: one stage writes a lake at a time (StageUnavailable, so
        retried later, when another holds it for longer than the settings' wait)."""
        from jobs.lakehouse.writer_lock import LakeBusy, writer_lock
        from jobs.pipeline.stage import StageUnavailable

        try:
            with writer_lock(lake.root, self.name, request.settings.lake_lock_timeout_s):
                lake.clear_staging()  # what a stage killed mid-write left: nobody else is writing now
                return self.run(lake, request)
        except LakeBusy as err:
            raise StageUnavailable(str(err)) from err


def _snapshot(default: str) -> Argument:
    return Argument("--snapshot-id", f"snapshot (default: {default})")


LATEST = _snapshot("the latest")
PLAN_IDS = Argument("--plan-id", "a plan id (repeatable)", action="append")
BOOTSTRAP = Argument("--bootstrap", "Kafka bootstrap servers (default: RBP_KAFKA_BOOTSTRAP)")


def _extract(lake: Lake, r: StageRequest) -> StageResult:
    from jobs.pipeline.extract import run_extract

    return run_extract(lake, r.settings, r.kafka(), r.snapshot_id)


def _lags(lake: Lake, r: StageRequest) -> StageResult:
    from jobs.pipeline.lags import run_lags

    return run_lags(lake, r.settings, r.snapshot_id)


def drain_requests(values: Sequence[str]) -> dict[str, frozenset[str]]:
    """group_id -> processes to drain, from "<group_id>/<process_id>" values (the process id is after the last
    slash: group ids may hold slashes); StageInputError naming a malformed value."""
    from jobs.pipeline.stage import StageInputError

    drains: dict[str, set[str]] = {}
    for value in values:
        group_id, _, process_id = value.rpartition("/")
        if not group_id or not process_id:
            raise StageInputError(f"--drain {value!r}: expected GROUP/PROCESS, e.g. orders/3f1c-a2")
        drains.setdefault(group_id, set()).add(process_id)
    return {group_id: frozenset(pids) for group_id, pids in drains.items()}


def _plan(lake: Lake, r: StageRequest) -> StageResult:
    from jobs.pipeline.plan import run_plan

    return run_plan(lake, r.settings, r.snapshot_id, drains=drain_requests(r.drains))


def _baselines(lake: Lake, r: StageRequest) -> StageResult:
    from jobs.pipeline.baselines import run_baselines

    return run_baselines(lake, r.settings, r.snapshot_id)


def _validate(lake: Lake, r: StageRequest) -> StageResult:
    from jobs.pipeline.validate import run_validate

    return run_validate(lake, r.settings, r.snapshot_id, list(r.plan_ids))


def _approve(lake: Lake, r: StageRequest) -> StageResult:
    from jobs.pipeline.approve import run_approve
    from jobs.pipeline.stage import StageInputError

    if not r.by:
        raise StageInputError("approve needs who decides (--by)")
    return run_approve(
        lake,
        r.settings,
        by=r.by,
        plan_ids=list(r.plan_ids),
        snapshot_id=r.snapshot_id,
        reject=r.reject,
        reason=r.reason,
        offered=r.offered,
        at=r.at,
    )


def _publish(lake: Lake, r: StageRequest) -> StageResult:
    from pathlib import Path

    from jobs.pipeline import approval_files
    from jobs.pipeline.publish import run_publish

    approvals = r.approvals
    if approvals is None and r.approval_files:
        approvals = tuple(approval_files.load(Path(f)) for f in r.approval_files)
    return run_publish(
        lake, r.settings, r.kafka(), snapshot_id=r.snapshot_id, plan_ids=list(r.plan_ids), approvals=approvals
    )


def _observe(lake: Lake, r: StageRequest) -> StageResult:
    from jobs.pipeline.observe import follow_observe, run_observe

    if r.follow_s > 0:
        return follow_observe(lake, r.settings, r.kafka(), r.follow_s)
    return run_observe(lake, r.settings, r.kafka())


def _follow_seconds(text: str) -> float:
    """``--follow``: seconds, 1 to 86,400 (a day; the lake's writer lock is held meanwhile)."""
    import argparse

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text[:20]!r}") from None
    if not 1 <= value <= 86_400:
        raise argparse.ArgumentTypeError("--follow takes 1 to 86400 seconds")
    return value


_ALL = (
    Stage(
        "extract",
        "read reports, the broker's group members, changelog end offsets and committed offsets into a new "
        "bronze snapshot; reports are checked against the members",
        _extract,
        (_snapshot("a new one"), BOOTSTRAP),
        needs_kafka=True,
    ),
    Stage("lags", "compute per-task lags of a snapshot (task_lags)", _lags, (LATEST,)),
    Stage(
        "plan",
        "plan every group of a snapshot in parallel (plans, plan_assignments)",
        _plan,
        (
            LATEST,
            Argument(
                "--drain",
                "GROUP/PROCESS to drain before it is stopped (repeatable): its tasks warm up elsewhere and move",
                action="append",
            ),
        ),
    ),
    Stage(
        "baselines",
        "replay Kafka's assignors (KIP-441, broker-side) on every planned group (plan_baselines)",
        _baselines,
        (LATEST,),
    ),
    Stage(
        "validate",
        "run the Great Expectations suites on PENDING plans; write Data Docs",
        _validate,
        (LATEST, PLAN_IDS),
    ),
    Stage(
        "approve",
        "approve (or --reject) VALIDATED plans, recording who and when",
        _approve,
        (
            LATEST,
            PLAN_IDS,
            Argument("--by", "who decides (default: the current user)"),
            Argument("--reject", "reject instead of approve", action="store_true"),
            Argument("--reason", "why (recorded on the plan)"),
        ),
    ),
    Stage(
        "publish",
        "sign the APPROVED plans an approval record lists, as approved, and publish them to the plans topic",
        _publish,
        (
            LATEST,
            PLAN_IDS,
            BOOTSTRAP,
            Argument(
                "--approval",
                "approval record file written by approve (repeatable; default: every one in RBP_APPROVALS_DIR)",
                action="append",
            ),
        ),
        needs_kafka=True,
    ),
    Stage(
        "observe",
        "record the live assignment from the latest reports; mark realized, expired and withdrawn plans and "
        "record fallbacks",
        _observe,
        (
            BOOTSTRAP,
            Argument(
                "--follow",
                "repeat for SECONDS, triggering streams groups' plan steps as their warm-ups catch up",
                type=_follow_seconds,
            ),
        ),
        needs_kafka=True,
    ),
)
STAGES: Mapping[str, Stage] = {s.name: s for s in _ALL}


def stage(name: str) -> Stage:
    """The registered stage; KeyError naming the known ones."""
    try:
        return STAGES[name]
    except KeyError:
        raise KeyError(f"no stage {name!r}; the stages are {', '.join(STAGES)}") from None


def request_from(values: Mapping[str, Any], settings: Settings, bootstrap: str | None) -> StageRequest:
    """A request from parsed options named as the arguments' dests (absent options keep their defaults)."""
    return StageRequest(
        settings=settings,
        bootstrap=bootstrap,
        snapshot_id=values.get("snapshot_id"),
        plan_ids=tuple(values.get("plan_id") or ()),
        by=values.get("by"),
        reject=bool(values.get("reject")),
        reason=values.get("reason"),
        drains=tuple(values.get("drain") or ()),
        approval_files=tuple(values.get("approval") or ()),
        follow_s=float(values.get("follow") or 0.0),
    )
