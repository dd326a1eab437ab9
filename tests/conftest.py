"""Shared fixtures (one broker, one engine per session, per xdist worker), hypothesis profiles (dev; ci when CI is
set) and the xdist groups that `make test` (``-n 2 --dist loadgroup``) hands out longest first."""

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
from jobs.processes import die_with_parent
from tests.support import xdist_groups
from tests.support.airflow_harness import SharedAirflow, shared_standalone
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


@pytest.fixture(scope="session")
def airflow_standalone(tmp_path_factory: pytest.TempPathFactory, kafka: EmbeddedBroker) -> Iterator[SharedAirflow]:
    """One `airflow standalone` for test_dag_run and test_dag_ui (each start costs 35-47 s; both in xdist group
    "airflow"), stopped after the last test that uses it (pytest_runtest_teardown), not at the session's end."""
    with shared_standalone(tmp_path_factory.mktemp("airflow-standalone"), kafka) as shared:
        yield shared


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop the shared Airflow once the next test does not use it: its scheduler and dag-processor keep a core
    busy for nothing otherwise, and what it left on the session's broker (reports and plans of 'orders') would be
    read by later tests of the same group names (the fixture's own teardown, at the session's end, finds it done)."""
    uses = "airflow_standalone" in getattr(item, "fixturenames", ())
    next_uses = nextitem is not None and "airflow_standalone" in getattr(nextitem, "fixturenames", ())
    if uses and not next_uses:
        shared = getattr(item, "funcargs", {}).get("airflow_standalone")
        if isinstance(shared, SharedAirflow):
            shared.stop()


ENGINES = ("sail", "apache-spark")


@pytest.fixture(scope="session")
def spark_connect_server() -> Iterator[LocalSparkConnect]:
    """The local Spark Connect server (a child JVM) with delta-spark, once per session."""
    # An execution whose client died is interrupted 5 minutes later by default. test_lake_killed_writer needs the
    # orphaned MERGE of a killed stage to outlive the stage's retry, which takes longer than that on a loaded machine.
    server = LocalSparkConnect(extra_conf={"spark.connect.execute.manager.detachedTimeout": "30min"})
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


def pytest_configure(config: pytest.Config) -> None:
    """In an xdist worker: die with the pytest that started it (its servers, spawned with a parent-death signal, die
    with it: a killed run leaves no broker, Spark Connect, Airflow or Streams JVM behind). In every process: the xdist
    groups (tests/support/xdist_groups.py: the workers say each test's group, the controller schedules them)."""
    if getattr(config, "workerinput", None) is not None:
        controller = os.getppid()
        die_with_parent()
        if os.getppid() != controller:  # the controller died before the signal was armed
            os._exit(1)
    xdist_groups.install(config)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test with its tier, from the folder it lives in (tests/unit, integration, system)."""
    for item in items:
        tier = item.path.parent.name
        if tier in {"unit", "integration", "system"}:
            item.add_marker(getattr(pytest.mark, tier))
