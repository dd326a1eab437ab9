"""Stage 6, publish: APPROVED plans as signed records to the plans topic; history rows; PUBLISHED/SUPERSEDED."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from functools import cache
from typing import Any

import jsonschema
from confluent_kafka import Producer
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as sf

from assignor.protocol.key_revocation import KeyRevocation, is_revocation_key, revoked_key_ids
from assignor.protocol.plan_keys import Signer
from assignor.protocol.plans import Withdrawal
from assignor.runtime.kafka_io import read_latest_by_key
from jobs.kafka_topics import TopicSpec, ensure_topics
from jobs.lakehouse.lake import Lake, MergeOutcome
from jobs.pipeline import approval_files
from jobs.pipeline.approval_record import ApprovalRecord
from jobs.pipeline.plan_sequence import RevokedSigningKey, publish_sequences
from jobs.pipeline.publish_gate import bind, publish_keys, verification_error
from jobs.pipeline.report_only import STREAMS_PROTOCOL_REASON, report_only_reasons
from jobs.pipeline.stage import StageInputError, StageResult, StageUnavailable, resolve_snapshot
from jobs.pipeline.status import PlanStatus
from jobs.pipeline.streams_assignor import (
    SOURCE_SELECTED,
    assignor_history_rows,
    broker_assignor,
    release_assignor,
    select_assignor,
)
from jobs.pipeline.targets import HISTORY_DDL, TARGET_CHANGED, changed_since_validation, history_rows, plan_targets
from jobs.provisioning import product_topics
from jobs.settings import Settings
from schemas import read_json

log = logging.getLogger(__name__)


@cache
def _plan_validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(read_json("plan.schema.json"))


def _latest_per_group(rows: Iterable[Row]) -> tuple[list[Row], list[Row]]:
    """The newest approved plan of each group, and the older ones it makes obsolete."""
    newest: dict[str, Row] = {}
    older: list[Row] = []
    for row in sorted(rows, key=lambda r: (r["created_at"], r["plan_id"])):
        if row["group_id"] in newest:
            older.append(newest[row["group_id"]])
        newest[row["group_id"]] = row
    return list(newest.values()), older


def _produce(producer: Producer, topic: str, records: Sequence[dict[str, Any]], timeout_s: float) -> None:
    for record in records:
        producer.produce(topic, key=record["group_id"].encode("utf-8"), value=json.dumps(record).encode("utf-8"))
    if producer.flush(timeout_s) != 0:
        raise StageUnavailable(f"{topic}: plan records not delivered within {timeout_s} s")


def plans_topic_spec(settings: Settings) -> TopicSpec:
    """The plans topic as `setup` makes it (compacted, room for 1 MiB records), for a publish that finds none."""
    return next(
        t for t in product_topics(settings.reports_topic, settings.plans_topic) if t.name == settings.plans_topic
    )


def _hold_report_only(
    lake: Lake, approved: list[Row], settings: Settings, bootstrap: str
) -> tuple[list[Row], list[MergeOutcome], set[str], str | None]:
    """The approved plans that may be published; those of report-only groups become HELD, with the reason per
    group. Streams-protocol groups are not report-only when the brokers have our assignor: they are returned, with
    its name, to select it for them."""
    reasons = report_only_reasons(lake, sorted({r["snapshot_id"] for r in approved}))
    streams = {g for g, why in reasons.items() if why == STREAMS_PROTOCOL_REASON}
    # The brokers are asked only when a streams-protocol group has a plan to publish.
    assignor = broker_assignor(settings, bootstrap) if streams else None
    streams = streams if assignor else set()
    reasons = {g: why for g, why in reasons.items() if g not in streams}
    streams &= {r["group_id"] for r in approved}
    held = [r for r in approved if r["group_id"] in reasons]
    if not held:
        return approved, [], streams, assignor
    for row in held:
        why = reasons[row["group_id"]]
        log.warning("publish: plan %s of group %s not published: %s", row["plan_id"], row["group_id"], why)
    why_by_plan = lake.spark.createDataFrame(
        [(r["plan_id"], reasons[r["group_id"]]) for r in held], "plan_id string, why string"
    )
    rows = lake.read("plans").join(why_by_plan, "plan_id")
    held_rows = rows.withColumn("status", sf.lit(str(PlanStatus.HELD))).withColumn("reason", sf.col("why")).drop("why")
    outcome = lake.merge("plans", held_rows, update=["status", "reason"])
    return [r for r in approved if r["group_id"] not in reasons], [outcome], streams, assignor


def run_publish(
    lake: Lake,
    settings: Settings,
    bootstrap: str,
    *,
    snapshot_id: str | None = None,
    plan_ids: Sequence[str] = (),
    approvals: Sequence[ApprovalRecord] | None = None,
) -> StageResult:
    """Sign and publish the APPROVED plans of a snapshot (or the given ones) that ``approvals`` list with the body
    approved (None: the approval records in RBP_APPROVALS_DIR); the others become REJECTED with the reason. Older
    PUBLISHED plans of the same groups become SUPERSEDED. Published plans are no longer APPROVED, so a re-run
    publishes nothing."""
    try:
        signer = settings.plan_signer()
    except ValueError as err:
        raise StageInputError(str(err)) from None
    keys = publish_keys(settings, signer)
    if approvals is None:
        approvals = approval_files.load_all(settings.approval_records)
    plans = lake.read("plans")
    if plan_ids:
        chosen = plans.where(sf.col("plan_id").isin(list(plan_ids)))
        found = {r["plan_id"]: r["status"] for r in chosen.select("plan_id", "status").collect()}
        wrong = {p: s for p, s in found.items() if s not in (PlanStatus.APPROVED, PlanStatus.PUBLISHED)}
        missing = sorted(set(plan_ids) - set(found))
        if missing or wrong:
            detail = [f"{p} is unknown" for p in missing] + [f"{p} is {s}" for p, s in sorted(wrong.items())]
            raise StageInputError(f"only APPROVED plans can be published: {', '.join(detail)}")
        snapshot = None
    else:
        snapshot = resolve_snapshot(lake, snapshot_id)
        chosen = plans.where(sf.col("snapshot_id") == snapshot)
    approved, older = _latest_per_group(chosen.where(sf.col("status") == PlanStatus.APPROVED).collect())
    approved, held, streams, assignor = _hold_report_only(lake, approved, settings, bootstrap)
    older = [r for r in older if r["group_id"] in {a["group_id"] for a in approved}]  # a held group keeps its plans
    if not approved:
        log.info("publish: no APPROVED plans to publish (%d held as report-only)", len(held))
        return StageResult("publish", snapshot, tuple(held), {"report_only": len(held)} if held else {})
    targets = plan_targets(lake, [r["plan_id"] for r in approved])
    now = int(time.time() * 1000)
    changed = changed_since_validation(plans.where(sf.col("plan_id").isin([r["plan_id"] for r in approved])), targets)
    outcomes: list[MergeOutcome] = []
    if changed:
        # The target re-read now is not the one validated and approved: sign nothing for it.
        log.error("publish: target changed since validation, not published: %s", ", ".join(changed))
        tampered = plans.where(sf.col("plan_id").isin(changed))
        outcomes.append(_set_status(lake, tampered, PlanStatus.REJECTED, TARGET_CHANGED, None))
        approved = [r for r in approved if r["plan_id"] not in changed]
        older = [r for r in older if r["group_id"] in {a["group_id"] for a in approved}]
    # Only what a named person approved, exactly as approved, is signed; only what verifies is sent.
    bound, refused = bind(approved, targets, approvals)
    records, history = [], []
    sequences = _sequences(settings, bootstrap, signer, {p.group_id for p in bound}, now)
    for plan in bound:
        record = plan.to_record(signer, sequences[plan.group_id])
        error = jsonschema.exceptions.best_match(_plan_validator().iter_errors(record))
        if error is not None:
            raise StageInputError(f"plan {plan.plan_id} does not match plan.schema.json: {error.message}")
        why = verification_error(record, plan, keys)
        if why is not None:
            log.error("publish: %s", why)
            refused[plan.plan_id] = why
            continue
        records.append(record)
        history.extend(history_rows(plan.group_id, plan.plan_id, plan.snapshot_id, plan.target, "published", now))
    if refused:
        outcomes.append(_refuse(lake, refused))
        approved = [r for r in approved if r["plan_id"] not in refused]
        older = [r for r in older if r["group_id"] in {a["group_id"] for a in approved}]
    counts = {"published": len(records)} | ({"report_only": len(held)} if held else {})
    counts |= ({"target_changed": len(changed)} if changed else {}) | ({"refused": len(refused)} if refused else {})
    if not records:
        log.info("publish: nothing signed (%d refused, %d target changed)", len(refused), len(changed))
        return StageResult("publish", snapshot, (*held, *outcomes), counts)
    client = settings.kafka_properties(bootstrap)
    ensure_topics(client, [plans_topic_spec(settings)], settings.kafka_timeout_s)
    producer = Producer(client)
    _produce(producer, settings.plans_topic, records, settings.kafka_timeout_s)
    log.info("publish: %d signed plan(s) sent to %s", len(records), settings.plans_topic)
    selecting = {r["group_id"]: (r["plan_id"], r["snapshot_id"]) for r in approved if r["group_id"] in streams}
    if selecting and assignor is not None:
        # After the plan is on the topic, so the first assignment with our assignor can find it.
        processes = {g: list(targets[plan].clients) for g, (plan, _) in selecting.items()}
        select_assignor(settings, bootstrap, processes, assignor)
        history.extend(assignor_history_rows(selecting, SOURCE_SELECTED, now))
    if history:
        outcomes.append(lake.merge("assignment_history", lake.spark.createDataFrame(history, HISTORY_DDL)))
    published = {r["plan_id"]: r["group_id"] for r in approved}
    outcomes.append(
        _set_status(lake, plans.where(sf.col("plan_id").isin(list(published))), PlanStatus.PUBLISHED, None, now)
    )
    earlier_published = (
        sf.col("group_id").isin(list(set(published.values())))
        & ~sf.col("plan_id").isin(list(published))
        & (sf.col("status") == PlanStatus.PUBLISHED)
    )
    superseded = plans.where(earlier_published | sf.col("plan_id").isin([r["plan_id"] for r in older]))
    outcomes.append(_set_status(lake, superseded, PlanStatus.SUPERSEDED, "superseded by a newer published plan", None))
    return StageResult("publish", snapshot, (*held, *outcomes), counts)


def _sequences(
    settings: Settings, bootstrap: str, signer: Signer, group_ids: Collection[str], now: int
) -> dict[str, int]:
    try:
        return publish_sequences(settings, bootstrap, signer, group_ids, now)
    except RevokedSigningKey as err:
        raise StageInputError(str(err)) from None


def _refuse(lake: Lake, reasons: Mapping[str, str]) -> MergeOutcome:
    """Plans publish would not sign become REJECTED, each with its own reason."""
    why = lake.spark.createDataFrame(sorted(reasons.items()), "plan_id string, why string")
    rows = lake.read("plans").join(why, "plan_id")
    updates = rows.withColumn("status", sf.lit(str(PlanStatus.REJECTED))).withColumn("reason", sf.col("why"))
    return lake.merge("plans", updates.drop("why"), update=["status", "reason"])


def _set_status(lake: Lake, rows: DataFrame, status: str, reason: str | None, published_at: int | None) -> MergeOutcome:
    updates = rows.withColumn("status", sf.lit(status))
    columns = ["status"]
    if reason is not None:
        updates, columns = updates.withColumn("reason", sf.lit(reason)), [*columns, "reason"]
    if published_at is not None:
        updates = updates.withColumn("published_at", sf.lit(published_at).cast("bigint"))
        columns.append("published_at")
    return lake.merge("plans", updates, update=columns)


def publish_withdrawal(settings: Settings, bootstrap: str, group_id: str, plan_id: str) -> dict[str, Any]:
    """Sign and send a withdrawal of ``group_id``'s plan: its leader returns to Kafka's own assignment."""
    try:
        signer = settings.plan_signer()
    except ValueError as err:
        raise StageInputError(str(err)) from None
    now = int(time.time() * 1000)
    sequence = _sequences(settings, bootstrap, signer, [group_id], now)[group_id]
    record = Withdrawal(plan_id, group_id, now, sequence).to_record(signer)
    client = settings.kafka_properties(bootstrap)
    ensure_topics(client, [plans_topic_spec(settings)], settings.kafka_timeout_s)
    _produce(Producer(client), settings.plans_topic, [record], settings.kafka_timeout_s)
    log.info("publish: withdrawal of %s's plan %s sent to %s", group_id, plan_id, settings.plans_topic)
    release_assignor(settings, bootstrap, [group_id])  # a streams-protocol group: back to the broker's default
    return record


def publish_revocation(settings: Settings, bootstrap: str, revoked_key_id: str, by: str, reason: str) -> dict[str, Any]:
    """Sign a revocation of ``revoked_key_id`` with the signing key and send it: every group refuses that key from
    its next rebalance. The signing key must itself be trusted by the groups (RBP_PLAN_VERIFY_KEYS) and not be
    revoked already; revoking the key that signs is allowed (a stolen key's owner may revoke it)."""
    try:
        signer = settings.plan_signer()
    except ValueError as err:
        raise StageInputError(str(err)) from None
    keys = publish_keys(settings, signer)
    if signer.key_id not in keys.keys:
        raise StageInputError(f"the signing key {signer.key_id!r} is not among RBP_PLAN_VERIFY_KEYS: groups would "
                              "ignore its revocation")  # fmt: skip
    client = settings.kafka_properties(bootstrap)
    ensure_topics(client, [plans_topic_spec(settings)], settings.kafka_timeout_s)
    config = {k: v for k, v in client.items() if k != "bootstrap.servers"}
    topic = read_latest_by_key(bootstrap, settings.plans_topic, config)
    known = [v for k, v in topic.items() if is_revocation_key(k)]
    if signer.key_id in revoked_key_ids(known, keys) and signer.key_id != revoked_key_id:
        raise StageInputError(f"the signing key {signer.key_id!r} is itself revoked: sign with a trusted key")
    revocation = KeyRevocation(revoked_key_id, int(time.time() * 1000), by, reason)
    record = revocation.to_record(signer)
    producer = Producer(client)
    producer.produce(settings.plans_topic, key=revocation.topic_key, value=json.dumps(record).encode("utf-8"))
    if producer.flush(settings.kafka_timeout_s) != 0:
        raise StageUnavailable(
            f"{settings.plans_topic}: key revocation not delivered within {settings.kafka_timeout_s} s"
        )
    log.info("publish: revocation of key %s sent to %s", revoked_key_id, settings.plans_topic)
    return record
