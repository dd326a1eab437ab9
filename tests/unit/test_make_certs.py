"""docker/tls/make-certs.sh: the deployment's TLS material, made at deploy time, verifies as the clients verify it."""

from __future__ import annotations

import os
import ssl
import subprocess
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.serialization import pkcs12

SCRIPT = Path(__file__).resolve().parents[2] / "docker" / "tls" / "make-certs.sh"


def make(out: Path, *names: str, days: str = "30") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RBP_TLS_DAYS": days}
    return subprocess.run([str(SCRIPT), str(out), *names], capture_output=True, text=True, env=env, check=False)


def test_the_certificates_chain_to_the_ca_with_the_service_names(tmp_path: Path) -> None:
    out = tmp_path / "tls"
    assert make(out, "airflow.example.org").returncode == 0
    assert sorted(p.name for p in out.iterdir()) == ["airflow-jwt.key", "airflow.crt", "airflow.key", "ca.crt",
                                                     "kafka.p12", "kafka.p12.password", "postgres.crt", "postgres.key",
                                                     "spark-connect.crt", "spark-connect.key"]  # fmt: skip
    # Private material is the owner's alone; the CA's key is gone once it has signed.
    for name in (
        "airflow.key",
        "airflow-jwt.key",
        "kafka.p12",
        "kafka.p12.password",
        "postgres.key",
        "spark-connect.key",
    ):
        assert (out / name).stat().st_mode & 0o077 == 0, name
    # Airflow's token key: an unencrypted Ed25519 key (Airflow loads it without a password and signs with EdDSA).
    jwt_key = serialization.load_pem_private_key((out / "airflow-jwt.key").read_bytes(), password=None)
    assert isinstance(jwt_key, ed25519.Ed25519PrivateKey)
    airflow = x509.load_pem_x509_certificate((out / "airflow.crt").read_bytes())
    names = airflow.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(names.get_values_for_type(x509.DNSName)) == {"airflow-apiserver", "localhost", "airflow.example.org"}
    password = (out / "kafka.p12.password").read_bytes().strip()
    key, kafka, _chain = pkcs12.load_key_and_certificates((out / "kafka.p12").read_bytes(), password)
    assert key is not None and kafka is not None
    kafka_names = kafka.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert kafka_names.get_values_for_type(x509.DNSName) == ["kafka"]
    postgres = x509.load_pem_x509_certificate((out / "postgres.crt").read_bytes())
    postgres_names = postgres.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert postgres_names.get_values_for_type(x509.DNSName) == ["postgres"]
    # Spark Connect's TLS proxy: the name the pipeline's SPARK_REMOTE gives (sc://spark-connect:15002/;use_ssl=true).
    spark = x509.load_pem_x509_certificate((out / "spark-connect.crt").read_bytes())
    spark_names = spark.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert spark_names.get_values_for_type(x509.DNSName) == ["spark-connect"]
    ca = x509.load_pem_x509_certificate((out / "ca.crt").read_bytes())
    for leaf in (airflow, kafka, postgres, spark):
        leaf.verify_directly_issued_by(ca)
    # A TLS client context accepts the CA as its only trust anchor (what the stack's clients load).
    assert ssl.create_default_context(cafile=str(out / "ca.crt")).cert_store_stats()["x509_ca"] == 1


@pytest.mark.parametrize("days", ["0", "-1", "ten", "100000"])
def test_a_validity_out_of_bounds_is_refused_by_name(tmp_path: Path, days: str) -> None:
    done = make(tmp_path / "tls", days=days)
    assert done.returncode == 2 and "RBP_TLS_DAYS" in done.stderr
