"""Hypothesis profiles: 'dev' by default, 'ci' (more examples) when CI is set."""

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings
from pyspark.sql import SparkSession

from jobs.broker import EmbeddedBroker
from jobs.engine import spark_session

settings.register_profile(
    "dev", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.register_profile(
    "ci", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


@pytest.fixture
def broker() -> Iterator[EmbeddedBroker]:
    """A real Tansu broker process on loopback, stopped after the test."""
    with EmbeddedBroker() as running:
        yield running


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One embedded Sail engine (Spark Connect) for the whole test session."""
    with spark_session(None) as session:
        yield session
