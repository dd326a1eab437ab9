#!/usr/bin/env bash
# Makes the deployment's TLS material at deploy time (nothing here is committed): a private CA, Kafka's server
# certificate in a PKCS#12 keystore (for the SASL_SSL listener), the Airflow api-server's certificate (HTTPS),
# PostgreSQL's (the metadata database's connections) and Spark Connect's TLS proxy's (name spark-connect), and the
# private key Airflow signs its own tokens with (airflow-jwt.key: the api-server's and the scheduler's alone).
#   docker/tls/make-certs.sh OUTDIR [AIRFLOW_NAME...]
# OUTDIR gets: ca.crt (the trust anchor every client verifies with), kafka.p12 + kafka.p12.password, airflow.crt +
# airflow.key, postgres.crt + postgres.key, spark-connect.crt + spark-connect.key, airflow-jwt.key. AIRFLOW_NAME: extra DNS names
# the UI is reached by (localhost and 127.0.0.1 are always in). The CA's key is deleted once it has signed: a new certificate means a new CA, re-distributed by the next deploy.
# Production with its own PKI: put files of the same names in OUTDIR instead and skip this script.
set -euo pipefail
out=${1:?usage: make-certs.sh OUTDIR [AIRFLOW_NAME...]}
shift
mkdir -p "$out"
umask 077
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
days=${RBP_TLS_DAYS:-90}
if [[ ! "$days" =~ ^[1-9][0-9]{0,3}$ ]]; then
  echo "make-certs.sh: RBP_TLS_DAYS must be a whole number of days from 1 to 9999, not '$days'" >&2
  exit 2
fi

openssl req -x509 -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -keyout "$work/ca.key" -out "$out/ca.crt" \
  -days "$days" -subj "/CN=rebalance-planner deployment CA $(date -u +%Y%m%dT%H%M%SZ)" \
  -addext basicConstraints=critical,CA:TRUE,pathlen:0 -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null

# leaf NAME SAN: a server certificate for NAME signed by the CA.
leaf() {
  openssl req -new -nodes -newkey ec -pkeyopt ec_paramgen_curve:P-256 -keyout "$work/$1.key" -out "$work/$1.csr" \
    -subj "/CN=$1" 2>/dev/null
  printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=%s\n' \
    "$2" >"$work/$1.ext"
  openssl x509 -req -in "$work/$1.csr" -CA "$out/ca.crt" -CAkey "$work/ca.key" -CAserial "$work/ca.srl" -CAcreateserial -days "$days" \
    -extfile "$work/$1.ext" -out "$work/$1.crt" 2>/dev/null
}

leaf kafka DNS:kafka
openssl rand -hex 24 >"$out/kafka.p12.password"
openssl pkcs12 -export -in "$work/kafka.crt" -inkey "$work/kafka.key" -certfile "$out/ca.crt" -name kafka \
  -passout "file:$out/kafka.p12.password" -out "$out/kafka.p12"

names="DNS:airflow-apiserver,DNS:localhost,IP:127.0.0.1"
for name in "$@"; do names="$names,DNS:$name"; done
leaf airflow "$names"
cp "$work/airflow.key" "$out/airflow.key"
cat "$work/airflow.crt" >"$out/airflow.crt"
leaf postgres DNS:postgres
cp "$work/postgres.key" "$out/postgres.key"
cat "$work/postgres.crt" >"$out/postgres.crt"
leaf spark-connect DNS:spark-connect
cp "$work/spark-connect.key" "$out/spark-connect.key"
cat "$work/spark-connect.crt" >"$out/spark-connect.crt"
# Ed25519 (Airflow signs with EdDSA); Airflow reads it unencrypted, so it is the container user's alone (0600).
openssl genpkey -algorithm ed25519 -out "$out/airflow-jwt.key"
chmod 644 "$out/ca.crt" "$out/airflow.crt" "$out/postgres.crt" "$out/spark-connect.crt"
echo "TLS material in $out: ca.crt, kafka.p12 (+ .password), airflow.crt, airflow.key, postgres.crt, postgres.key," \
  "spark-connect.crt, spark-connect.key (valid $days days), airflow-jwt.key"
