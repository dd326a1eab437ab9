"""``rebalance-planner withdraw`` on the whole product: the signed withdrawal goes out and the lake says WITHDRAWN at
once; a withdrawn plan cannot be published again; a plan named for the wrong group sends nothing."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as sf

from assignor.protocol.plans import Withdrawal, read_record
from assignor.runtime.kafka_io import read_latest_by_key
from jobs.cli.main import main
from jobs.lakehouse.lake import Lake
from jobs.local.broker import EmbeddedBroker
from jobs.settings import Settings
from tests.support.signing import VERIFY_KEYS
from tests.system.test_pipeline_cli import env  # noqa: F401  (the fixture: RBP_ settings for the CLI)
from tests.system.test_pipeline_e2e import seed_fleet


def test_withdraw_marks_the_published_plan_withdrawn_and_it_is_never_published_again(
    env: Settings,  # noqa: F811
    broker: EmbeddedBroker,
    spark: SparkSession,
    capsys: pytest.CaptureFixture[str],
) -> None:
    seed_fleet(broker, env)
    for command in (["extract"], ["lags"], ["plan"], ["validate"], ["approve", "--by", "bob"], ["publish"]):
        assert main(command) == 0, command
    lake = Lake(spark, env.lake_root)
    row = lake.read("plans").where(sf.col("group_id") == "orders").first()
    assert row is not None and row["status"] == "PUBLISHED"
    plan_id = str(row["plan_id"])
    capsys.readouterr()

    assert main(["withdraw", "--group", "clicks", "--plan-id", plan_id]) == 2
    assert f"plan {plan_id} is for group 'orders'" in capsys.readouterr().err
    record = read_latest_by_key(broker.bootstrap, env.plans_topic)[b"orders"]
    assert record is not None and not isinstance(read_record(record, VERIFY_KEYS), Withdrawal)
    assert b"clicks" not in read_latest_by_key(broker.bootstrap, env.plans_topic)

    assert main(["withdraw", "--group", "orders", "--plan-id", plan_id, "--by", "carol"]) == 0
    assert "the plan is WITHDRAWN in the lake" in capsys.readouterr().out
    record = read_latest_by_key(broker.bootstrap, env.plans_topic)[b"orders"]
    assert record is not None and isinstance(read_record(record, VERIFY_KEYS), Withdrawal)
    withdrawn = lake.read("plans").where(sf.col("plan_id") == plan_id).first()
    assert withdrawn is not None and withdrawn["status"] == "WITHDRAWN" and "carol" in withdrawn["reason"]
    history = lake.read("assignment_history").where((sf.col("plan_id") == plan_id) & (sf.col("source") == "withdrawn"))
    assert (
        history.count()
        == lake.read("assignment_history")
        .where((sf.col("plan_id") == plan_id) & (sf.col("source") == "published"))
        .count()
    )

    assert main(["publish", "--plan-id", plan_id]) == 2
    assert f"{plan_id} is WITHDRAWN" in capsys.readouterr().err
    assert main(["observe"]) == 0
    after = lake.read("plans").where(sf.col("plan_id") == plan_id).first()
    assert after is not None and after["status"] == "WITHDRAWN"
