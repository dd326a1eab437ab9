"""Stage 4, validate: the Great Expectations suites of schemas/expectations on PENDING plans → VALIDATED/REJECTED."""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import great_expectations as gx
from great_expectations.checkpoint.checkpoint import Checkpoint
from great_expectations.core.expectation_suite import ExpectationSuite
from great_expectations.core.run_identifier import RunIdentifier
from great_expectations.data_context.types.base import ProgressBarsConfig
from great_expectations.data_context.types.resource_identifiers import ExpectationSuiteIdentifier
from pyspark.sql import DataFrame
from pyspark.sql import functions as sf

from jobs.lakehouse.columns import frame_of_columns
from jobs.lakehouse.engine import as_active
from jobs.lakehouse.lake import Lake, MergeOutcome, Scope, staged_copy
from jobs.lakehouse.tables import table_schema
from jobs.pipeline.buckets import GroupBucket, split_groups
from jobs.pipeline.checks import (
    assignment_checks,
    balance_checks,
    holding_facts,
    instance_task_checks,
    settings_checks,
    step_checks,
    step_task_checks,
    task_copy_checks,
)
from jobs.pipeline.data_docs_assets import localize_site
from jobs.pipeline.stage import StageResult, resolve_snapshot
from jobs.pipeline.status import PlanStatus
from jobs.pipeline.targets import target_digests
from jobs.settings import Settings
from schemas import json_files

log = logging.getLogger(__name__)
DOCS_SITE = "rebalance_planner"
# A plan's verdict, joined into its plans row.
STATUS_DDL = "plan_id string, snapshot_id string, status string, reason string, target_digest string"


@dataclass(frozen=True)
class Suite:
    """One suite file: the dataset it checks and its expectations (GX configurations, named in meta.name)."""

    name: str
    dataset: str
    expectations: tuple[Mapping[str, Any], ...]


def _substitute(value: Any, params: Mapping[str, Any]) -> Any:
    if isinstance(value, str) and value.startswith("${") and value.endswith("}"):
        return params[value[2:-1]]
    return value


def load_suites(params: Mapping[str, Any]) -> list[Suite]:
    """Every suite file (schemas/expectations), with ``${name}`` kwargs replaced from ``params``."""
    suites = []
    for path in json_files("expectations"):
        doc = json.loads(path.read_text(encoding="utf-8"))
        expectations = tuple(
            {**e, "kwargs": {k: _substitute(v, params) for k, v in e["kwargs"].items()}} for e in doc["expectations"]
        )
        suites.append(Suite(doc["name"], doc["dataset"], expectations))
    return suites


@dataclass(frozen=True)
class ExpectationOutcome:
    """One expectation over a whole dataset, and how many failing rows each plan contributed."""

    suite: str
    expectation: str
    success: bool
    unexpected_count: int
    failures_by_plan: Mapping[str, int]
    advisory: bool = False  # meta.advisory: a failure flags the plan (reason, approval page), never rejects it


class PlanValidator:
    """An ephemeral GX context with the suites registered and a Data Docs site at ``docs_dir``; ``run`` validates,
    ``build_docs`` renders what was validated since the last build."""

    def __init__(self, suites: Sequence[Suite], docs_dir: Path, assets_dir: Path) -> None:
        self.context = gx.get_context(mode="ephemeral")
        self.context.variables.progress_bars = ProgressBarsConfig(globally=False)
        docs_dir.mkdir(parents=True, exist_ok=True)
        self.context.add_data_docs_site(
            site_name=DOCS_SITE,
            site_config={
                "class_name": "SiteBuilder",
                "store_backend": {"class_name": "TupleFilesystemStoreBackend", "base_directory": str(docs_dir)},
                "site_index_builder": {"class_name": "DefaultSiteIndexBuilder"},
            },
        )
        self.docs_index = docs_dir / "index.html"
        self.assets_dir = assets_dir  # the pinned copies of what GX's pages link from CDNs (data_docs_assets)
        source = self.context.data_sources.add_spark("lake")
        self.checkpoints: dict[str, Checkpoint] = {}
        self._unrendered: list[Any] = []  # validation result ids not yet in the Data Docs
        for suite in suites:
            batch = source.add_dataframe_asset(suite.dataset).add_batch_definition_whole_dataframe("snapshot")
            gx_suite = self.context.suites.add(
                ExpectationSuite(name=suite.name, expectations=[dict(e) for e in suite.expectations])
            )
            definition = self.context.validation_definitions.add(
                gx.ValidationDefinition(name=suite.name, data=batch, suite=gx_suite)
            )
            self.checkpoints[suite.name] = self.context.checkpoints.add(
                # No UpdateDataDocsAction: it re-renders the site's index after every suite; build_docs renders
                # a bucket's pages and the index once.
                Checkpoint(
                    name=suite.name,
                    validation_definitions=[definition],
                    result_format={"result_format": "COMPLETE", "unexpected_index_column_names": ["plan_id"]},
                )
            )

    def run(self, suite: Suite, frame: DataFrame, run_name: str | None = None) -> list[ExpectationOutcome]:
        """Validate one dataset (the Data Docs name the run ``run_name``, the snapshot id); every expectation's failing
        rows are attributed to their plan_id."""
        run_id = RunIdentifier(run_name=run_name) if run_name else None
        result = self.checkpoints[suite.name].run(batch_parameters={"dataframe": frame}, run_id=run_id)
        for key, run in result.run_results.items():
            # A Spark dataframe batch's spec has no asset name, so the Data Docs would say "Data asset: None".
            spec = run.meta.get("batch_spec")
            if isinstance(spec, dict) and not spec.get("data_asset_name"):
                spec["data_asset_name"] = suite.dataset
                self.context.validation_results_store.set(key, run)
        self._unrendered.extend(result.run_results)
        outcomes = []
        for run in result.run_results.values():
            for r in run.results:
                config = r.expectation_config
                name = str((config.meta or {}).get("name") or config.type) if config else suite.name
                rows = r.result.get("unexpected_index_list") or []
                by_plan = Counter(str(row["plan_id"]) for row in rows if isinstance(row, dict))
                count = int(r.result.get("unexpected_count") or 0)
                advisory = bool((config.meta or {}).get("advisory")) if config else False
                outcomes.append(ExpectationOutcome(suite.name, name, bool(r.success), count, by_plan, advisory))
        return outcomes

    def build_docs(self) -> None:
        """Render the validation results since the last build, their suites' pages and the site's index."""
        if not self._unrendered:
            return
        suites = [ExpectationSuiteIdentifier(name=name) for name in self.checkpoints]
        self.context.build_data_docs(site_names=[DOCS_SITE], resource_identifiers=[*self._unrendered, *suites])
        localize_site(self.docs_index.parent, self.assets_dir)
        self._unrendered = []


def sources(
    lake: Lake, snapshot_id: str, pending: DataFrame, bucket: GroupBucket | None = None
) -> dict[str, DataFrame]:
    """What the datasets are computed from, for the pending plans of a snapshot (of one bucket of its groups, if
    given): the plans themselves and their assignments, tasks, member reports and task lags."""

    def read(name: str) -> DataFrame:
        frame = lake.read(name, snapshot_id)
        return frame if bucket is None else bucket.rows(frame)

    assignments = read("plan_assignments").join(pending.select("plan_id"), "plan_id", "left_semi")
    return {
        "pending": pending,
        "assignments": assignments,
        "tasks": read("group_tasks"),
        "reports": read("member_reports"),
        "lags": read("task_lags"),
    }


def datasets(inputs: Mapping[str, DataFrame], checked: DataFrame) -> dict[str, DataFrame]:
    """Every suite's dataset but plan_assignments, computed from ``sources`` and ``checked``, that dataset (K1 reads
    the facts it keeps)."""
    pending, assignments = inputs["pending"], inputs["assignments"]
    tasks, reports, lags = inputs["tasks"], inputs["reports"], inputs["lags"]
    return {
        "step_tasks": step_task_checks(assignments, tasks),
        "instance_tasks": instance_task_checks(assignments),
        "steps": step_checks(assignments, pending),
        "task_copies": task_copy_checks(checked, tasks, lags, pending),
        "plan_balance": balance_checks(assignments, pending, reports, tasks),
        "plans": pending.select("plan_id", "status", "rounds", "missing_offset_sums"),
        "plan_settings": settings_checks(pending),
    }


def rejection_reason(failed: Sequence[tuple[str, int]]) -> str:
    """The plans.reason of a rejected plan: every failed expectation with its failing row count."""
    return "failed expectations: " + ", ".join(f"{name} ({count} rows)" for name, count in failed)


def flag_reason(flags: Sequence[tuple[str, int]]) -> str:
    """The plans.reason part of advisory expectations a plan broke: flagged for the approver, not rejected."""
    return "flagged: " + ", ".join(f"{name} ({count} rows)" for name, count in flags)


@dataclass(frozen=True)
class BucketVerdicts:
    """What validating one bucket of plans wrote: its two MERGEs and how many plans passed or failed."""

    results: MergeOutcome
    plans: MergeOutcome
    validated: int
    rejected: int


class _Validation:
    """One validate run's fixed parts: the suites and, made on first use, the GX context writing Data Docs."""

    def __init__(self, lake: Lake, settings: Settings, snapshot_id: str) -> None:
        self.lake, self.settings, self.snapshot_id = lake, settings, snapshot_id
        self.suites = load_suites({})
        self._validator: PlanValidator | None = None

    @property
    def validator(self) -> PlanValidator:
        if self._validator is None:
            self._validator = PlanValidator(self.suites, self.settings.data_docs, self.settings.data_docs_assets_dir)
        return self._validator

    def bucket(self, pending: DataFrame, bucket: GroupBucket) -> BucketVerdicts | None:
        """Validate one bucket's pending plans and record them; None when it has none."""
        lake, snapshot_id = self.lake, self.snapshot_id
        pending = bucket.rows(pending)
        staging = lake.staging("validate")
        # The eight datasets share their sources: the engine keeps each source as first read (on Apache Spark
        # each Delta scan is jobs of its own over the table's log; persist() is a no-op on Sail, whose scans are
        # cheap and where writing the sources out measured slower).
        inputs = sources(lake, snapshot_id, pending, bucket)
        for frame in inputs.values():
            frame.persist()
        pending = inputs["pending"]
        try:
            # The row checks and K1 read the same joins over every assignment row: computed once, kept in the row
            # checks' dataset. (Not among the persisted sources: unpersisting a read of the staging, gone by then,
            # fails on Apache Spark.)
            facts = holding_facts(inputs["assignments"], inputs["tasks"], inputs["lags"])
            checked = assignment_checks(facts, inputs["reports"])
            # Each suite computes several metrics over its dataset: materialize the datasets once.
            frames = {"plan_assignments": staged_copy(checked, staging / "plan_assignments")}
            todo = datasets(inputs, frames["plan_assignments"])
            # What is validated is bound by its digest: approval and publish refuse a target changed since. Reading
            # the targets is mostly Python: on a thread of its own, while the engine computes the other datasets.
            with ThreadPoolExecutor(1, thread_name_prefix="validate-targets") as digesting:
                digested = digesting.submit(target_digests, frames["plan_assignments"], pending)
                frames |= {name: staged_copy(frame, staging / name) for name, frame in todo.items()}
                digests = digested.result()
            plans = [str(p) for p in frames["plans"].select("plan_id").toArrow().column("plan_id").to_pylist()]
            if not plans:
                return None
            log.info("validate %s: %s, %d pending plans", snapshot_id, bucket, len(plans))
            outcomes: list[ExpectationOutcome] = []
            for suite in self.suites:
                outcomes.extend(self.validator.run(suite, frames[suite.dataset], snapshot_id))
            self.validator.build_docs()
            # Read before the staging goes: a rejection names the setting changed without an override.
            unexplained = {
                str(r["plan_id"]): str(r["settings_unexplained"])
                for r in frames["plan_settings"].where(sf.col("settings_unexplained").isNotNull()).collect()
            }
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            for frame in inputs.values():
                frame.unpersist()
        spark = lake.spark
        # Columns, not a tuple per row: a fleet's bucket has a result per plan and expectation (160,000 at 10,000
        # groups), and building a frame from rows converts each cell in Python.
        results = frame_of_columns(
            spark, _result_columns(plans, snapshot_id, outcomes), table_schema("validation_results").ddl
        )
        statuses = _status_columns(plans, snapshot_id, outcomes, unexplained, digests)
        status_frame = frame_of_columns(spark, statuses, STATUS_DDL)
        rejected = statuses["status"].count(PlanStatus.REJECTED)
        updates = (
            bucket.rows(lake.read("plans", snapshot_id))
            .drop("status", "reason", "target_digest")
            .join(status_frame.drop("snapshot_id"), "plan_id")
        )
        return BucketVerdicts(
            # validation_results has no group_id: its part of the snapshot is all this run can narrow it to.
            lake.merge("validation_results", results, within=Scope(snapshot_id)),
            lake.merge("plans", updates, update=["status", "reason", "target_digest"], within=bucket.scope),
            len(plans) - rejected,
            rejected,
        )


def _result_columns(
    plans: Sequence[str], snapshot_id: str, outcomes: Sequence[ExpectationOutcome]
) -> dict[str, list[Any]]:
    """validation_results' columns: one row per plan and expectation, with that plan's failing row count."""
    counts = [o.failures_by_plan.get(plan_id, 0) for plan_id in plans for o in outcomes]
    rows = len(counts)
    return {
        "plan_id": [plan_id for plan_id in plans for _ in outcomes],
        "snapshot_id": [snapshot_id] * rows,
        "suite": [o.suite for _ in plans for o in outcomes],
        "expectation": [o.expectation for _ in plans for o in outcomes],
        "success": [count == 0 for count in counts],
        "unexpected_count": counts,
        "validated_at": [int(time.time() * 1000)] * rows,
    }


def _status_columns(
    plans: Sequence[str],
    snapshot_id: str,
    outcomes: Sequence[ExpectationOutcome],
    unexplained: Mapping[str, str],
    digests: Mapping[str, str],
) -> dict[str, list[Any]]:
    """STATUS_DDL's columns: each plan VALIDATED, or REJECTED naming the expectations it failed (and the setting
    changed without an override); advisory failures flagged in the reason either way."""
    columns: dict[str, list[Any]] = {"plan_id": [], "snapshot_id": [], "status": [], "reason": [], "target_digest": []}
    for plan_id in plans:
        broke = [o for o in outcomes if o.failures_by_plan.get(plan_id)]
        failed = [(o.expectation, o.failures_by_plan[plan_id]) for o in broke if not o.advisory]
        flags = [(o.expectation, o.failures_by_plan[plan_id]) for o in broke if o.advisory]
        status, reason = (PlanStatus.REJECTED, rejection_reason(failed)) if failed else (PlanStatus.VALIDATED, None)
        if failed and plan_id in unexplained:  # name the setting, not only the expectation
            reason = f"{reason}; settings changed without an override: {unexplained[plan_id]}"
        if flags:
            reason = "; ".join(filter(None, [reason, flag_reason(flags)]))
        columns["plan_id"].append(plan_id)
        columns["snapshot_id"].append(snapshot_id)
        columns["status"].append(str(status))
        columns["reason"].append(reason)
        columns["target_digest"].append(digests.get(plan_id))
    return columns


def run_validate(
    lake: Lake, settings: Settings, snapshot_id: str | None = None, plan_ids: Sequence[str] = ()
) -> StageResult:
    """Validate the snapshot's PENDING plans (or the given ones), ``settings.stage_bucket_groups`` groups at a
    time; record every outcome; set VALIDATED/REJECTED. A run cut short leaves the buckets it finished done."""
    snapshot_id = resolve_snapshot(lake, snapshot_id)
    pending = lake.read("plans", snapshot_id).where(sf.col("status") == PlanStatus.PENDING)
    if plan_ids:
        pending = pending.where(sf.col("plan_id").isin(list(plan_ids)))
    groups = [str(r["group_id"]) for r in pending.select("group_id").distinct().collect()]
    if not groups:
        log.info("validate %s: no PENDING plans", snapshot_id)
        return StageResult("validate", snapshot_id)
    buckets = split_groups(snapshot_id, groups, settings.stage_bucket_groups)
    log.info("validate %s: %d pending plans in %d bucket(s)", snapshot_id, len(groups), len(buckets))
    validation = _Validation(lake, settings, snapshot_id)
    verdicts: list[BucketVerdicts] = []
    # GX finds its session with getOrCreate(): make it the lake's, whatever else this process has opened.
    with as_active(lake.spark):
        for bucket in buckets:
            done = validation.bucket(pending, bucket)
            if done is not None:
                verdicts.append(done)
    if not verdicts:
        log.info("validate %s: no PENDING plans", snapshot_id)
        return StageResult("validate", snapshot_id)
    validated, rejected = sum(v.validated for v in verdicts), sum(v.rejected for v in verdicts)
    outcomes = (
        MergeOutcome.total("validation_results", [v.results for v in verdicts], lake.version("validation_results")),
        MergeOutcome.total("plans", [v.plans for v in verdicts], lake.version("plans")),
    )
    log.info(
        "validate %s: %d validated, %d rejected; data docs %s",
        snapshot_id,
        validated,
        rejected,
        validation.validator.docs_index,
    )
    return StageResult("validate", snapshot_id, outcomes, {"validated": validated, "rejected": rejected})
