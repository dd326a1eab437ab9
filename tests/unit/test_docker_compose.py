"""The deployment in docker/ (no Docker engine here): the compose file's services, ports, volumes and environment
wire up, every RBP_ setting the code reads is provided with a value the Settings accept, and it has no open doors:
one published port (the Airflow UI), Kafka reachable only with SASL/SCRAM and ACLs applied before any client starts,
Airflow behind the FAB auth manager, and no secret with a default."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
import yaml

from jobs.cli.main import _build_parser
from jobs.orchestration.tasks import KAFKA_CONN_ID, SPARK_CONN_ID, kafka_from_connection
from jobs.settings import Settings
from schemas.kip441 import kip441_settings

DOCKER = Path(__file__).resolve().parents[2] / "docker"
AIRFLOW_PARTS = ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer")
WORKERS = ("airflow-worker", "airflow-signer")  # the Edge workers: every task runs on one of them
# restore_rate unset: "estimate no durations"; spark_remote (Spark's own SPARK_REMOTE) unset: the embedded engine,
# and Airflow reaches Spark through its Connection.
# Unset means a default the code finds itself (streams_reader_jar: the jar `make java` built beside the code;
# broker_assignor: read from the brokers' group.streams.assignors).
# plan_signing_passphrase_file and the Airflow API login publish reads the answer with: set in the signer only,
# asserted below.
OPTIONAL = {
    "restore_rate",
    "spark_remote",
    "streams_reader_jar",
    "broker_assignor",
    "plan_signing_passphrase_file",
    "airflow_api_url",
    "airflow_api_user",
    "airflow_api_password_file",
}
SECRETS = {  # what an operator's .env provides
    "RBP_PLAN_VERIFY_KEYS": "k1=" + "ab" * 32,
    "RBP_PLAN_KEY_ID": "k1",
    "RBP_APPROVERS": "3,4",
    "RBP_PLAN_SIGNING_KEY_PEM": "/etc/rbp/k1.pem",
    "RBP_PLAN_SIGNING_PASSPHRASE_PATH": "/etc/rbp/k1.passphrase",
    "RBP_AIRFLOW_SIGNER_PASSWORD_PATH": "/etc/rbp/signer-login",
    "RBP_TLS_DIR": "/etc/rbp/tls",
    "AIRFLOW_JWT_SECRET": "j",
    "AIRFLOW_API_SECRET_KEY": "s",
    "AIRFLOW_ADMIN_USERNAME": "root",
    "AIRFLOW_ADMIN_PASSWORD": "a",
    "AIRFLOW_ADMIN_EMAIL": "root@example.org",
    "POSTGRES_PASSWORD": "p",
    "RBP_KAFKA_ADMIN_PASSWORD": "ka",
    "RBP_KAFKA_PIPELINE_PASSWORD": "kp",
    "RBP_KAFKA_APP_PASSWORD": "kf",
    "RBP_KAFKA_STREAMS_APP_PASSWORD": "ks",
    "RBP_SPARK_CONNECT_TOKEN": "t" * 32,
}
FAB = "airflow.providers.fab.auth_manager.fab_auth_manager.FabAuthManager"
SIGNING_ONLY = {
    "RBP_PLAN_SIGNING_KEY_FILE",
    "RBP_PLAN_KEY_ID",
    "RBP_PLAN_SIGNING_PASSPHRASE_FILE",
}  # the pipeline's: a live group must not hold them


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
    # Kafka is our own image's kafka stage, made of the embedded broker's jars (the same pom): one Kafka everywhere.
    kafka = services["kafka"]
    assert kafka["image"] == "rebalance-planner-kafka:latest" and kafka["build"]["target"] == "kafka"
    dockerfile = (DOCKER / "Dockerfile").read_text(encoding="utf-8")
    assert "COPY jobs/local/kafka/pom.xml " in dockerfile and "\nFROM ${PYTHON_IMAGE} AS kafka\n" in dockerfile
    assert "controller" in properties(DOCKER / "kafka" / "server.properties")["process.roles"]  # KRaft
    assert services["postgres"]["image"].startswith("postgres:16-")
    # Spark Connect is our own image's spark-connect stage: pyspark's Spark and the delta-spark jars the tests
    # use, fetched by mvn at build time; the container starts `rebalance-planner spark-connect`, downloading nothing.
    spark = services["spark-connect"]
    assert spark["build"]["target"] == "spark-connect" and spark["command"][1:3] == [
        "rebalance-planner",
        "spark-connect",
    ]
    assert spark["command"][0] == "/opt/rebalance-planner/docker/spark-connect/start.sh"
    assert not any("--packages" in str(arg) or "jars.packages" in str(arg) for arg in spark["command"])
    assert "FROM project AS spark-connect" in dockerfile and "python -m jobs.local.jvm spark" in dockerfile
    for name in (*AIRFLOW_PARTS, "airflow-init", "demo-fleet"):
        assert services[name]["image"] == "rebalance-planner:latest", name
    assert services["airflow-init"]["build"]["dockerfile"] == "docker/Dockerfile"
    assert (DOCKER.parent / services["airflow-init"]["build"]["dockerfile"]).is_file()


DIGEST = r"@sha256:[0-9a-f]{64}"


def test_every_image_from_outside_is_pinned_by_digest(compose: dict[str, Any]) -> None:
    """A tag can be moved to other contents; a digest cannot. Our own images are built on the pinned base."""
    ours = {s["image"] for s in compose["services"].values() if "build" in s}
    pulled = {name: s["image"] for name, s in compose["services"].items() if s["image"] not in ours}
    assert pulled.keys() == {"postgres"}  # every other service runs an image built from docker/Dockerfile
    assert all(re.fullmatch(r"[a-z0-9./:-]+" + DIGEST, image) for image in pulled.values()), pulled
    dockerfile = (DOCKER / "Dockerfile").read_text(encoding="utf-8")
    (default,) = re.findall(r"^ARG PYTHON_IMAGE=(\S+)$", dockerfile, flags=re.MULTILINE)
    assert re.fullmatch(r"python:3\.11-slim-bookworm" + DIGEST, default)
    # Every stage starts from that base or from a stage of this file.
    stages = re.findall(r"^FROM (\S+) AS (\S+)$", dockerfile, flags=re.MULTILINE)
    assert stages and all(base == "${PYTHON_IMAGE}" or base in {n for _, n in stages} for base, _ in stages)
    # Compose passes the same default when PYTHON_IMAGE is not set.
    assert resolved(compose["x-airflow"]["build"]["args"]["PYTHON_IMAGE"]) == default


def test_task_logs_are_read_from_a_shared_volume_not_served_over_http(compose: dict[str, Any]) -> None:
    """Airflow's log server speaks plain HTTP; with the logs on one volume none runs."""
    services = compose["services"]
    for name in ("airflow-scheduler", "airflow-triggerer"):
        assert "--skip-serve-logs" in services[name]["command"], name
    for name in (*AIRFLOW_PARTS, *WORKERS):
        assert "airflow-logs:/opt/airflow/logs" in services[name]["volumes"], name
    assert "airflow-logs" in compose["volumes"]
    assert "/opt/airflow/logs" in (DOCKER / "Dockerfile").read_text(encoding="utf-8")  # made the airflow user's


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
    assert [resolved(p) for p in services["airflow-apiserver"]["ports"]] == ["8080:8080"]
    # Only the Airflow UI is published: Kafka and Spark Connect (which runs any code sent to it) stay internal.
    assert {name for name, service in services.items() if service.get("ports")} == {"airflow-apiserver"}
    airflow = env(services["airflow-worker"])
    assert airflow["RBP_KAFKA_BOOTSTRAP"] == "kafka:9092"
    assert (
        airflow["SPARK_REMOTE"] == f"sc://spark-connect:15002/;use_ssl=true;token={SECRETS['RBP_SPARK_CONNECT_TOKEN']}"
    )
    assert airflow["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"].startswith("https://airflow-apiserver:8080/")
    assert airflow["AIRFLOW__EDGE__API_URL"].startswith("https://airflow-apiserver:8080/edge_worker/")
    assert "@postgres:5432/" in env(services["airflow-scheduler"])["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
    assert f"AIRFLOW_CONN_{KAFKA_CONN_ID.upper()}" in airflow
    assert f"AIRFLOW_CONN_{SPARK_CONN_ID.upper()}" in airflow
    assert '"spark-connect"' in airflow[f"AIRFLOW_CONN_{SPARK_CONN_ID.upper()}"]


def test_the_metadata_database_speaks_tls_only_and_every_airflow_part_verifies_it(compose: dict[str, Any]) -> None:
    services = compose["services"]
    postgres = services["postgres"]
    command = postgres["command"]
    settings = dict(command[i + 1].split("=", 1) for i, word in enumerate(command) if word == "-c")
    assert command[0] == "postgres" and settings["ssl"] == "on" and settings["ssl_min_protocol_version"] == "TLSv1.2"
    assert (
        {settings["ssl_cert_file"], settings["ssl_key_file"]}
        == {f"/run/secrets/{name}" for name in postgres["secrets"]}
        == {"/run/secrets/postgres_tls_cert", "/run/secrets/postgres_tls_key"}
    )
    assert {
        s for name, service in services.items() if name != "postgres" for s in service.get("secrets", [])
    }.isdisjoint({"postgres_tls_key"})
    # The server's pg_hba.conf: TLS for every network client, the socket only inside the container, plain refused.
    mounts = {m.split(":")[1]: m.split(":")[0] for m in postgres["volumes"]}
    hba = (DOCKER / mounts[settings["hba_file"]]).read_text(encoding="utf-8")
    rules = [line.split() for line in hba.splitlines() if line.strip() and not line.startswith("#")]
    assert rules == [
        ["local", "all", "all", "trust"],
        ["hostssl", "all", "all", "all", "scram-sha-256"],
        ["hostnossl", "all", "all", "all", "reject"],
    ]
    for name in (*AIRFLOW_PARTS, "airflow-init"):
        airflow = env(services[name])
        assert (airflow["PGSSLMODE"], airflow["PGSSLROOTCERT"]) == ("verify-full", "/run/secrets/tls_ca"), name
        assert "tls_ca" in services[name]["secrets"], name


def test_the_lake_volume_is_shared_by_airflow_and_spark_at_the_same_path(compose: dict[str, Any]) -> None:
    services = compose["services"]
    lake_root = Path(env(services["airflow-worker"])["RBP_LAKE_ROOT"])
    for name in (*AIRFLOW_PARTS, *WORKERS, "spark-connect"):
        mounts = {m.split(":")[0]: m.split(":")[1] for m in services[name]["volumes"]}
        assert mounts.get("lake") == str(lake_root.parent), name
    assert set(compose["volumes"]) >= {"lake", "kafka-data", "postgres-data"}


def test_every_rbp_setting_the_code_reads_is_provided_and_valid(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    # RBP_KIP441 is the live groups' own settings (the fleet passes them as flags); planning reads overrides only.
    names = {*Settings.model_fields} - {"kip441"} - OPTIONAL
    wanted = {f"RBP_{name.upper()}" for name in names}
    for name in (*AIRFLOW_PARTS, *WORKERS, "demo-fleet"):
        provided = env(compose["services"][name])
        expected = wanted if name == "airflow-signer" else wanted - SIGNING_ONLY
        if name in AIRFLOW_PARTS:  # Airflow's own parts run no task: no login to Kafka (nor Spark, below)
            expected = expected - {"RBP_KAFKA_CONFIG"}
        assert expected - set(provided) == set(), name
        for key, value in provided.items():
            if key.startswith("RBP_"):
                monkeypatch.setenv(key, value)
        Settings()  # every value parses


def test_the_fleet_verifies_plans_with_the_key_the_pipeline_signs_with(compose: dict[str, Any]) -> None:
    services = compose["services"]
    fleet, airflow = env(services["demo-fleet"]), env(services["airflow-signer"])
    assert fleet["RBP_PLAN_VERIFY_KEYS"].startswith(airflow["RBP_PLAN_KEY_ID"] + "=")
    assert not SIGNING_ONLY & set(fleet)  # the fleet can verify, never sign
    assert services["demo-fleet"]["secrets"] == ["tls_ca"]  # the CA it verifies Kafka with, no key
    assert services["airflow-signer"]["secrets"] == [
        "tls_ca",
        "plan_signing_key",
        "plan_signing_passphrase",
        "airflow_signer_password",
    ]
    assert env(services["airflow-signer"])["RBP_PLAN_SIGNING_PASSPHRASE_FILE"] == "/run/secrets/plan_signing_passphrase"
    # Publish runs on the signer; no other part holds the key, its passphrase or their settings.
    for name, service in services.items():
        if name != "airflow-signer":
            held = set(service.get("secrets", [])) & {"plan_signing_key", "plan_signing_passphrase"}
            assert not held and not SIGNING_ONLY & set(env(service)), name
    assert fleet["RBP_KAFKA_BOOTSTRAP"] == airflow["RBP_KAFKA_BOOTSTRAP"]
    command = services["demo-fleet"]["command"]
    for flag in (
        "acceptable-recovery-lag",
        "max-warmup-replicas",
        "num-standby-replicas",
        "probing-rebalance-interval-ms",
    ):
        # The fleet runs with its own settings and reports them; the pipeline plans each group with those.
        given = int(command[command.index(f"--{flag}") + 1])
        assert kip441_settings()[flag.replace("-", "_")].check(given, "demo-fleet") == given, flag
    assert json.loads(airflow["RBP_KIP441_OVERRIDES"]) == {}  # no override unless an operator sets one


def embedded_kafka_version(pom_path: str = "jobs/local/kafka/pom.xml") -> str:
    """The Apache Kafka version a pom of the repository names (by default the embedded broker's)."""
    pom = ElementTree.parse(Path(__file__).resolve().parents[2] / pom_path)
    version = pom.find("{http://maven.apache.org/POM/4.0.0}properties/{http://maven.apache.org/POM/4.0.0}kafka.version")
    assert version is not None and version.text
    return version.text


def test_the_broker_the_plugin_and_the_test_apps_use_one_kafka_release() -> None:
    poms = ("assignor/java/pom.xml", "tests/support/streams_examples/pom.xml")
    assert {p: embedded_kafka_version(p) for p in poms} == dict.fromkeys(poms, embedded_kafka_version())


def test_no_password_has_a_default(compose: dict[str, Any]) -> None:
    text = (DOCKER / "docker-compose.yml").read_text()
    defaulted = re.findall(r"\$\{([A-Z_]*(?:PASSWORD|SECRET)[A-Z_]*):-", text)
    assert defaulted == [], f"passwords with a default: {defaulted}"
    assert "POSTGRES_PASSWORD" in SECRETS


def properties(path: Path) -> dict[str, str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    pairs = (line.split("=", 1) for line in lines if line.strip() and not line.startswith("#"))
    return {key.strip(): value.strip() for key, value in pairs}


def test_kafka_is_reachable_only_with_sasl_scram_and_denies_what_no_acl_allows(compose: dict[str, Any]) -> None:
    kafka = compose["services"]["kafka"]
    assert not kafka.get("ports")
    # Our properties, not the image's KAFKA_* rendering (which could bring a PLAINTEXT listener back).
    assert kafka["entrypoint"] == ["/bin/bash", "/opt/rbp/kafka/start.sh"]
    assert "./kafka:/opt/rbp/kafka:ro" in kafka["volumes"]
    assert not [k for k in kafka["environment"] if k.startswith("KAFKA_") and k != "KAFKA_CLUSTER_ID"]
    config = properties(DOCKER / "kafka" / "server.properties")
    protocols = dict(pair.split(":") for pair in config["listener.security.protocol.map"].split(","))
    controller = config["controller.listener.names"]
    listeners = dict(item.split("://", 1) for item in config["listeners"].split(","))
    for name, address in listeners.items():
        if name == controller:  # the broker half reaches its controller half over loopback; no container can
            assert address.startswith("127.0.0.1:"), address
            assert config["controller.quorum.voters"] == f"1@{address}"
        else:
            assert protocols[name] == "SASL_SSL", name
    advertised = config["advertised.listeners"].split(",")
    assert advertised == ["SASL_SSL://kafka:9092"]
    assert "PLAINTEXT" not in config["listeners"] and "PLAINTEXT" not in config["advertised.listeners"]
    assert protocols[config["inter.broker.listener.name"]] == "SASL_SSL"
    # The broker's certificate and the CA come from the deploy-time secrets (docker/tls/make-certs.sh).
    assert config["ssl.keystore.location"] == "/run/secrets/kafka_tls_keystore"
    assert config["ssl.truststore.location"] == "/run/secrets/tls_ca"
    assert set(kafka["secrets"]) == {"kafka_tls_keystore", "kafka_tls_keystore_password", "tls_ca"}
    assert config["sasl.enabled.mechanisms"] == config["sasl.mechanism.inter.broker.protocol"] == "SCRAM-SHA-512"
    assert config["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert config["allow.everyone.if.no.acl.found"] == "false"
    assert config["super.users"] == "User:admin;User:ANONYMOUS"  # ANONYMOUS: only the loopback controller listener
    assert config["auto.create.topics.enable"] == "false"


def scram_users(compose: dict[str, Any]) -> dict[str, str]:
    """user -> password as the kafka service formats them into its storage (docker/kafka/start.sh)."""
    kafka = env(compose["services"]["kafka"])
    users = {"admin": kafka["SCRAM_ADMIN_PASSWORD"]}
    script = (DOCKER / "kafka" / "start.sh").read_text(encoding="utf-8")
    assert "kafka-storage.sh format --ignore-formatted" in script
    for role in ("PIPELINE", "APP", "STREAMS_APP"):
        assert (
            f'--add-scram "SCRAM-SHA-512=[name=${{SCRAM_{role}_USER}},password=${{SCRAM_{role}_PASSWORD}}]"' in script
        )
        users[kafka[f"SCRAM_{role}_USER"]] = kafka[f"SCRAM_{role}_PASSWORD"]
    assert '--add-scram "SCRAM-SHA-512=[name=admin,password=${SCRAM_ADMIN_PASSWORD}]"' in script
    assert script.index("kafka-storage.sh format") < script.index("exec /opt/kafka/bin/kafka-server-start.sh")
    return users


def sasl_login(config: dict[str, str]) -> tuple[str, str]:
    assert config["security.protocol"] == "SASL_SSL" and config["sasl.mechanism"] == "SCRAM-SHA-512", config
    assert config["ssl.ca.location"] == "/run/secrets/tls_ca", config  # the broker verified against the CA
    return config["sasl.username"], config["sasl.password"]


def test_every_kafka_client_logs_in_as_its_own_scram_user(compose: dict[str, Any]) -> None:
    services, users = compose["services"], scram_users(compose)
    clients = {name: env(s) for name, s in services.items() if "RBP_KAFKA_CONFIG" in env(s)}
    # Airflow's own parts run no task, so they hold no Kafka login: only the workers, where tasks run.
    assert set(clients) == {"kafka-init", "demo-fleet", "streams-app", *WORKERS}
    for name in ("airflow-init", *AIRFLOW_PARTS):
        assert not {"RBP_KAFKA_CONFIG", f"AIRFLOW_CONN_{KAFKA_CONN_ID.upper()}"} & set(env(services[name])), name
    logins = {name: sasl_login(json.loads(c["RBP_KAFKA_CONFIG"])) for name, c in clients.items()}
    for name, (user, password) in logins.items():
        assert users[user] == password, name  # the credentials formatted into Kafka's storage
    assert logins["kafka-init"][0] == "admin"
    assert {logins[name][0] for name in WORKERS} == {"rbp-pipeline"}
    assert logins["demo-fleet"][0] == "rbp-demo-fleet"
    assert logins["streams-app"][0] == "rbp-streams-app"  # the Kafka Streams app: an application login of its own
    # The Airflow Connection replaces RBP_KAFKA_CONFIG in the tasks: it must carry the same login.
    connection = json.loads(clients["airflow-worker"][f"AIRFLOW_CONN_{KAFKA_CONN_ID.upper()}"])
    bootstrap, extra = kafka_from_connection(connection["extra"])
    assert bootstrap == "kafka:9092" and sasl_login(extra) == logins["airflow-worker"]


def test_acls_are_applied_by_a_one_shot_service_before_any_client_starts(compose: dict[str, Any]) -> None:
    services = compose["services"]
    init = services["kafka-init"]
    assert init["image"] == "rebalance-planner:latest" and "restart" not in init
    assert init["depends_on"] == {"kafka": {"condition": "service_healthy"}}
    assert init["command"][0] == "rebalance-planner"
    args = _build_parser().parse_args(init["command"][1:])  # the real command line, as the container runs it
    assert args.command == "kafka-acls"
    logins = {
        name: sasl_login(json.loads(env(services[name])["RBP_KAFKA_CONFIG"]))[0]
        for name in (*WORKERS, "demo-fleet", "streams-app")
    }
    # Only Airflow's tasks write plans.
    assert args.pipeline_user == logins["airflow-worker"] == logins["airflow-signer"]
    # The applications read plans and write reports, nothing more of the product's.
    assert args.app_user == [logins["demo-fleet"], logins["streams-app"]]
    # Their own topics and groups: the fleet's groups are group-N; the Streams app's id, topics and group streams-app-*.
    app_id = env(services["streams-app"])["STREAMS_APP_ID"]
    assert app_id.startswith("streams-app-")
    assert args.app_prefix == [f"{logins['demo-fleet']}=group-", f"{logins['streams-app']}=streams-app-"]
    topics = env(init)
    assert (topics["RBP_PLANS_TOPIC"], topics["RBP_REPORTS_TOPIC"]) == (
        env(services["airflow-scheduler"])["RBP_PLANS_TOPIC"],
        env(services["airflow-scheduler"])["RBP_REPORTS_TOPIC"],
    )
    for name in (*WORKERS, "demo-fleet", "streams-app"):
        assert services[name]["depends_on"]["kafka-init"] == {"condition": "service_completed_successfully"}, name
    # Every client's SCRAM login is (re)set by the init with the password that client uses, so a user added after
    # Kafka's storage was formatted still gets in; Kafka's own start (start.sh) names the same users.
    passwords = {
        name: sasl_login(json.loads(env(services[name])["RBP_KAFKA_CONFIG"]))
        for name in ("airflow-worker", "demo-fleet", "streams-app")
    }
    set_by_init = {user: topics[variable] for user, variable in (s.split("=", 1) for s in args.scram_user)}
    assert set_by_init == dict(passwords.values())
    kafka = env(services["kafka"])
    assert {kafka[k] for k in ("SCRAM_PIPELINE_USER", "SCRAM_APP_USER", "SCRAM_STREAMS_APP_USER")} == set(set_by_init)


def test_airflow_uses_the_fab_auth_manager_with_an_admin_from_required_settings(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for name in (*AIRFLOW_PARTS, "airflow-init"):
        airflow = services[name]["environment"]
        assert airflow["AIRFLOW__CORE__AUTH_MANAGER"] == FAB, name
        assert not [k for k in airflow if "SIMPLE_AUTH_MANAGER" in k], name
        assert airflow["AIRFLOW__API__SECRET_KEY"].startswith("${AIRFLOW_API_SECRET_KEY:?"), name
    init = services["airflow-init"]
    for variable in ("AIRFLOW_ADMIN_USERNAME", "AIRFLOW_ADMIN_PASSWORD", "AIRFLOW_ADMIN_EMAIL"):
        assert init["environment"][variable].startswith(f"${{{variable}:?"), variable
    script = init["command"][2]
    assert init["command"][:2] == ["bash", "-c"] and script.startswith("airflow db migrate && ")
    creates = [shlex.split(part.replace("$$", "$")) for part in script.split(" && ")[1:]]
    assert all(create[:3] == ["airflow", "users", "create"] for create in creates)
    admin, signer = (dict(zip(create[3::2], create[4::2], strict=True)) for create in creates)
    assert admin["--role"] == "Admin"
    assert (admin["--username"], admin["--password"]) == ("$AIRFLOW_ADMIN_USERNAME", "$AIRFLOW_ADMIN_PASSWORD")
    # The signer's login reads the approval's answer and cannot give one: a Viewer, its password a secret file.
    assert (signer["--role"], signer["--username"]) == ("Viewer", "rbp-signer")
    assert signer["--password"] == "$(cat /run/secrets/airflow_signer_password)"
    holders = [n for n, s in services.items() if "airflow_signer_password" in (s.get("secrets") or [])]
    assert sorted(holders) == ["airflow-init", "airflow-signer"]
    signing = env(services["airflow-signer"])
    assert signing["RBP_AIRFLOW_API_URL"] == "https://airflow-apiserver:8080"
    assert (signing["RBP_AIRFLOW_API_USER"], signing["RBP_AIRFLOW_API_PASSWORD_FILE"]) == (
        "rbp-signer",
        "/run/secrets/airflow_signer_password",
    )
    # Only the init container sees the admin's password.
    assert [n for n, s in services.items() if "AIRFLOW_ADMIN_PASSWORD" in (s.get("environment") or {})] == [
        "airflow-init"
    ]
    # The provider is installed in the image, pinned, from the file the Dockerfile copies.
    dockerfile = (DOCKER / "Dockerfile").read_text(encoding="utf-8")
    # The image's own lock: hashed, runtime only (no dev extra), the project's versions except what FAB moves.
    assert "uv pip install --system --require-hashes -r docker/requirements.lock" in dockerfile
    assert "COPY requirements.lock" not in dockerfile  # the project's (dev) lock is not copied in
    image_lock = (DOCKER / "requirements.lock").read_text()
    pins = dict(re.findall(r"^([a-z0-9.-]+)==([^ \\]+) \\$", image_lock, flags=re.MULTILINE))
    blocks = re.split(r"\n(?=[a-z0-9])", image_lock.split("\n", 2)[2])
    assert all("--hash=sha256:" in block for block in blocks if "==" in block)
    dev = re.search(r"dev = \[(.*?)\]", (DOCKER.parent / "pyproject.toml").read_text(), flags=re.DOTALL)
    assert dev is not None
    for name in re.findall(r'"([a-z0-9-]+)==', dev.group(1)):
        if name != "psutil":  # also one of Airflow's own runtime dependencies
            assert name not in pins, f"dev tool {name} in the image"
    assert pins["apache-airflow"] == "3.3.2" and pins["apache-airflow-providers-fab"] == "3.10.2"
    assert {"psycopg2-binary", "asyncpg"} <= pins.keys()
    project = dict(re.findall(r"^([a-z0-9.-]+)==(\S+)$", (DOCKER.parent / "requirements.lock").read_text(), re.M))
    changed = {name for name, version in pins.items() if name in project and project[name] != version}
    assert changed == {"python-dateutil"}  # what FAB moves (Flask-AppBuilder needs <3); nothing else


def test_no_secret_has_a_default_and_none_is_written_in_the_file(compose: dict[str, Any]) -> None:
    text = (DOCKER / "docker-compose.yml").read_text()
    references = re.findall(r"\$\{([A-Z_]+)(:[-?])?", text)
    secret = re.compile(r"PASSWORD|SECRET|_KEY")
    defaulted = sorted({name for name, op in references if secret.search(name) and op != ":?"})
    assert defaulted == [], f"secrets with a default or optional: {defaulted}"
    # Every password or secret a service is given is a required reference, never a literal.
    required = re.compile(r"\$\{[A-Z_]+:\?[^}]*\}")
    for name, service in compose["services"].items():
        for key, value in (service.get("environment") or {}).items():
            if re.search("PASSWORD|SECRET", key) and not str(value).startswith("/run/secrets/"):
                assert required.fullmatch(str(value)), (name, key)
            if str(value).startswith("{"):
                parsed = json.loads(str(value))
                login = parsed.get("extra", parsed)
                if "sasl.password" in login:
                    assert required.fullmatch(login["sasl.password"]), (name, key)
    airflow = compose["x-airflow-core-env"]
    assert "://airflow:${POSTGRES_PASSWORD:?" in airflow["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]


def test_the_api_server_serves_https_and_every_airflow_part_verifies_it(compose: dict[str, Any]) -> None:
    services = compose["services"]
    api = env(services["airflow-apiserver"])
    assert api["AIRFLOW__API__SSL_CERT"] == "/run/secrets/airflow_tls_cert"
    assert api["AIRFLOW__API__SSL_KEY"] == "/run/secrets/airflow_tls_key"
    for name in (*AIRFLOW_PARTS, *WORKERS):
        settings = env(services[name])
        assert settings["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"].startswith("https://airflow-apiserver:"), name
        assert settings["AIRFLOW__API__SSL_CA_FILE"] == "/run/secrets/tls_ca", name
        assert "tls_ca" in services[name]["secrets"], name
        # Only the api-server holds its certificate's key.
        assert ("airflow_tls_key" in services[name]["secrets"]) == (name == "airflow-apiserver"), name
    # The TLS material is made at deploy time, never committed (docker/tls holds only the script).
    assert sorted(p.name for p in (DOCKER / "tls").iterdir()) == ["make-certs.sh"]
    declared = compose["secrets"]
    assert all(declared[n]["file"].startswith("${RBP_TLS_DIR:?") for n in declared if "tls" in n)


def test_no_task_runs_where_the_database_login_or_airflows_token_key_is(compose: dict[str, Any]) -> None:
    """Edge executor: tasks run on the two workers, which reach Airflow through the api-server only; Airflow's own
    parts hold the database login, and only the api-server and the scheduler the key Airflow signs its tokens with
    (a task holding it could act as any person, an approver included)."""
    services = compose["services"]
    for name in (*AIRFLOW_PARTS, *WORKERS):
        settings = env(services[name])
        assert settings["AIRFLOW__CORE__EXECUTOR"] == "airflow.providers.edge3.executors.EdgeExecutor", name
        assert settings["AIRFLOW__EDGE__API_URL"] == "https://airflow-apiserver:8080/edge_worker/v1/rpcapi", name
        in_core = name in AIRFLOW_PARTS
        assert ("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN" in settings) == in_core, name
        raw = " ".join(str(v) for v in (services[name].get("environment") or {}).values())
        assert ("${POSTGRES_PASSWORD:?" in raw) == in_core, name
        holds_token_key = name in ("airflow-apiserver", "airflow-scheduler")
        assert ("airflow_jwt_key" in services[name]["secrets"]) == holds_token_key, name
        assert ("AIRFLOW__API_AUTH__JWT_PRIVATE_KEY_PATH" in settings) == holds_token_key, name
        # The shared secret authenticates the workers to the Edge API (the api-server checks it); it signs nothing
        # Airflow accepts as a person or a task once the private key is set.
        assert ("AIRFLOW__API_AUTH__JWT_SECRET" in settings) == (name in (*WORKERS, "airflow-apiserver")), name
    assert compose["secrets"]["airflow_jwt_key"]["file"] == "${RBP_TLS_DIR:?set RBP_TLS_DIR}/airflow-jwt.key"
    assert "openssl genpkey -algorithm ed25519" in (DOCKER / "tls" / "make-certs.sh").read_text(encoding="utf-8")
    # Both workers are Airflow's Edge worker; the signer serves its queue through the guard that refuses all else.
    launcher = ["python", "-m", "jobs.orchestration.edge_worker"]
    assert services["airflow-worker"]["command"][:5] == [*launcher, "--queues", "default"]
    assert services["airflow-signer"]["command"][:4] == [*launcher, "--signer"]
    assert "\napache-airflow-providers-edge3==" in (DOCKER / "requirements.lock").read_text(encoding="utf-8")


def test_spark_connect_answers_only_over_tls_with_the_token(compose: dict[str, Any]) -> None:
    """The server listens on its container's loopback with the token; haproxy serves TLS (ALPN h2, TLS 1.2+) on the
    port the others reach; only the Edge workers (where tasks run) hold the token, and they verify the proxy against
    the CA."""
    services = compose["services"]
    spark = services["spark-connect"]
    start = (DOCKER / "spark-connect" / "start.sh").read_text(encoding="utf-8")
    assert '--host 127.0.0.1 --port "$SPARK_CONNECT_PORT" --token-file' in start
    haproxy = (DOCKER / "spark-connect" / "haproxy.cfg").read_text(encoding="utf-8")
    bind = next(line.split() for line in haproxy.splitlines() if line.strip().startswith("bind "))
    assert bind[1] == '"0.0.0.0:${SPARK_CONNECT_TLS_PORT}"' and "ssl" in bind and bind[bind.index("alpn") + 1] == "h2"
    assert "ssl-min-ver TLSv1.2" in haproxy and 'server local "127.0.0.1:${SPARK_CONNECT_PORT}"' in haproxy
    dockerfile = (DOCKER / "Dockerfile").read_text(encoding="utf-8")
    assert "maven haproxy" in dockerfile and "COPY docker/spark-connect ./docker/spark-connect" in dockerfile
    assert set(spark["secrets"]) == {"spark_connect_tls_cert", "spark_connect_tls_key"}
    assert compose["secrets"]["spark_connect_tls_key"]["file"].endswith("/spark-connect.key")
    token = SECRETS["RBP_SPARK_CONNECT_TOKEN"]
    holders = {name for name, service in services.items() if any(token in v for v in env(service).values())}
    assert holders == {"spark-connect", *WORKERS}, holders
    for name in WORKERS:
        airflow = env(services[name])
        assert airflow["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"] == "/run/secrets/tls_ca", name
        assert "tls_ca" in services[name]["secrets"], name
        extra = json.loads(airflow[f"AIRFLOW_CONN_{SPARK_CONN_ID.upper()}"])["extra"]
        assert extra == {"use_ssl": "true", "token": token}, name
    others = {s for name, service in services.items() if name != "spark-connect" for s in service.get("secrets", [])}
    assert others.isdisjoint({"spark_connect_tls_key"})
