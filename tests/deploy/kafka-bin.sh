#!/usr/bin/env bash
# The local Kafka stand-in's /opt/kafka/bin/<tool>.sh (each a link to this file): the few tools docker/kafka/start.sh
# and the compose healthcheck call, run from the Maven Central jars in /opt/kafka/libs.
set -euo pipefail
tool=$(basename "$0" .sh)
java=(java -Xms256m -Xmx${KAFKA_HEAP_MB:-768}m -XX:+UseG1GC -cp "/opt/kafka/libs/*")
case "$tool" in
  kafka-storage) exec "${java[@]}" kafka.tools.StorageTool "$@" ;;
  kafka-server-start) exec "${java[@]}" kafka.Kafka "$@" ;;
  kafka-broker-api-versions)
    # --bootstrap-server HOST:PORT --command-config FILE: answers once the broker serves an authenticated client.
    exec python - "$@" <<'PY'
import re, sys
from confluent_kafka.admin import AdminClient
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
props = dict(line.split("=", 1) for line in open(args["--command-config"]).read().splitlines() if "=" in line)
jaas = props.pop("sasl.jaas.config")
user, password = (re.search(f'{key}="([^"]*)"', jaas).group(1) for key in ("username", "password"))
# The Java client's PEM truststore is librdkafka's CA location; hostname verification is on in both by default.
if props.pop("ssl.truststore.type", "PEM") != "PEM":
    sys.exit("kafka-broker-api-versions stand-in: only a PEM truststore is supported")
if "ssl.truststore.location" in props:
    props["ssl.ca.location"] = props.pop("ssl.truststore.location")
config = {"bootstrap.servers": args["--bootstrap-server"], "sasl.username": user, "sasl.password": password, **props}
AdminClient(config).list_topics(timeout=10)
PY
    ;;
  *) echo "$tool: not part of the local Kafka stand-in" >&2; exit 2 ;;
esac
