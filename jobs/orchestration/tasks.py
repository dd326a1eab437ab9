"""What the Airflow tasks of dags/ run: settings from params and Connections, one stage per task, the review.

Imported inside the running tasks (never at DAG parse time), so it may import Spark and the stages.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from airflow.configuration import conf
from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowFailException, AirflowNotFoundException
from confluent_kafka import KafkaException
from pyspark.errors import PySparkException
from pyspark.sql import functions as sf

from assignor.runtime.kafka_io import TopicReadError
from jobs.lakehouse.engine import EngineError, spark_session
from jobs.lakehouse.lake import Lake
from jobs.orchestration.airflow_api import approval_answer
from jobs.orchestration.confirmation import answered_at_ms, confirmed_approval, offered_entries
from jobs.orchestration.decision import DecisionError, decision, duration, in_filter
from jobs.pipeline import registry
from jobs.pipeline.approval_record import ApprovalRecord, ApprovalRecordError, ApprovedDigest
from jobs.pipeline.plan_bodies import plan_bodies
from jobs.pipeline.stage import StageInputError, StageResult, StageUnavailable, resolve_snapshot
from jobs.pipeline.status import PlanStatus
from jobs.processes import main_script_hidden
from jobs.report import build_report, report_path, write_report
from jobs.report.approval import approval_body, approval_subject
from jobs.report.decide_page import refresh_decision_page, write_decision_page
from jobs.report.links import data_docs_url, decide_url, report_url
from jobs.settings import Settings

log = logging.getLogger(__name__)
KAFKA_CONN_ID = "rbp_kafka"
SPARK_CONN_ID = "rbp_spark_connect"
T = TypeVar("T")


class TaskFailed(AirflowFailException):
    """A failure a retry cannot fix (bad input, a wrong answer): the task fails at once, without retries."""


@dataclass(frozen=True)
class Runtime:
    """Where a task's stages run: the settings, the Kafka bootstrap and the Spark Connect URL (None: Sail)."""

    settings: Settings
    bootstrap: str | None
    spark_remote: str | None


def _connection(conn_id: str) -> Any | None:
    """The Airflow Connection, or None when it is not defined (then the RBP_ settings apply)."""
    try:
        return BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return None


def kafka_from_connection(extra: Mapping[str, Any]) -> tuple[str | None, dict[str, str]]:
    """(bootstrap, extra client properties) from a Kafka Connection's extra, as the Kafka provider stores it."""
    properties = {str(k): str(v) for k, v in extra.items()}
    return properties.pop("bootstrap.servers", None), properties


def spark_url(host: str | None, port: int | None, extra: Mapping[str, Any]) -> str | None:
    """``sc://host:port[/;params]`` from a Spark Connect Connection (host may already be a full sc:// URL)."""
    if not host:
        return None
    if host.startswith("sc://"):
        return host
    params = ";".join(f"{k}={v}" for k, v in sorted(extra.items()) if k in ("token", "use_ssl", "user_id"))
    return f"sc://{host}:{port or 15002}" + (f"/;{params}" if params else "")


def runtime(params: Mapping[str, Any] | None = None) -> Runtime:
    """Settings for one task: RBP_ environment, then Airflow Connections, then the run's KIP-441 params (explicit
    fleet-wide overrides)."""
    settings = Settings()
    settings = settings.model_copy(update={"kip441_overrides": settings.kip441_overrides.with_fleet(params or {})})
    bootstrap, remote = settings.kafka_bootstrap, settings.spark_remote or None
    kafka = _connection(KAFKA_CONN_ID)
    if kafka is not None:
        conn_bootstrap, properties = kafka_from_connection(kafka.extra_dejson)
        bootstrap = conn_bootstrap or bootstrap
        settings = settings.model_copy(update={"kafka_bootstrap": bootstrap, "kafka_config": properties})
    spark = _connection(SPARK_CONN_ID)
    if spark is not None:
        remote = spark_url(spark.host, spark.port, spark.extra_dejson) or remote
    return Runtime(settings, bootstrap, remote)


def snapshot_id_for(dag_id: str, run_id: str, run_after: datetime) -> str:
    """One snapshot per DAG run, the same on every retry: the run's time plus a digest of its id."""
    digest = hashlib.sha1(f"{dag_id}/{run_id}".encode()).hexdigest()[:6]
    return run_after.strftime("%Y%m%dT%H%M%SZ") + "-" + digest


RETRYABLE: tuple[type[BaseException], ...] = (
    StageUnavailable,  # e.g. BrokerUnreachable: the stage's own bounded retries ran out
    TopicReadError,
    KafkaException,
    PySparkException,
    EngineError,
    ConnectionError,
    TimeoutError,
    OSError,
)


def retryable(err: BaseException) -> bool:
    """By the error's type: a part that did not answer (Kafka, Spark, the network) may answer later, so Airflow
    retries the task with backoff; anything else (bad input, a bug) fails the task at once."""
    return isinstance(err, RETRYABLE)


@contextmanager
def _lake(rt: Runtime) -> Iterator[Lake]:
    with spark_session(rt.spark_remote) as spark:
        yield Lake(spark, rt.settings.lake_root)


def run_stage(name: str, rt: Runtime, body: Callable[[Lake], T]) -> T:
    """Run one task's work on a fresh session; bad input raises TaskFailed (no retry); Kafka/Spark errors propagate
    for Airflow to retry, unless the registered stage of that name is not retried."""
    logging.getLogger("jobs").setLevel(logging.INFO)
    retried = registry.STAGES[name].retried if name in registry.STAGES else True
    try:
        with _lake(rt) as lake:
            return body(lake)
    except (StageInputError, DecisionError) as err:
        raise TaskFailed(f"{name}: {err}") from err
    except Exception as err:
        if retried and retryable(err):
            raise
        raise TaskFailed(f"{name}: {type(err).__name__}: {err}") from err


def dispatch(name: str, rt: Runtime, lake: Lake, **options: Any) -> StageResult:
    """Run the registered stage ``name`` on ``lake``; ``options`` are StageRequest fields (snapshot_id, plan_ids...)."""
    stage = registry.stage(name)
    if stage.needs_kafka and not rt.bootstrap:
        raise StageInputError(f"no Kafka bootstrap: define the {KAFKA_CONN_ID} Connection or set RBP_KAFKA_BOOTSTRAP")
    result = stage.execute(lake, registry.StageRequest(rt.settings, rt.bootstrap, **options))
    log.info("%s %s: %s", result.stage, result.snapshot_id or "-", dict(result.counts) or "nothing new")
    return result


def extract(rt: Runtime, snapshot_id: str) -> str:
    """Stage 1 for the run's snapshot; returns the snapshot id."""
    return str(
        run_stage("extract", rt, lambda lake: dispatch("extract", rt, lake, snapshot_id=snapshot_id)).snapshot_id
    )


def lags(rt: Runtime, snapshot_id: str) -> str:
    run_stage("lags", rt, lambda lake: dispatch("lags", rt, lake, snapshot_id=snapshot_id))
    return snapshot_id


def plan(rt: Runtime, snapshot_id: str, drains: Sequence[str] = ()) -> str:
    """Plan the snapshot, draining the given "group/process" instances, then replay Kafka's assignors beside it."""
    with main_script_hidden():  # the planner's spawned workers must not re-run Airflow's task runner
        run_stage("plan", rt, lambda lake: dispatch("plan", rt, lake, snapshot_id=snapshot_id, drains=tuple(drains)))
        # The plans' comparison with Kafka's own assignors, for the review; part of planning, not a gate.
        run_stage("baselines", rt, lambda lake: dispatch("baselines", rt, lake, snapshot_id=snapshot_id))
    return snapshot_id


def validate(rt: Runtime, snapshot_id: str) -> str:
    run_stage("validate", rt, lambda lake: dispatch("validate", rt, lake, snapshot_id=snapshot_id))
    return snapshot_id


def _links(rt: Runtime, snapshot_id: str, report: Path, run: tuple[str, str] | None) -> tuple[str, str, str]:
    """(decision page, report, Data Docs) as Markdown links: served by the rebalance_reports plugin under Airflow's
    base URL, with the file paths for a reader outside Airflow."""
    docs = rt.settings.data_docs / "index.html"
    base = conf.get("api", "base_url", fallback="") or ""
    if not base:
        return "", f"`{report}`", f"`{docs}`"
    decide = f"[**Decide on the decision page**]({decide_url(base, *run)})" if run else ""
    return (
        decide,
        f"[open the report]({report_url(base, snapshot_id)}) (file: `{report}`)",
        f"[open the Data Docs]({data_docs_url(base)}) (file: `{docs}`)",
    )


def _refresh_report(lake: Lake, snapshot_id: str) -> None:
    """Write the snapshot's report again so its statuses are the lake's now (approved, published, realized)."""
    try:
        report = build_report(lake, resolve_snapshot(lake, snapshot_id))  # read from the lake once for both pages
        path = write_report(report, report_path(lake, snapshot_id))
        # The decision page too, if review wrote one: once observed, each group's estimate beside what happened.
        refresh_decision_page(report, path.parent)
    except StageInputError as err:  # a snapshot without an extract has no report to refresh
        log.info("report %s not refreshed: %s", snapshot_id, err)
    except Exception:  # the decisions are committed already: a page that fails to render must not undo the task
        log.exception("report %s not refreshed", snapshot_id)


def review(
    rt: Runtime,
    snapshot_id: str,
    groups: Sequence[str],
    timeout_s: float | None,
    run: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """Write the HTML report and the decision page and build the approval page; the candidates are the VALIDATED
    plans in the filter; ``run``: (dag_id, run_id), for the decision page's link."""
    timeout = float(timeout_s) if timeout_s else rt.settings.approval_timeout_s
    try:
        rt.settings.required_approvers()
    except ValueError as err:
        raise TaskFailed(f"review: {err}") from err

    def body(lake: Lake) -> dict[str, Any]:
        rows = lake.read("plans", snapshot_id).select("plan_id", "group_id", "status").collect()
        shown = sorted(r["group_id"] for r in rows if in_filter(r["group_id"], groups))
        report = build_report(lake, snapshot_id, shown if groups else None)
        path = report_path(lake, snapshot_id)
        try:
            write_report(report, path)
        except Exception as err:  # the approval page carries the summary itself: a person can still decide
            log.exception("review %s: the HTML report could not be written", snapshot_id)
            path = Path(f"(not written: {type(err).__name__}: {err})")
        candidates = {r.group_id: r.plan_id for r in report.rows if r.status == PlanStatus.VALIDATED}
        outside = sorted(
            r["plan_id"] for r in rows if r["status"] == PlanStatus.VALIDATED and r["group_id"] not in candidates
        )
        log.info(
            "review %s: %d plan(s), %d awaiting approval, report %s", snapshot_id, len(rows), len(candidates), path
        )
        decide_link, report_link, docs_link = _links(rt, snapshot_id, path, run)
        # Each plan's digest as shown now, valid RBP_PLAN_VALID_MS from now: what an approval of this page binds.
        valid_until = int(time.time() * 1000) + rt.settings.plan_valid_ms
        try:
            write_decision_page(report, report_path(lake, snapshot_id).parent, valid_until, duration(timeout))
        except Exception:  # the Required Actions page still carries the decision: a person can still decide
            log.exception("review %s: the decision page could not be written", snapshot_id)
        bodies = plan_bodies(lake, sorted(candidates.values()), valid_until)
        offered = {plan_id: ApprovedDigest.of(plan) for plan_id, plan in bodies.items()}
        return {
            "snapshot_id": snapshot_id,
            "candidates": candidates,
            "offered": {plan_id: entry.to_json() for plan_id, entry in offered.items()},
            "outside_filter": outside,
            "report": str(path),
            "data_docs": str(rt.settings.data_docs / "index.html"),
            "approval_timeout_s": timeout,
            "approvers": list(rt.settings.approvers),
            "subject": approval_subject(report),
            "body": approval_body(report, report_link, docs_link, len(outside), timeout, offered, decide_link),
        }

    return run_stage("review", rt, body)


def decide(
    rt: Runtime, reviewed: Mapping[str, Any], answer: Mapping[str, Any] | None, triggered_by: str | None = None
) -> dict[str, Any]:
    """Record the person's answer (Airflow's HITL record, handed over by the approval step itself) on the plans:
    approved_by is who answered, who must be among the settings' approvers if any (and, under the two-person rule,
    not ``triggered_by``); a timeout rejects everything. Returns the approval record that publish signs by."""
    snapshot_id = str(reviewed["snapshot_id"])
    try:
        approvers = rt.settings.required_approvers()
        two_persons = triggered_by if rt.settings.two_persons else None
        d = decision(
            answer, dict(reviewed["candidates"]), float(reviewed["approval_timeout_s"]), approvers, two_persons
        )
        # When the person answered, as Airflow records it: the time publish signs (confirmation.py) is this one too.
        at = answered_at_ms(answer) if answer and answer.get("responded_at") else None
        # The review's offer, read as publish reads it: a malformed entry is named, not a TypeError.
        offered = {entry.plan_id: entry for entry in offered_entries(reviewed)[1]}
    except (DecisionError, ValueError) as err:
        raise TaskFailed(f"decide: {err}") from err

    def body(lake: Lake) -> dict[str, Any]:
        approval = None
        if d.approve:
            approved = dispatch(
                "approve", rt, lake, by=d.by, plan_ids=tuple(d.approve), reason=d.reason, offered=offered, at=at
            )
            approval = getattr(approved, "approval", None)
        if d.reject:
            dispatch("approve", rt, lake, by=d.by, plan_ids=tuple(d.reject), reject=True, reason=d.reject_reason)
        outside = tuple(reviewed.get("outside_filter") or ())
        if outside:
            reason = "outside the group filter"
            dispatch("approve", rt, lake, by="rebalance_planning", plan_ids=outside, reject=True, reason=reason)
        _refresh_report(lake, snapshot_id)
        log.info(
            "decide %s: %d approved, %d rejected by %s%s",
            snapshot_id,
            len(d.approve),
            len(d.reject),
            d.by,
            " (timed out)" if d.timed_out else "",
        )
        return {
            "snapshot_id": snapshot_id,
            "approved": len(d.approve),
            "rejected": len(d.reject),
            "by": d.by,
            # Airflow keeps this in its metadata database, out of the lake engine's reach: publish signs by it.
            "approval": approval.to_json() if approval is not None else None,
        }

    return run_stage("decide", rt, body)


def publish_approved(rt: Runtime, reviewed: Mapping[str, Any], decided: Mapping[str, Any] | None, dag_run: Any) -> int:
    """Publish what the person approved of the review's offer, as Airflow's HITL record of the answer says (read over
    its REST API with the signer's read-only login); the approval step's own record (``decided``, an XCom any task
    could have rewritten) must agree with it. The count published."""
    try:
        hitl = approval_answer(rt.settings.airflow_login(), str(dag_run.dag_id), str(dag_run.run_id))
    except ValueError as err:  # a missing setting: no retry fixes it
        raise TaskFailed(f"publish: {err}") from err
    # AirflowApiError (the api-server down or restarting) is left to the task's retries.
    try:
        triggered_by = getattr(dag_run, "triggering_user_name", None) if rt.settings.two_persons else None
        timeout = float(reviewed.get("approval_timeout_s") or rt.settings.approval_timeout_s)
        approval = confirmed_approval(hitl, reviewed, timeout, rt.settings.required_approvers(), triggered_by)
        handed = (decided or {}).get("approval")
        _same_approval(approval, ApprovalRecord.from_json(handed) if handed else None)
    except (ValueError, ApprovalRecordError) as err:  # DecisionError included: the answer does not allow signing
        raise TaskFailed(f"publish: {err}") from err
    snapshot_id = str(reviewed["snapshot_id"])
    if approval is None:
        log.info("publish %s: Airflow's record of the answer approves nothing; nothing published", snapshot_id)
        return 0
    log.info(
        "publish %s: approved by %s (Airflow's record), %d plan(s), approval %s",
        snapshot_id,
        approval.approved_by,
        len(approval.plans),
        approval.fingerprint[:12],
    )
    return publish(rt, snapshot_id, approval)


def _same_approval(confirmed: ApprovalRecord | None, handed: ApprovalRecord | None) -> None:
    """DecisionError unless the approval step's record names the same approver and plans as Airflow's answer."""

    def named(record: ApprovalRecord | None) -> str:
        return "nothing" if record is None else f"{record.approved_by}, approval {record.fingerprint[:12]}"

    if named(confirmed) != named(handed):
        raise DecisionError(
            f"the approval step's record ({named(handed)}) is not Airflow's record of the answer ({named(confirmed)}): "
            "it was changed after the answer; nothing is signed"
        )


def publish(rt: Runtime, snapshot_id: str, approval: ApprovalRecord) -> int:
    """Publish the snapshot's plans the approval record lists, as approved, and only while their bodies have the
    digests approved; the count published."""

    def body(lake: Lake) -> StageResult:
        result = dispatch("publish", rt, lake, snapshot_id=snapshot_id, approvals=(approval,))
        _refresh_report(lake, snapshot_id)
        return result

    result = run_stage("publish", rt, body)
    published = int(result.counts.get("published", 0))
    if published and rt.bootstrap:
        from jobs.live.read import pickup_lines  # noqa: PLC0415 (Kafka clients: only once something was published)

        for line in pickup_lines(rt.settings, rt.bootstrap):
            log.info("publish %s: %s", snapshot_id, line)
    return published


def observe(rt: Runtime) -> dict[str, int]:
    """Record the live assignment from the latest reports; mark realized and expired plans."""

    def body(lake: Lake) -> StageResult:
        before = _snapshot_statuses(lake)
        result = dispatch("observe", rt, lake)
        after = _snapshot_statuses(lake)
        for snapshot_id in sorted(s for s, statuses in after.items() if before.get(s) != statuses):
            _refresh_report(lake, snapshot_id)
        return result

    result = run_stage("observe", rt, body)
    return dict(result.counts)


def _snapshot_statuses(lake: Lake) -> dict[str, tuple[tuple[str, str], ...]]:
    """Per snapshot with a published plan, its plans' statuses: observe only changes those."""
    published = (
        PlanStatus.PUBLISHED,
        PlanStatus.REALIZED,
        PlanStatus.EXPIRED,
        PlanStatus.SUPERSEDED,
        PlanStatus.WITHDRAWN,
    )
    rows = lake.read("plans").where(sf.col("published_at").isNotNull() | sf.col("status").isin(*published))
    out: dict[str, list[tuple[str, str]]] = {}
    for r in rows.select("snapshot_id", "plan_id", "status").collect():
        out.setdefault(r["snapshot_id"], []).append((r["plan_id"], r["status"]))
    return {k: tuple(sorted(v)) for k, v in out.items()}
