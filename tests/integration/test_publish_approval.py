"""publish signs exactly what a person approved, on a real broker and lake: the approval record (not the lake's
status) says which plans, the plan_digest says which bodies, and a record that does not verify is never sent."""

from __future__ import annotations

import stat

from pyspark.sql import SparkSession
from pyspark.sql import functions as sf

from assignor.protocol.plans import ApprovedPlan, read_record
from assignor.runtime.kafka_io import read_latest_by_key
from jobs.lakehouse.lake import Lake
from jobs.local.broker import EmbeddedBroker
from jobs.pipeline.approval_record import ApprovalRecord, ApprovedDigest
from jobs.pipeline.approve import run_approve
from jobs.pipeline.extract import run_extract
from jobs.pipeline.lags import run_lags
from jobs.pipeline.plan import run_plan
from jobs.pipeline.plan_bodies import plan_bodies
from jobs.pipeline.publish import run_publish
from jobs.pipeline.validate import run_validate
from jobs.settings import Settings
from tests.support.signing import FORGER, VERIFY_KEYS
from tests.system.test_pipeline_e2e import seed_fleet, settings  # noqa: F401  (the fixture)


def _validated_orders_plan(lake: Lake, config: Settings, bootstrap: str) -> tuple[str, str]:
    """Extract → validate of the seeded fleet: (snapshot, the orders group's VALIDATED plan)."""
    snapshot = run_extract(lake, config, bootstrap).snapshot_id
    assert snapshot is not None
    run_lags(lake, config, snapshot)
    run_plan(lake, config, snapshot)
    run_validate(lake, config, snapshot)
    row = lake.read("plans", snapshot).where(sf.col("group_id") == "orders").first()
    assert row is not None and row["status"] == "VALIDATED"
    return snapshot, str(row["plan_id"])


def _plan_row(lake: Lake, plan_id: str) -> dict[str, object]:
    row = lake.read("plans").where(sf.col("plan_id") == plan_id).first()
    assert row is not None
    return row.asDict()


def _write_plan_row(lake: Lake, plan_id: str, **columns: object) -> None:
    """Change a plans row as anyone who can write the lake (or reach its engine) could."""
    row = lake.read("plans").where(sf.col("plan_id") == plan_id)
    for name, value in columns.items():
        row = row.withColumn(name, sf.lit(value).cast(dict(row.dtypes)[name]))
    lake.merge("plans", row, update=list(columns))


def test_a_plan_changed_or_flipped_to_approved_in_the_lake_after_approval_is_refused_and_never_sent(
    spark: SparkSession,
    broker: EmbeddedBroker,
    settings: Settings,  # noqa: F811  (the fixture)
) -> None:
    seed_fleet(broker, settings)
    lake = Lake(spark, settings.lake_root)
    bootstrap = broker.bootstrap

    # alice approves the plan; then its acceptable_recovery_lag is changed in the lake.
    snapshot, approved_id = _validated_orders_plan(lake, settings, bootstrap)
    approval = run_approve(lake, settings, by="alice", snapshot_id=snapshot).approval
    assert approval is not None and [p.plan_id for p in approval.plans] == [approved_id]
    lag = int(_plan_row(lake, approved_id)["acceptable_recovery_lag"])  # type: ignore[call-overload]
    _write_plan_row(lake, approved_id, acceptable_recovery_lag=lag + 1_000_000)
    result = run_publish(lake, settings, bootstrap, snapshot_id=snapshot, approvals=[approval])
    assert (result.counts["published"], result.counts["refused"]) == (0, 1)
    row = _plan_row(lake, approved_id)
    assert row["status"] == "REJECTED"
    assert f"plan {approved_id} is not what alice approved" in str(row["reason"])
    assert f"acceptable_recovery_lag {lag + 1_000_000} (approved {lag})" in str(row["reason"])

    # alice rejects the next night's plan; somebody flips it to APPROVED in the lake. alice's approval record of
    # the night before is still in RBP_APPROVALS_DIR: it does not list this plan.
    snapshot, rejected_id = _validated_orders_plan(lake, settings, bootstrap)
    assert run_approve(lake, settings, by="alice", snapshot_id=snapshot, reject=True).approval is None
    _write_plan_row(lake, rejected_id, status="APPROVED", approved_by="alice")
    result = run_publish(lake, settings, bootstrap, snapshot_id=snapshot)
    assert (result.counts["published"], result.counts["refused"]) == (0, 1)
    row = _plan_row(lake, rejected_id)
    assert row["status"] == "REJECTED"
    assert str(row["reason"]) == (
        f"refused at publish: plan {rejected_id} is APPROVED in the lake but no approval record lists it"
    )
    assert b"orders" not in read_latest_by_key(bootstrap, settings.plans_topic)  # nothing was ever signed


def test_publish_signs_and_sends_exactly_the_approved_plan_as_approved_by_the_record(
    spark: SparkSession,
    broker: EmbeddedBroker,
    settings: Settings,  # noqa: F811  (the fixture)
) -> None:
    settings = settings.model_copy(update={"plan_verify_keys": VERIFY_KEYS.render()})
    seed_fleet(broker, settings)
    lake = Lake(spark, settings.lake_root)
    bootstrap = broker.bootstrap
    snapshot, plan_id = _validated_orders_plan(lake, settings, bootstrap)
    approval = run_approve(lake, settings, by="alice", snapshot_id=snapshot).approval
    assert approval is not None

    # The command line's record: one file only its user can read, in a folder only its user can enter.
    files = list(settings.approval_records.glob("*.json"))
    assert len(files) == 1 and stat.S_IMODE(files[0].stat().st_mode) == 0o600
    assert stat.S_IMODE(settings.approval_records.stat().st_mode) == 0o700
    assert ApprovalRecord.from_bytes(files[0].read_bytes()) == approval

    # Who approved and when come from the record, not from the lake's columns.
    _write_plan_row(lake, plan_id, approved_by="mallory")
    result = run_publish(lake, settings, bootstrap, snapshot_id=snapshot)
    assert result.counts["published"] == 1 and "refused" not in result.counts
    value = read_latest_by_key(bootstrap, settings.plans_topic)[b"orders"]
    assert value is not None
    published = read_record(value, VERIFY_KEYS)
    assert isinstance(published, ApprovedPlan)
    assert (published.plan_id, published.approved_by, published.approved_at) == (
        plan_id, "alice", approval.approved_at,
    )  # fmt: skip
    assert published.plan_digest == approval.plans[0].plan_digest
    assert _plan_row(lake, plan_id)["status"] == "PUBLISHED"


def test_a_signed_record_the_groups_keys_do_not_verify_is_not_sent(
    spark: SparkSession,
    broker: EmbeddedBroker,
    settings: Settings,  # noqa: F811  (the fixture)
) -> None:
    # The groups trust another key under the same id: what publish signs would be refused by every leader.
    settings = settings.model_copy(update={"plan_verify_keys": FORGER.verify_keys().render()})
    seed_fleet(broker, settings)
    lake = Lake(spark, settings.lake_root)
    bootstrap = broker.bootstrap
    snapshot, plan_id = _validated_orders_plan(lake, settings, bootstrap)
    run_approve(lake, settings, by="alice", snapshot_id=snapshot)
    result = run_publish(lake, settings, bootstrap, snapshot_id=snapshot)
    assert (result.counts["published"], result.counts["refused"]) == (0, 1)
    row = _plan_row(lake, plan_id)
    assert row["status"] == "REJECTED"
    assert f"plan {plan_id}'s signed record does not verify with the verify keys: bad_signature" in str(row["reason"])
    assert b"orders" not in read_latest_by_key(bootstrap, settings.plans_topic)


def test_airflows_record_binds_the_digests_the_page_showed_also_when_the_approval_is_asked_again(
    spark: SparkSession,
    broker: EmbeddedBroker,
    settings: Settings,  # noqa: F811  (the fixture)
) -> None:
    seed_fleet(broker, settings)
    lake = Lake(spark, settings.lake_root)
    bootstrap = broker.bootstrap
    snapshot, plan_id = _validated_orders_plan(lake, settings, bootstrap)
    shown = {plan_id: ApprovedDigest.of(plan_bodies(lake, [plan_id], 2**52)[plan_id])}  # what review offers

    # Changed after the page was made, before the person answers: the record still binds what the page showed.
    lag = int(_plan_row(lake, plan_id)["acceptable_recovery_lag"])  # type: ignore[call-overload]
    _write_plan_row(lake, plan_id, acceptable_recovery_lag=lag + 1)
    first = run_approve(lake, settings, by="admin", plan_ids=[plan_id], offered=shown).approval
    assert first is not None and (first.source, first.plans) == ("airflow", (shown[plan_id],))
    assert list(settings.approval_records.glob("*.json")) == []  # Airflow's record is its XCom, not a file
    # Asked again (the first answer's recording failed after the plan became APPROVED): the record lists it.
    again = run_approve(lake, settings, by="admin", plan_ids=[plan_id], offered=shown).approval
    assert again is not None and again.plans == (shown[plan_id],)

    result = run_publish(lake, settings, bootstrap, snapshot_id=snapshot, approvals=[again])
    assert (result.counts["published"], result.counts["refused"]) == (0, 1)
    assert f"acceptable_recovery_lag {lag + 1} (approved {lag})" in str(_plan_row(lake, plan_id)["reason"])
