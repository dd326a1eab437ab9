"""The deployment in docker/ (no Docker engine here): the compose file's services, ports, volumes and environment
wire up, and every RBP_ setting the code reads is provided with a value the Settings accept."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
import yaml

from jobs.orchestration.tasks import KAFKA_CONN_ID, SPARK_CONN_ID
from jobs.settings import Kip441Settings, Settings

DOCKER = Path(__file__).resolve().parents[2] / "docker"
AIRFLOW_PARTS = ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer")
# restore_rate unset: "estimate no durations"; spark_remote (Spark's own SPARK_REMOTE) unset: the embedded engine,
# and Airflow reaches Spark through its Connection.
OPTIONAL = {"restore_rate", "spark_remote"}
SECRETS = {  # what an operator's .env provides
    "RBP_PLAN_VERIFY_KEYS": "k1=" + "ab" * 32,
    "RBP_PLAN_KEY_ID": "k1",
    "RBP_PLAN_SIGNING_KEY_PEM": "/etc/rbp/k1.pem",
    "AIRFLOW_JWT_SECRET": "j",
    "POSTGRES_PASSWORD": "p",
}
SIGNING_ONLY = {"RBP_PLAN_SIGNING_KEY_FILE", "RBP_PLAN_KEY_ID"}  # the pipeline's: a live group must not hold them


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return dict(yaml.safe_load((DOCKER / "docker-compose.yml").read_text()))


def resolved(value: object) -> str:
    """A compose value with ${VAR:-default} / ${VAR:?message} substituted as docker compose would."""

    def sub(match: re.Match[str]) -> str:
        name, op, rest = match.group(1), match.group(2), match.group(3)
        if name in SECRETS:
            return SECRETS[name]
        assert op == ":-", f"${{{name}}} has no default and is not a documented secret"
        return rest

    return re.sub(r"\$\{([A-Z_]+)(:[-?])?([^}]*)\}", sub, str(value))


def env(service: dict[str, Any]) -> dict[str, str]:
    return {k: resolved(v) for k, v in (service.get("environment") or {}).items()}


def test_every_part_of_the_deployment_is_a_service(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert {"kafka", "postgres", "spark-connect", "airflow-init", "demo-fleet", *AIRFLOW_PARTS} <= set(services)
    assert services["kafka"]["image"] == f"apache/kafka:{embedded_kafka_version()}"  # one Kafka version everywhere
    assert "controller" in services["kafka"]["environment"]["KAFKA_PROCESS_ROLES"]  # KRaft, no ZooKeeper
    assert services["postgres"]["image"].startswith("postgres:")
    # Spark Connect is our own image's spark-connect stage: pyspark's Spark and the delta-spark jars the tests
    # use, fetched by mvn at build time; the container starts `rebalance-planner spark-connect`, downloading nothing.
    spark = services["spark-connect"]
    assert spark["build"]["target"] == "spark-connect" and spark["command"][:2] == [
        "rebalance-planner",
        "spark-connect",
    ]
    assert not any("--packages" in str(arg) or "jars.packages" in str(arg) for arg in spark["command"])
    dockerfile = (DOCKER / "Dockerfile").read_text(encoding="utf-8")
    assert "FROM project AS spark-connect" in dockerfile and "python -m jobs.local.jvm spark" in dockerfile
    for name in (*AIRFLOW_PARTS, "airflow-init", "demo-fleet"):
        assert services[name]["image"] == "rebalance-planner:latest", name
    assert services["airflow-init"]["build"]["dockerfile"] == "docker/Dockerfile"
    assert (DOCKER.parent / services["airflow-init"]["build"]["dockerfile"]).is_file()


def test_each_airflow_component_runs_its_own_command_with_the_dags_mounted(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name in AIRFLOW_PARTS:
        command = services[name]["command"]
        assert command[:2] == ["airflow", name.removeprefix("airflow-").replace("apiserver", "api-server")]
        mounts = {m.split(":")[1]: m.split(":")[0] for m in services[name]["volumes"]}
        assert mounts[env(services[name])["AIRFLOW__CORE__DAGS_FOLDER"]] == "../dags"
        assert (DOCKER / mounts[env(services[name])["AIRFLOW__CORE__DAGS_FOLDER"]]).resolve().is_dir()


def test_ports_and_hostnames_point_at_services_that_exist(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert "8080:8080" in services["airflow-apiserver"]["ports"]
    # Only the Airflow UI is published: Kafka and Spark Connect (which runs any code sent to it) stay internal.
    assert {name for name, service in services.items() if service.get("ports")} == {"airflow-apiserver"}
    airflow = env(services["airflow-scheduler"])
    assert airflow["RBP_KAFKA_BOOTSTRAP"] == "kafka:9092"
    assert airflow["SPARK_REMOTE"] == "sc://spark-connect:15002"
    assert airflow["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"].startswith("http://airflow-apiserver:8080/")
    assert "@postgres:5432/" in airflow["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    assert f"AIRFLOW_CONN_{KAFKA_CONN_ID.upper()}" in airflow
    assert f"AIRFLOW_CONN_{SPARK_CONN_ID.upper()}" in airflow
    assert '"spark-connect"' in airflow[f"AIRFLOW_CONN_{SPARK_CONN_ID.upper()}"]


def test_the_lake_volume_is_shared_by_airflow_and_spark_at_the_same_path(compose: dict[str, Any]) -> None:
    services = compose["services"]
    lake_root = Path(env(services["airflow-scheduler"])["RBP_LAKE_ROOT"])
    for name in (*AIRFLOW_PARTS, "spark-connect"):
        mounts = {m.split(":")[0]: m.split(":")[1] for m in services[name]["volumes"]}
        assert mounts.get("lake") == str(lake_root.parent), name
    assert set(compose["volumes"]) >= {"lake", "kafka-data", "postgres-data"}


def test_every_rbp_setting_the_code_reads_is_provided_and_valid(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The nested KIP-441 value is provided by its settings' own RBP_ names (RBP_KIP441 is the JSON alternative).
    names = {*Settings.model_fields, *Kip441Settings.model_fields} - {"kip441"} - OPTIONAL
    wanted = {f"RBP_{name.upper()}" for name in names}
    for name in (*AIRFLOW_PARTS, "demo-fleet"):
        provided = env(compose["services"][name])
        expected = wanted - SIGNING_ONLY if name == "demo-fleet" else wanted
        assert expected - set(provided) == set(), name
        for key, value in provided.items():
            if key.startswith("RBP_"):
                monkeypatch.setenv(key, value)
        Settings()  # every value parses


def test_the_fleet_verifies_plans_with_the_key_the_pipeline_signs_with(compose: dict[str, Any]) -> None:
    services = compose["services"]
    fleet, airflow = env(services["demo-fleet"]), env(services["airflow-scheduler"])
    assert fleet["RBP_PLAN_VERIFY_KEYS"].startswith(airflow["RBP_PLAN_KEY_ID"] + "=")
    assert not SIGNING_ONLY & set(fleet)  # the fleet can verify, never sign
    assert "secrets" not in services["demo-fleet"]
    assert services["airflow-scheduler"]["secrets"] == ["plan_signing_key"]
    assert fleet["RBP_KAFKA_BOOTSTRAP"] == airflow["RBP_KAFKA_BOOTSTRAP"]
    command = services["demo-fleet"]["command"]
    for flag in (
        "acceptable-recovery-lag",
        "max-warmup-replicas",
        "num-standby-replicas",
        "probing-rebalance-interval-ms",
    ):
        given = command[command.index(f"--{flag}") + 1]
        assert given == airflow[f"RBP_{flag.upper().replace('-', '_')}"], flag


def embedded_kafka_version() -> str:
    """The Apache Kafka version the embedded broker fetches (jobs/local/kafka/pom.xml)."""
    pom = ElementTree.parse(Path(__file__).resolve().parents[2] / "jobs" / "local" / "kafka" / "pom.xml")
    version = pom.find("{http://maven.apache.org/POM/4.0.0}properties/{http://maven.apache.org/POM/4.0.0}kafka.version")
    assert version is not None and version.text
    return version.text


def test_no_password_has_a_default(compose: dict[str, Any]) -> None:
    text = (DOCKER / "docker-compose.yml").read_text()
    defaulted = re.findall(r"\$\{([A-Z_]*(?:PASSWORD|SECRET)[A-Z_]*):-", text)
    assert defaulted == [], f"passwords with a default: {defaulted}"
    assert "POSTGRES_PASSWORD" in SECRETS
