"""`rebalance-planner spark-connect`: Apache Spark with delta-spark as a local Spark Connect server, on the versions
pyspark pins, serving Delta until interrupted and leaving nothing running."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from importlib.resources import files
from pathlib import Path

import pyspark

from jobs.lakehouse.engine import spark_session
from jobs.lakehouse.lake import Lake
from jobs.lakehouse.tables import table_schema
from jobs.local.spark_connect import spark_home
from jobs.polling import wait_until
from jobs.processes import free_port, stop_group

ROOT = Path(__file__).resolve().parents[2]


def test_the_delta_jars_match_pysparks_spark_and_scala() -> None:
    pom = (files("jobs.local") / "spark" / "pom.xml").read_text(encoding="utf-8")
    delta = re.search(r"<delta.version>(\d+)\.(\d+)\.\d+</delta.version>", pom)
    assert delta is not None
    assert pyspark.__version__.split(".")[:2] == [delta[1], delta[2]]  # Delta 4.1.x is built for Spark 4.1
    assert "<artifactId>delta-spark_2.13</artifactId>" in pom
    assert list((spark_home() / "jars").glob("scala-library-2.13.*.jar"))


def _tail(errors: Path, lines: int = 8) -> str:
    return " | ".join(errors.read_text(errors="replace").splitlines()[-lines:])


def _serving(process: subprocess.Popen[str], deadline: float, errors: Path) -> str:
    assert process.stdout is not None
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if line.startswith("SPARK_REMOTE="):
            return line.strip().split("=", 1)[1]
        assert line or process.poll() is None, f"spark-connect exited with {process.returncode}: {_tail(errors)}"
    raise AssertionError(f"spark-connect printed no SPARK_REMOTE in time: {_tail(errors)}")


def test_spark_connect_command_serves_delta_until_interrupted(tmp_path: Path) -> None:
    port = free_port()
    cli = Path(sys.executable).parent / "rebalance-planner"
    errors = tmp_path / "stderr.log"
    with errors.open("w") as err:
        process = subprocess.Popen(
            [str(cli), "spark-connect", "--port", str(port)],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            start_new_session=True,
            cwd=ROOT,  # the Delta jars live under the checkout's var/jvm
        )
    try:
        remote = _serving(process, time.monotonic() + 300, errors)
        assert remote == f"sc://127.0.0.1:{port}"
        with spark_session(remote) as spark:
            lake = Lake(spark, tmp_path / "lake")
            rows = [("s/g", "s", "g", "kip441", 1, 1, 2, 10, 6.0, True)]
            assert (
                lake.merge("plan_baselines", spark.createDataFrame(rows, table_schema("plan_baselines").ddl)).inserted
                == 1
            )
            history = spark.sql(f"DESCRIBE HISTORY delta.`{lake.path('plan_baselines')}`").collect()
            assert any(str(h["engineInfo"]).startswith("Apache-Spark/") for h in history)
        # Native libraries (lz4-java's) unpack into the server's own scratch, removed with it, not into /tmp.
        found = subprocess.run(["pgrep", "-af", f"binding.port={port}"], capture_output=True, text=True, check=False)
        scratch = re.findall(r"-Djava\.io\.tmpdir=(\S+)", found.stdout)
        assert scratch and all(re.search(r"/rbp-spark-[^/]+/tmp$", s) for s in scratch), found.stdout
    except BaseException:
        stop_group(process, 30)  # the failure above is the one to report, not how the command then ended
        raise
    os.killpg(process.pid, signal.SIGINT)
    assert process.wait(timeout=90) == 0, f"spark-connect ended badly after Ctrl-C: {_tail(errors)}"

    def jvm_gone() -> bool:
        found = subprocess.run(["pgrep", "-f", f"binding.port={port}"], capture_output=True, check=False)
        return found.returncode != 0

    wait_until(jvm_gone, 30, f"the Spark Connect JVM on port {port} to stop with the command")


# One Spark Connect call any session may make (Config.GetAll), with or without a bearer token; its gRPC status.
def _config_call(port: int, token: str | None) -> str:
    import grpc  # noqa: PLC0415 (pyspark's Connect client brings it)
    from pyspark.sql.connect.proto import base_pb2, base_pb2_grpc  # noqa: PLC0415

    request = base_pb2.ConfigRequest(
        session_id="00000000-0000-4000-8000-000000000042",
        user_context=base_pb2.UserContext(user_id="test"),
        operation=base_pb2.ConfigRequest.Operation(get_all=base_pb2.ConfigRequest.GetAll()),
    )
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            stub = base_pb2_grpc.SparkConnectServiceStub(channel)  # type: ignore[no-untyped-call]
            stub.Config(request, timeout=30, metadata=metadata)
        except grpc.RpcError as err:
            return str(err.code().name)
    return "OK"


def test_spark_connect_with_a_token_file_refuses_a_client_without_the_token(tmp_path: Path) -> None:
    """--token-file: the server answers only calls bearing the token (the compose stack puts TLS in front, so
    pyspark sends it there; here, over loopback, as pyspark sends it to localhost), and never shows it."""
    port = free_port()
    token = "t0ken-" + os.urandom(12).hex()
    (tmp_path / "token").write_text(token + "\n", encoding="ascii")
    cli = Path(sys.executable).parent / "rebalance-planner"
    errors = tmp_path / "stderr.log"
    with errors.open("w") as err:
        process = subprocess.Popen(
            [str(cli), "spark-connect", "--port", str(port), "--token-file", str(tmp_path / "token")],
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            start_new_session=True,
            cwd=ROOT,
        )
    try:
        assert _serving(process, time.monotonic() + 300, errors) == f"sc://127.0.0.1:{port}"
        assert _config_call(port, None) == "UNAUTHENTICATED"
        assert _config_call(port, "x" * len(token)) == "UNAUTHENTICATED"
        assert _config_call(port, token) == "OK"
        # pyspark's own client with the token: to "localhost" it sends it without TLS (local credentials).
        with spark_session(f"sc://localhost:{port}/;token={token}") as spark:
            assert spark.sql("SELECT 41 + 1 AS answer").collect()[0]["answer"] == 42
        found = subprocess.run(["pgrep", "-af", f"binding.port={port}"], capture_output=True, text=True, check=False)
        assert found.stdout and token not in found.stdout  # in the JVM's environment, not on its command line
    finally:
        stop_group(process, 30)
    assert token not in errors.read_text(errors="replace")
