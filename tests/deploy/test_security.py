"""Security of the running stack, checked live: what is published, who may log in, what Kafka refuses (no TLS, an
unknown CA, no login, an ACL), that the api-server speaks HTTPS only with the deployment's certificate, that
PostgreSQL speaks TLS only, that Spark Connect answers only a client with its token over TLS, where the signing key
and its passphrase are."""

from __future__ import annotations

import json
import os
import ssl
import subprocess

import httpx
import pytest

from tests.deploy.conftest import Stack

# Run inside the demo fleet's container (on the stack's network, with confluent_kafka): one Kafka attempt, printing
# what happened on one line. argv: the client config as JSON, then "list" or "produce".
KAFKA_PROBE = """
import json, sys
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient
config = {"bootstrap.servers": "kafka:9092", "socket.timeout.ms": 5000, **json.loads(sys.argv[1])}
if sys.argv[2] == "list":
    try:
        print("topics", sorted(AdminClient(config).list_topics(timeout=8).topics))
    except KafkaException as err:
        print("refused", err.args[0].name())
elif sys.argv[2] == "alter-group":
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType
    entry = ConfigEntry("consumer.heartbeat.interval.ms", "5000", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.GROUP, sys.argv[3], incremental_configs=[entry])
    admin = AdminClient(config)  # kept referenced: a collected client fails its futures with _DESTROY
    try:
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(timeout=20)
        print("altered")
    except KafkaException as err:
        print(err.args[0].name())
else:
    errors = []
    producer = Producer({**config, "message.timeout.ms": 60000, "error_cb": lambda err: errors.append(err.name())})
    # Keyed: the reports topic is compacted and refuses a record without a key (INVALID_RECORD).
    producer.produce(sys.argv[3], b"{}", key=b"deploy-test-probe",
                     on_delivery=lambda err, msg: errors.append(err.name() if err else "written"))
    producer.flush(70)
    print(errors[-1] if errors else "no answer")
"""


# The deployment's CA as the containers see it (a compose secret); what every client of the stack verifies with.
CA_IN_CONTAINERS = "/run/secrets/tls_ca"


def scram(user: str, password: str, ca: str = CA_IN_CONTAINERS) -> dict[str, str]:
    """A client config as the stack's own clients have it: SCRAM inside TLS, the broker verified against ``ca``."""
    return {
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": ca,
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": password,
    }


def kafka_probe(stack: Stack, config: dict[str, str], *action: str) -> str:
    return stack.run("demo-fleet", "python", "-", json.dumps(config), *action, stdin=KAFKA_PROBE).strip()


def app_password(stack: Stack) -> str:
    """The demo fleet's own SCRAM password, read from its container (the test never had it otherwise)."""
    config = json.loads(stack.run("demo-fleet", "printenv", "RBP_KAFKA_CONFIG"))
    return str(config["sasl.password"])


def pipeline_password(stack: Stack) -> str:
    """The pipeline's SCRAM password, read from the worker (where Airflow's tasks run)."""
    return str(json.loads(stack.run("airflow-worker", "printenv", "RBP_KAFKA_CONFIG"))["sasl.password"])


def services(stack: Stack) -> dict[str, dict[str, object]]:
    """The project's running containers by service name, as `podman ps` describes them."""
    listed = subprocess.run(
        ["podman", "ps", "--format", "json", "--filter", f"label=io.podman.compose.project={stack.project}"],
        capture_output=True,
        text=True,
        check=True,
    )
    return {c["Labels"]["com.docker.compose.service"]: c for c in json.loads(listed.stdout)}


def test_only_the_airflow_api_is_published_on_the_host(stack: Stack) -> None:
    running = services(stack)
    assert {
        "kafka",
        "postgres",
        "spark-connect",
        "airflow-scheduler",
        "airflow-worker",
        "airflow-signer",
        "demo-fleet",
    } <= running.keys()
    published = {name: c["Ports"] for name, c in running.items() if c.get("Ports")}
    assert list(published) == ["airflow-apiserver"], published
    ports = published["airflow-apiserver"]
    assert isinstance(ports, list) and [p["container_port"] for p in ports] == [8080]


# Run in a container: the TCP ports something listens on at an address other than loopback, from the kernel's own
# socket tables (/proc/net/tcp*, per network namespace: the container's).
LISTENING = r"""
found = set()
for path, loopback in (("/proc/net/tcp", "0100007F"), ("/proc/net/tcp6", "00000000000000000000000001000000")):
    for line in open(path).read().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, port = local.split(":")
        if state == "0A" and address != loopback:
            found.add(int(port, 16))
print(" ".join(map(str, sorted(found))))
"""


@pytest.mark.parametrize(
    ("service", "ports"),
    [("airflow-apiserver", {8080}), ("airflow-scheduler", set()), ("airflow-triggerer", set()),
     ("airflow-dag-processor", set()), ("airflow-worker", set()), ("airflow-signer", set())],
)  # fmt: skip
def test_airflow_listens_only_on_its_https_port(stack: Stack, service: str, ports: set[int]) -> None:
    """No plain-HTTP log server (8793): task logs are files on a shared volume (--skip-serve-logs)."""
    assert {int(p) for p in stack.run(service, "python", "-", stdin=LISTENING).split()} == ports


def test_rest_api_refuses_calls_without_a_valid_login(stack: Stack, admin: tuple[str, str], ca: ssl.SSLContext) -> None:
    with httpx.Client(base_url=stack.url, timeout=30, verify=ca) as http:
        assert http.get("/api/v2/dags").status_code == 401
        # Airflow 3.3 answers a token it cannot verify with 403, no token at all with 401: both refuse.
        assert http.get("/api/v2/dags", headers={"Authorization": "Bearer not-a-token"}).status_code in (401, 403)
        wrong = http.post("/auth/token", json={"username": admin[0], "password": admin[1] + "x"})
        assert wrong.status_code == 401, wrong.text


def test_a_real_login_lists_the_dags(stack: Stack, admin: tuple[str, str], ca: ssl.SSLContext) -> None:
    with httpx.Client(base_url=stack.url, timeout=30, verify=ca) as http:
        login = http.post("/auth/token", json={"username": admin[0], "password": admin[1]})
        assert login.status_code in (200, 201), login.text
        token = login.json()["access_token"]
        dags = http.get("/api/v2/dags", headers={"Authorization": f"Bearer {token}"})
        assert dags.status_code == 200, dags.text
        assert {"rebalance_planning", "rebalance_observe"} <= {d["dag_id"] for d in dags.json()["dags"]}


def test_kafka_refuses_a_client_without_a_login(stack: Stack) -> None:
    assert kafka_probe(stack, {}, "list").startswith("refused"), "a client without SASL got an answer"


def test_kafka_refuses_a_plaintext_connection_even_with_a_valid_login(stack: Stack) -> None:
    """The only listener the network reaches is SASL_SSL: SCRAM without TLS does not get through the handshake."""
    plaintext = {**scram("rbp-demo-fleet", app_password(stack)), "security.protocol": "SASL_PLAINTEXT"}
    plaintext.pop("ssl.ca.location")
    assert kafka_probe(stack, plaintext, "list").startswith("refused"), "a SASL_PLAINTEXT client got an answer"
    # The same login over TLS is answered: the refusal above is the missing TLS.
    assert kafka_probe(stack, scram("rbp-demo-fleet", app_password(stack)), "list").startswith("topics")


def test_a_kafka_client_trusting_another_ca_refuses_the_broker(stack: Stack) -> None:
    """The clients verify the broker: with the system's CAs (a valid login, but not the deployment's CA) the TLS
    handshake fails, so a man in the middle with any public certificate would be refused the same way."""
    wrong_ca = scram("rbp-demo-fleet", app_password(stack), ca="/etc/ssl/certs/ca-certificates.crt")
    assert kafka_probe(stack, wrong_ca, "list").startswith("refused"), "the broker was trusted without its CA"


def test_every_kafka_client_of_the_stack_uses_tls_with_the_deployments_ca(stack: Stack) -> None:
    for service in ("airflow-worker", "airflow-signer", "demo-fleet"):
        config = json.loads(stack.run(service, "printenv", "RBP_KAFKA_CONFIG"))
        assert config["security.protocol"] == "SASL_SSL" and config["ssl.ca.location"] == CA_IN_CONTAINERS, service
    connection = json.loads(stack.run("airflow-worker", "printenv", "AIRFLOW_CONN_RBP_KAFKA"))["extra"]
    assert connection["security.protocol"] == "SASL_SSL" and connection["ssl.ca.location"] == CA_IN_CONTAINERS


def test_the_airflow_api_speaks_https_only_with_the_deployments_certificate(stack: Stack, ca: ssl.SSLContext) -> None:
    assert stack.url.startswith("https://")
    assert httpx.get(f"{stack.url}/api/v2/monitor/health", timeout=30, verify=ca).status_code == 200
    # Plain HTTP on the same port: no answer (the server expects a TLS handshake).
    with pytest.raises(httpx.TransportError):
        httpx.get(stack.url.replace("https://", "http://") + "/api/v2/monitor/health", timeout=30)
    # A client trusting only the public CAs (certifi) refuses the certificate: it is the deployment's own.
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{stack.url}/api/v2/monitor/health", timeout=30)
    # Inside the stack, the tasks' execution API and the workers' Edge API are HTTPS too, verified against the CA.
    for service in ("airflow-worker", "airflow-signer"):
        assert stack.run(service, "printenv", "AIRFLOW__CORE__EXECUTION_API_SERVER_URL").startswith("https://")
        assert stack.run(service, "printenv", "AIRFLOW__EDGE__API_URL").startswith("https://")


def test_kafka_refuses_a_wrong_password(stack: Stack) -> None:
    answer = kafka_probe(stack, scram("rbp-demo-fleet", app_password(stack) + "x"), "list")
    assert answer.startswith("refused"), answer


def test_an_application_login_cannot_write_plans(stack: Stack) -> None:
    app = scram("rbp-demo-fleet", app_password(stack))
    assert kafka_probe(stack, app, "produce", "_rebalance_plans") == "TOPIC_AUTHORIZATION_FAILED"
    # The same login may write reports: the refusal above is the ACL, not a broken login.
    assert kafka_probe(stack, app, "produce", "_rebalance_reports") == "written"


@pytest.mark.parametrize(
    "service",
    [
        "kafka",
        "postgres",
        "spark-connect",
        "demo-fleet",
        "streams-app",
        "airflow-apiserver",
        "airflow-scheduler",
        "airflow-dag-processor",
        "airflow-triggerer",
        "airflow-worker",
    ],
)
def test_the_signing_key_is_only_where_publish_runs(stack: Stack, service: str) -> None:
    """Publish runs on the signer (its own Edge worker): no other container gets the key, its passphrase, or a
    private key it does not use (Airflow's token key: the api-server and the scheduler only)."""
    probe = (
        "for f in plan_signing_key plan_signing_passphrase airflow_tls_key airflow_jwt_key kafka_tls_keystore_password"
        " spark_connect_tls_key airflow_signer_password; do"
        " test -e /run/secrets/$f && echo $f; done; echo --; printenv | cut -d= -f1"
    )
    present, names = stack.run(service, "sh", "-c", probe).split("--")
    allowed = {
        "kafka": {"kafka_tls_keystore_password"},
        "airflow-apiserver": {"airflow_tls_key", "airflow_jwt_key"},
        "airflow-scheduler": {"airflow_jwt_key"},
        "spark-connect": {"spark_connect_tls_key"},
    }.get(service, set())
    assert set(present.split()) == allowed, present
    assert not {"RBP_PLAN_SIGNING_KEY_FILE", "RBP_PLAN_SIGNING_PASSPHRASE_FILE"} & set(names.split())


@pytest.mark.parametrize(
    "service", ["airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer"]
)
def test_airflows_own_parts_hold_no_login_to_kafka_or_spark(stack: Stack, service: str) -> None:
    """Only the workers run tasks, so only they hold the pipeline's Kafka login and Spark Connect's token: not as
    settings or Connections, and not anywhere in the environment of the container's first process."""
    names = set(stack.run(service, "sh", "-c", "printenv | cut -d= -f1").split())
    assert not {"RBP_KAFKA_CONFIG", "AIRFLOW_CONN_RBP_KAFKA", "AIRFLOW_CONN_RBP_SPARK_CONNECT", "SPARK_REMOTE"} & names
    secrets = (
        pipeline_password(stack),
        json.loads(stack.run("airflow-worker", "printenv", "AIRFLOW_CONN_RBP_SPARK_CONNECT"))["extra"]["token"],
    )
    for secret in secrets:
        leaked = stack.run(service, "sh", "-c", f"grep -l -- '{secret}' /proc/1/environ 2>/dev/null || true")
        assert not leaked.strip(), service


@pytest.mark.parametrize("service", ["airflow-worker", "airflow-signer"])
def test_the_workers_hold_no_database_login(stack: Stack, service: str) -> None:
    """Tasks reach Airflow only through the api-server: neither worker has the metadata database's login or
    Airflow's token key, and the database refuses the worker's container without a password."""
    names = set(stack.run(service, "sh", "-c", "printenv | cut -d= -f1").split())
    assert not {"AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "AIRFLOW__API_AUTH__JWT_PRIVATE_KEY_PATH",
                "AIRFLOW__API__SECRET_KEY", "POSTGRES_PASSWORD"} & names  # fmt: skip
    password = stack.run("postgres", "printenv", "POSTGRES_PASSWORD").strip()
    probe = f"grep -rl -- '{password}' /proc/1/environ /opt/airflow 2>/dev/null || true"
    leaked = stack.run(service, "sh", "-c", probe)
    assert not leaked.strip(), leaked


# Run in the signer: the key publish uses, from the container's own settings; prints its key id.
OPEN_SIGNER = """
from jobs.settings import Settings
print(Settings().plan_signer().key_id)
"""


def test_the_signer_holds_the_signing_key_encrypted_with_its_passphrase_apart(stack: Stack) -> None:
    listing = stack.run(
        "airflow-signer",
        "sh",
        "-c",
        "id -u; head -c 37 /run/secrets/plan_signing_key; echo; stat -c %a /run/secrets/plan_signing_passphrase",
    )
    uid, head, mode = listing.split("\n")[:3]
    assert uid == "50000" and mode == "600", listing
    assert "BEGIN ENCRYPTED PRIVATE KEY" in head, head
    # The key opens with the mounted passphrase, as publish opens it...
    assert stack.run("airflow-signer", "python", "-", stdin=OPEN_SIGNER).strip() == "deploy-test"
    # ...and not without it: the key file alone signs nothing.
    refused = subprocess.run(
        ["podman", "exec", "-i", stack.container("airflow-signer"),
         "env", "-u", "RBP_PLAN_SIGNING_PASSPHRASE_FILE", "python", "-"],
        input=OPEN_SIGNER, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert refused.returncode != 0 and "plan_signing_key" in refused.stderr, refused.stderr[-800:]


def test_only_the_pipeline_may_alter_a_groups_configs(stack: Stack) -> None:
    """publish sets a streams group's assignor config (IncrementalAlterConfigs on the group): the pipeline's ACL."""
    pipeline = scram("rbp-pipeline", pipeline_password(stack))
    assert kafka_probe(stack, pipeline, "alter-group", "group-1") == "altered"
    app = scram("rbp-demo-fleet", app_password(stack))
    assert kafka_probe(stack, app, "alter-group", "someone-elses-group") == "GROUP_AUTHORIZATION_FAILED"


def test_the_stacks_own_clients_are_never_denied_a_consumer_group(stack: Stack) -> None:
    """Every consumer group the stack's clients use is inside their ACLs: the broker's authorizer log, since the stack
    started, names no refused coordinator lookup (the Python runtime's restore and input consumers were once named
    outside the fleet's prefix, and were refused every second for the instances' lives)."""
    logs = subprocess.run(
        ["podman", "logs", stack.container("kafka")], capture_output=True, text=True, check=True, timeout=120
    )
    lines = (logs.stdout + logs.stderr).splitlines()
    assert any("Kafka Server started" in line for line in lines), "the broker's log does not reach its start"
    denied = [line for line in lines if "is Denied" in line and "request = FindCoordinator" in line]
    assert not denied, f"{len(denied)} refused lookups, the first: {denied[:3]}"


def test_the_image_holds_no_development_tools(stack: Stack) -> None:
    """The image installs docker/requirements.lock (runtime only, hashed): none of the dev extra's tools."""
    probe = (
        "import importlib.util as u; "
        "print(sorted(m for m in ('pytest', 'ruff', 'mypy', 'playwright', 'hypothesis', 'atheris') if u.find_spec(m)))"
    )
    assert stack.run("airflow-worker", "python", "-c", probe).strip() == "[]"


# Run in the scheduler (psycopg2, the CA, Airflow's connection string and PGSSLMODE/PGSSLROOTCERT as every Airflow
# part has them): connections to the metadata database as Airflow makes them, without TLS, and trusting another CA;
# then how many of the airflow user's network sessions, Airflow's own included, are encrypted.
POSTGRES_PROBE = """
import json, os, psycopg2
from sqlalchemy.engine import make_url
url = make_url(os.environ["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
login = dict(host=url.host, port=url.port, dbname=url.database, user=url.username, password=url.password)
SESSIONS = ("select count(*) filter (where s.ssl), count(*) filter (where not s.ssl) from pg_stat_ssl s "
            "join pg_stat_activity a using (pid) where a.usename = current_user and a.client_addr is not null")
def attempt(query, **extra):
    try:
        connection = psycopg2.connect(**login, connect_timeout=30, **extra)
    except psycopg2.OperationalError as err:
        return "refused: " + str(err).strip().splitlines()[-1]
    with connection.cursor() as cursor:
        cursor.execute(query)
        row = list(cursor.fetchone())
    connection.close()
    return row
print(json.dumps({
    "tls": attempt("select ssl, version from pg_stat_ssl where pid = pg_backend_pid()"),
    "sessions": attempt(SESSIONS),
    "plaintext": attempt("select 1", sslmode="disable"),
    "other_ca": attempt("select 1", sslrootcert="/etc/ssl/certs/ca-certificates.crt"),
}))
"""


def test_postgres_speaks_tls_only_with_the_deployments_certificate(stack: Stack) -> None:
    """Airflow's metadata database: TLS verified against the deployment's CA and the name postgres (verify-full),
    a client without TLS refused by pg_hba.conf, a client trusting another CA refusing the server, and every
    network session of the airflow user (the scheduler's, the api-server's, ...) encrypted."""
    for service in ("airflow-scheduler", "airflow-apiserver", "airflow-dag-processor", "airflow-triggerer"):
        settings = stack.run(service, "sh", "-c", "printenv PGSSLMODE PGSSLROOTCERT").split()
        assert settings == ["verify-full", CA_IN_CONTAINERS], service
    found = json.loads(stack.run("airflow-scheduler", "python", "-", stdin=POSTGRES_PROBE))
    assert found["tls"][0] is True and str(found["tls"][1]).startswith("TLSv1."), found
    encrypted, plain = found["sessions"]
    assert encrypted > 1 and plain == 0, found  # Airflow's own sessions besides the probe's, none in the clear
    assert "no encryption" in found["plaintext"], found
    assert "certificate verify failed" in found["other_ca"], found


# Run in the demo fleet's container (on the stack's network, with grpcio and pyspark's protocol, without the token):
# one Spark Connect call (Config.GetAll, which any session may make) per way in, printing each gRPC status.
# argv: the right token (the test's, from run.sh), the CA file. A client with no token, a wrong one, the right one
# over TLS, the right one in the clear, and to the server's own port (loopback in its container).
SPARK_PROBE = """
import json, sys, uuid, grpc
from pyspark.sql.connect.proto import base_pb2, base_pb2_grpc
token, ca = sys.argv[1], open(sys.argv[2], "rb").read()
def call(channel, token=None):
    request = base_pb2.ConfigRequest(
        session_id=str(uuid.uuid4()), user_context=base_pb2.UserContext(user_id="deploy-test"),
        operation=base_pb2.ConfigRequest.Operation(get_all=base_pb2.ConfigRequest.GetAll()))
    metadata = (("authorization", "Bearer " + token),) if token else ()
    try:
        base_pb2_grpc.SparkConnectServiceStub(channel).Config(request, timeout=30, metadata=metadata)
        return ["OK", ""]
    except grpc.RpcError as err:
        return [err.code().name, (err.details() or "")[:200]]
found = {}
with grpc.secure_channel("spark-connect:15002", grpc.ssl_channel_credentials(ca)) as channel:
    found["no_token"] = call(channel)
    found["wrong_token"] = call(channel, "0" * len(token))
    found["right_token"] = call(channel, token)
with grpc.secure_channel("spark-connect:15002", grpc.ssl_channel_credentials()) as channel:
    found["other_ca"] = call(channel, token)  # grpc's own public roots: the deployment's CA is not among them
with grpc.insecure_channel("spark-connect:15002") as channel:
    found["plaintext"] = call(channel, token)
with grpc.insecure_channel("spark-connect:15001") as channel:
    found["server_port"] = call(channel, token)
print(json.dumps(found))
"""
# Run on the worker with its own settings (SPARK_REMOTE, the Connection, the CA for gRPC): the session every
# pipeline stage opens, one query on it.
SPARK_SESSION = """
from jobs.lakehouse.engine import spark_session
from jobs.orchestration.tasks import runtime
rt = runtime()
with spark_session(rt.spark_remote) as spark:
    url = str(rt.spark_remote)
    way = "tls+token" if ";use_ssl=true" in url and ";token=" in url else "other"
    print(url.split("/;")[0], way, spark.sql("SELECT 41 + 1 AS answer").collect()[0]["answer"])
"""


def test_spark_connect_answers_only_a_client_with_its_token_over_tls(stack: Stack) -> None:
    """Spark Connect (which runs any code it is sent) behind TLS with its token: a client without the token or with
    a wrong one is refused (UNAUTHENTICATED), one trusting another CA or speaking without TLS gets nothing, the server's
    own port is not reachable from another container; the pipeline's settings (token over TLS) open a session."""
    token = os.environ["RBP_SPARK_CONNECT_TOKEN"]
    found = json.loads(stack.run("demo-fleet", "python", "-", token, CA_IN_CONTAINERS, stdin=SPARK_PROBE))
    assert found["no_token"][0] == "UNAUTHENTICATED", found
    assert found["wrong_token"][0] == "UNAUTHENTICATED", found
    assert found["right_token"] == ["OK", ""], found
    assert found["other_ca"][0] == "UNAVAILABLE", found  # the handshake fails: no call reaches the server
    assert found["plaintext"][0] == "UNAVAILABLE", found
    assert found["server_port"][0] == "UNAVAILABLE", found
    # Only Airflow's parts hold the token: the fleet (an application) and Kafka's one-shot init do not.
    for service in ("demo-fleet", "streams-app", "kafka", "postgres"):
        names = stack.run(service, "sh", "-c", "printenv | cut -d= -f1").split()
        values = stack.run(service, "sh", "-c", "printenv").split()
        assert not any(token in v for v in values) and "RBP_SPARK_CONNECT_TOKEN" not in names, service
    remote, way, answer = stack.run("airflow-worker", "python", "-", stdin=SPARK_SESSION).split()[-3:]
    assert (remote, way, answer) == ("sc://spark-connect:15002", "tls+token", "42")
