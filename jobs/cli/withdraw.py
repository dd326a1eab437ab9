"""The ``withdraw`` command's work: the signed withdrawal on the plans topic, then the lake told (WITHDRAWN)."""
# ruff: noqa: PLC0415 -- Spark and Kafka load when the command runs, not at CLI start

from __future__ import annotations

from typing import TYPE_CHECKING

from jobs.settings import Settings

if TYPE_CHECKING:
    from jobs.pipeline.stage import StageResult


def withdraw_and_record(settings: Settings, bootstrap: str, group_id: str, plan_id: str, by: str) -> StageResult:
    """Publish the withdrawal and record it in the lake at ``settings.lake_root``."""
    from jobs.lakehouse.engine import spark_session
    from jobs.lakehouse.lake import Lake
    from jobs.pipeline.withdraw import run_withdraw

    with spark_session(settings.spark_remote) as spark:
        return run_withdraw(Lake(spark, settings.lake_root), settings, bootstrap, group_id, plan_id, by)
