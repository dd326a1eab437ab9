"""Shared fixtures (one broker, one engine per session) and hypothesis profiles (dev; ci when CI is set)."""

import os
from collections.abc import Iterator
from pathlib import Path

# pyspark's classic launcher (the parity tests' local[2] server) starts its JVM with fork(), and gRPC's fork handlers,
# armed once a Spark Connect client has run, abort that child now and then; they must be off before gRPC loads.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
# The checkout's var/ is the tests' data home (as the Makefile's), wherever pytest runs from: one download of the jars.
os.environ.setdefault("RBP_HOME", str(Path(__file__).resolve().parents[1] / "var"))

import pytest
from hypothesis import HealthCheck, settings
from pyspark.sql import SparkSession

from jobs.lakehouse.engine import spark_session
from jobs.local.broker import EmbeddedBroker
from jobs.local.spark_connect import LocalSparkConnect
from tests.support.kafka_isolation import isolated

# tests/deploy runs against containers only `make deploy-test` (tests/deploy/run.sh) starts, and says so in its env.
collect_ignore = [] if os.environ.get("RBP_DEPLOY_PROJECT") else ["deploy"]

settings.register_profile(
    "dev", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.register_profile(
    "ci", max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    """One Apache Kafka broker (KRaft, a child JVM) for the whole session; its log stays in pytest's tmp."""
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("kafka")) as running:
        yield running


@pytest.fixture
def broker(kafka: EmbeddedBroker) -> Iterator[EmbeddedBroker]:
    """The session's broker; the topics and groups this test creates are deleted after it."""
    with isolated(kafka) as running:
        yield running


ENGINES = ("sail", "apache-spark")


@pytest.fixture(scope="session")
def spark_connect_server() -> Iterator[LocalSparkConnect]:
    """The local Spark Connect server (a child JVM) with delta-spark, once per session."""
    server = LocalSparkConnect()
    with server:
        yield server


@pytest.fixture(scope="session")
def apache_spark(spark_connect_server: LocalSparkConnect) -> Iterator[SparkSession]:
    """Apache Spark with delta-spark behind the local Spark Connect server, once per session."""
    with spark_session(spark_connect_server.remote) as session:
        yield session


@pytest.fixture(scope="session")
def spark(request: pytest.FixtureRequest) -> Iterator[SparkSession]:
    """The session's engine: embedded Sail, or in modules marked ``engines`` each test once more on Apache Spark."""
    if getattr(request, "param", "sail") != "sail":
        yield request.getfixturevalue("apache_spark")
        return
    with spark_session(None) as session:
        yield session


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests of modules marked ``pytest.mark.engines`` that use ``spark`` run on both engines."""
    if "spark" in metafunc.fixturenames and metafunc.definition.get_closest_marker("engines"):
        metafunc.parametrize("spark", ENGINES, indirect=True, scope="session")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test with its tier, from the folder it lives in (tests/unit, integration, system)."""
    for item in items:
        tier = item.path.parent.name
        if tier in {"unit", "integration", "system"}:
            item.add_marker(getattr(pytest.mark, tier))
