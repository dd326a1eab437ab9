#!/usr/bin/env bash
# The spark-connect service: Apache Spark Connect on the container's loopback, requiring the deployment's token from
# every client, behind haproxy serving TLS on the port other containers reach (haproxy.cfg says why).
#   start.sh rebalance-planner spark-connect [options...]      e.g. --cores 4 --driver-memory-mb 4096
# The command gets --host 127.0.0.1 --port $SPARK_CONNECT_PORT --token-file added. Needs RBP_SPARK_CONNECT_TOKEN (the
# token every client sends) and the secrets spark_connect_tls_cert, spark_connect_tls_key under /run/secrets/. Either
# process ending ends the container (its restart policy decides what next).
set -euo pipefail
secrets=${RBP_SECRETS_DIR:-/run/secrets}
export SPARK_CONNECT_TLS_PORT=${SPARK_CONNECT_TLS_PORT:-15002} SPARK_CONNECT_PORT=${SPARK_CONNECT_PORT:-15001}
(( $# > 0 )) || { echo "usage: start.sh rebalance-planner spark-connect [options...]" >&2; exit 2; }
[[ -n "${RBP_SPARK_CONNECT_TOKEN:-}" ]] || { echo "start.sh: RBP_SPARK_CONNECT_TOKEN is not set" >&2; exit 2; }
for f in spark_connect_tls_cert spark_connect_tls_key; do
  [[ -r "$secrets/$f" ]] || { echo "start.sh: the secret $secrets/$f is missing or unreadable" >&2; exit 2; }
done
# haproxy takes the certificate and its key in one file, and the server its token from a file (never on a command
# line): made here, the container user's alone, removed at exit.
umask 077
work=$(mktemp -d /tmp/spark-connect.XXXXXX)
cat "$secrets/spark_connect_tls_cert" "$secrets/spark_connect_tls_key" >"$work/tls.pem"
printf '%s\n' "$RBP_SPARK_CONNECT_TOKEN" >"$work/token"
unset RBP_SPARK_CONNECT_TOKEN
export SPARK_CONNECT_TLS_PEM=$work/tls.pem
here=$(cd "$(dirname "$0")" && pwd)
haproxy -W -db -f "$here/haproxy.cfg" &
proxy=$!
"$@" --host 127.0.0.1 --port "$SPARK_CONNECT_PORT" --token-file "$work/token" &
server=$!
trap 'kill -TERM "$proxy" "$server" 2>/dev/null' TERM INT
status=0
wait -n "$proxy" "$server" || status=$?
kill -TERM "$proxy" "$server" 2>/dev/null || true
wait || true
rm -rf "$work"
exit "$status"
