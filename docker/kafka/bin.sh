#!/usr/bin/env bash
# The Kafka image's /opt/kafka/bin/<tool>.sh (each a link to this file): the tools docker/kafka/start.sh, the compose
# health check and an operator inside the container call, each Apache Kafka's own main class run from the Maven
# Central jars in /opt/kafka/libs (the image carries jars, not the release tarball's scripts).
set -euo pipefail
tool=$(basename "$0" .sh)
case "$tool" in
  kafka-server-start) main=kafka.Kafka heap=${KAFKA_HEAP_MB:-1024} log=/opt/kafka/config/log4j2.properties ;;
  kafka-storage) main=kafka.tools.StorageTool heap=256 log=/opt/kafka/config/tools-log4j2.properties ;;
  kafka-broker-api-versions)
    main=org.apache.kafka.tools.BrokerApiVersionsCommand heap=128 log=/opt/kafka/config/tools-log4j2.properties ;;
  *) echo "$tool: not one of this image's Kafka tools" >&2; exit 2 ;;
esac
exec java "-Xms${heap}m" "-Xmx${heap}m" -XX:+UseG1GC "-Dlog4j2.configurationFile=$log" -cp "/opt/kafka/libs/*" \
  "$main" "$@"
