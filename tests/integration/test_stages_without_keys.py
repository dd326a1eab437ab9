"""Only publish signs: every other stage runs with no key material in reach. An audit hook watches every file this
process opens; lags, plan, validate, approve and observe run over a real lake and broker, then publish, which alone
opens the signing key and its passphrase."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from jobs.lakehouse.lake import Lake
from jobs.local.broker import EmbeddedBroker
from jobs.pipeline.approve import run_approve
from jobs.pipeline.lags import run_lags
from jobs.pipeline.observe import run_observe
from jobs.pipeline.plan import run_plan
from jobs.pipeline.publish import run_publish
from jobs.pipeline.validate import run_validate
from jobs.settings import Kip441Overrides, Settings
from jobs.signing import read_passphrase, write_signing_key
from tests.integration.test_report_only_plans import CAPTURED_AT, _snapshot
from tests.support.pipeline_kafka import create_topics

_opened: list[str] = []
_watched: list[Path] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    # Hooks cannot be removed: this one only records, and only paths under the watched folder.
    if event == "open" and _watched and isinstance(args[0], str | Path):
        path = Path(args[0])
        if _watched[0] in path.parents:
            _opened.append(path.name)


sys.addaudithook(_audit)


def test_no_stage_but_publish_opens_the_signing_key(
    spark: SparkSession, broker: EmbeddedBroker, tmp_path: Path
) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    phrase = secrets / "passphrase"
    phrase.write_bytes(b"only publish reads this passphrase\n")
    phrase.chmod(0o600)
    key_file, signer = write_signing_key(secrets, "k1", read_passphrase(phrase))
    settings = Settings(
        lake_root=tmp_path / "lake",
        plan_signing_key_file=key_file,
        plan_key_id="k1",
        plan_signing_passphrase_file=phrase,
        plan_verify_keys=signer.verify_keys().render(),
        kip441_overrides=Kip441Overrides.fleet(acceptable_recovery_lag=100, num_standby_replicas=1),
        planner_processes=1,
        reports_topic="reports",
        plans_topic="plans",
    )
    create_topics(broker.bootstrap, {"reports": 1, "plans": 1}, compacted=["reports", "plans"])
    lake = Lake(spark, settings.lake_root)
    _snapshot(lake, "s1", CAPTURED_AT)
    _opened.clear()
    _watched[:] = [secrets.resolve()]
    try:
        run_lags(lake, settings, "s1")
        run_plan(lake, settings, "s1")
        run_validate(lake, settings, "s1")
        run_approve(lake, settings, by="alice", snapshot_id="s1")
        run_observe(lake, settings, broker.bootstrap)
        assert _opened == [], f"a stage other than publish opened {_opened}"
        run_publish(lake, settings, broker.bootstrap, snapshot_id="s1", approvals=[])
        assert set(_opened) == {"passphrase", "k1.pem"}  # the hook sees what publish opens
    finally:
        _watched.clear()
