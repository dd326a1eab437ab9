"""The restore rate a plan is estimated with: the configured one, else the group's observed one, else the fleet's,
else the assignor's default; the plan says which."""

from __future__ import annotations

import pandas as pd

from assignor import AssignmentConfigs
from assignor.estimate import DEFAULT_RESTORE_RATE
from jobs.pipeline.plan_record import plan_record
from jobs.pipeline.rate_source import RateSource
from jobs.pipeline.restore_rates import InstanceRestore, RestoreRates
from tests.support.planning_rows import two_client_rows

OBSERVED = [
    InstanceRestore("g1", "p1", replayed=600_000, seconds=60.0),  # 10,000/s
    InstanceRestore("g1", "p2", replayed=1_800_000, seconds=60.0),  # 30,000/s
    InstanceRestore("g1", "p3", replayed=2_400_000, seconds=60.0),  # 40,000/s
    InstanceRestore("g2", "p1", replayed=120_000, seconds=60.0),  # 2,000/s
    InstanceRestore("g2", "p2", replayed=0, seconds=60.0),  # replayed nothing: tells nothing
    InstanceRestore("g3", "p1", replayed=5_000, seconds=0.0),  # the same report twice: tells nothing
]


def test_a_group_is_estimated_at_the_median_rate_of_its_restoring_instances() -> None:
    rates = RestoreRates.observed(OBSERVED)
    assert rates.for_group("g1") == (30_000.0, RateSource.OBSERVED)
    assert rates.for_group("g2") == (2_000.0, RateSource.OBSERVED)


def test_a_group_with_nothing_restoring_takes_the_fleets_median() -> None:
    rates = RestoreRates.observed(OBSERVED)
    assert rates.for_group("g3") == (20_000.0, RateSource.FLEET)  # median of 10k, 30k, 40k, 2k
    assert rates.for_group("elsewhere") == (20_000.0, RateSource.FLEET)


def test_nothing_observed_means_the_default_and_a_configured_rate_always_wins() -> None:
    assert RestoreRates.observed([]).for_group("g1") == (DEFAULT_RESTORE_RATE, RateSource.DEFAULT)
    assert RestoreRates.observed(OBSERVED, configured=5_000.0).for_group("g1") == (5_000.0, RateSource.SETTINGS)


def _rows() -> pd.DataFrame:
    return two_client_rows(20_000_000, -2)


def test_the_plan_records_its_rate_and_where_it_came_from() -> None:
    rate, source = RestoreRates.observed(OBSERVED).for_group("g1")
    observed = plan_record(_rows(), AssignmentConfigs(), rate, created_at=1, rate_source=source)
    assert (observed["restore_rate"], observed["restore_rate_source"]) == (30_000.0, "observed")
    default = plan_record(_rows(), AssignmentConfigs(), None, created_at=1)
    assert (default["restore_rate"], default["restore_rate_source"]) == (DEFAULT_RESTORE_RATE, "default")
    # p2 restores one task of 20M offsets: at 3x the default rate it takes a third of the time.
    assert observed["estimated_seconds"] < default["estimated_seconds"]
