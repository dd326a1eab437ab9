"""Security of the running stack, checked live: what is published, who may log in, what Kafka refuses, where the
signing key is."""

from __future__ import annotations

import json
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


def scram(user: str, password: str) -> dict[str, str]:
    return {
        "security.protocol": "SASL_PLAINTEXT",
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
    """The pipeline's SCRAM password, read from the scheduler (where Airflow's tasks run)."""
    return str(json.loads(stack.run("airflow-scheduler", "printenv", "RBP_KAFKA_CONFIG"))["sasl.password"])


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
    assert {"kafka", "postgres", "spark-connect", "airflow-scheduler", "demo-fleet"} <= running.keys()
    published = {name: c["Ports"] for name, c in running.items() if c.get("Ports")}
    assert list(published) == ["airflow-apiserver"], published
    ports = published["airflow-apiserver"]
    assert isinstance(ports, list) and [p["container_port"] for p in ports] == [8080]


def test_rest_api_refuses_calls_without_a_valid_login(stack: Stack, admin: tuple[str, str]) -> None:
    with httpx.Client(base_url=stack.url, timeout=30) as http:
        assert http.get("/api/v2/dags").status_code == 401
        # Airflow 3.3 answers a token it cannot verify with 403, no token at all with 401: both refuse.
        assert http.get("/api/v2/dags", headers={"Authorization": "Bearer not-a-token"}).status_code in (401, 403)
        wrong = http.post("/auth/token", json={"username": admin[0], "password": admin[1] + "x"})
        assert wrong.status_code == 401, wrong.text


def test_a_real_login_lists_the_dags(stack: Stack, admin: tuple[str, str]) -> None:
    with httpx.Client(base_url=stack.url, timeout=30) as http:
        login = http.post("/auth/token", json={"username": admin[0], "password": admin[1]})
        assert login.status_code in (200, 201), login.text
        token = login.json()["access_token"]
        dags = http.get("/api/v2/dags", headers={"Authorization": f"Bearer {token}"})
        assert dags.status_code == 200, dags.text
        assert {"rebalance_planning", "rebalance_observe"} <= {d["dag_id"] for d in dags.json()["dags"]}


def test_kafka_refuses_a_client_without_a_login(stack: Stack) -> None:
    assert kafka_probe(stack, {}, "list").startswith("refused"), "a client without SASL got an answer"


def test_kafka_refuses_a_wrong_password(stack: Stack) -> None:
    answer = kafka_probe(stack, scram("rbp-demo-fleet", app_password(stack) + "x"), "list")
    assert answer.startswith("refused"), answer


def test_an_application_login_cannot_write_plans(stack: Stack) -> None:
    app = scram("rbp-demo-fleet", app_password(stack))
    assert kafka_probe(stack, app, "produce", "_rebalance_plans") == "TOPIC_AUTHORIZATION_FAILED"
    # The same login may write reports: the refusal above is the ACL, not a broken login.
    assert kafka_probe(stack, app, "produce", "_rebalance_reports") == "written"


@pytest.mark.parametrize(
    "service", ["kafka", "postgres", "spark-connect", "demo-fleet", "airflow-apiserver", "airflow-dag-processor"]
)
def test_the_signing_key_is_only_where_publish_runs(stack: Stack, service: str) -> None:
    """LocalExecutor runs every task, publish included, in the scheduler: no other container gets the key."""
    probe = "test -e /run/secrets/plan_signing_key && echo present || echo absent; printenv | cut -d= -f1"
    lines = stack.run(service, "sh", "-c", probe).split()
    assert lines[0] == "absent"
    assert "RBP_PLAN_SIGNING_KEY_FILE" not in lines[1:]


def test_the_scheduler_holds_the_signing_key_readable_by_airflow_only(stack: Stack) -> None:
    listing = stack.run("airflow-scheduler", "sh", "-c", "id -u; cat /run/secrets/plan_signing_key | head -c 27")
    assert listing.split("\n")[0] == "50000"
    assert "BEGIN PRIVATE KEY" in listing


def test_only_the_pipeline_may_alter_a_groups_configs(stack: Stack) -> None:
    """publish sets a streams group's assignor config (IncrementalAlterConfigs on the group): the pipeline's ACL."""
    pipeline = scram("rbp-pipeline", pipeline_password(stack))
    assert kafka_probe(stack, pipeline, "alter-group", "group-1") == "altered"
    app = scram("rbp-demo-fleet", app_password(stack))
    assert kafka_probe(stack, app, "alter-group", "someone-elses-group") == "GROUP_AUTHORIZATION_FAILED"
