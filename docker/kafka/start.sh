#!/usr/bin/env bash
# Starts the compose Kafka node with SASL/SCRAM. KRaft keeps SCRAM credentials in its metadata log, so they are
# written when the storage is formatted (kafka-storage format --add-scram, KIP-900): they exist before the broker
# (whose inter-broker traffic is SCRAM too) or any client connects. Formatting happens once: a user added later, or
# a changed password, is set by kafka-init (rebalance-planner kafka-acls --scram-user) at every `up`.
set -euo pipefail

: "${KAFKA_CLUSTER_ID:?}" "${SCRAM_ADMIN_PASSWORD:?}"
keystore_password_file=/run/secrets/kafka_tls_keystore_password
[[ -r "$keystore_password_file" && -r /run/secrets/kafka_tls_keystore && -r /run/secrets/tls_ca ]] || {
  echo "kafka: the TLS secrets (kafka_tls_keystore, its password, tls_ca; docker/tls/make-certs.sh) are not readable" >&2
  exit 2; }
: "${SCRAM_PIPELINE_USER:?}" "${SCRAM_PIPELINE_PASSWORD:?}" "${SCRAM_APP_USER:?}" "${SCRAM_APP_PASSWORD:?}"
# A second application login (the Kafka Streams app) is optional.
streams_app=()
if [[ -n "${SCRAM_STREAMS_APP_USER:-}" ]]; then
  : "${SCRAM_STREAMS_APP_PASSWORD:?SCRAM_STREAMS_APP_USER is set without SCRAM_STREAMS_APP_PASSWORD}"
  streams_app=(--add-scram "SCRAM-SHA-512=[name=${SCRAM_STREAMS_APP_USER},password=${SCRAM_STREAMS_APP_PASSWORD}]")
fi
for password in "$SCRAM_ADMIN_PASSWORD" "$SCRAM_PIPELINE_PASSWORD" "$SCRAM_APP_PASSWORD" "${SCRAM_STREAMS_APP_PASSWORD:-}"; do
  # The --add-scram syntax and JAAS quoting (and the clients' JSON settings) cannot carry these characters.
  if [[ "$password" == *[\",\]\\]* ]]; then
    echo "kafka: SCRAM passwords must not contain '\"', ',', ']' or '\\'" >&2
    exit 2
  fi
done

umask 077  # the rendered files hold the admin password
mkdir -p /tmp/rbp
properties=/tmp/rbp/server.properties
login="org.apache.kafka.common.security.scram.ScramLoginModule required username=\"admin\" password=\"${SCRAM_ADMIN_PASSWORD}\";"
cp /opt/rbp/kafka/server.properties "$properties"
echo "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=${login}" >>"$properties"
keystore_password=$(head -c 1024 "$keystore_password_file" | tr -d '\r\n')
printf 'ssl.keystore.password=%s\nssl.key.password=%s\n' "$keystore_password" "$keystore_password" >>"$properties"
# For the healthcheck (and an operator's kafka-*.sh --command-config inside this container): over TLS, verifying
# the broker against the deployment's CA like every other client.
printf 'security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config=%s\nssl.truststore.type=PEM\nssl.truststore.location=/run/secrets/tls_ca\n' \
  "$login" >/tmp/rbp/admin.properties

/opt/kafka/bin/kafka-storage.sh format --ignore-formatted --cluster-id "$KAFKA_CLUSTER_ID" --config "$properties" \
  --add-scram "SCRAM-SHA-512=[name=admin,password=${SCRAM_ADMIN_PASSWORD}]" \
  --add-scram "SCRAM-SHA-512=[name=${SCRAM_PIPELINE_USER},password=${SCRAM_PIPELINE_PASSWORD}]" \
  --add-scram "SCRAM-SHA-512=[name=${SCRAM_APP_USER},password=${SCRAM_APP_PASSWORD}]" "${streams_app[@]}"
exec /opt/kafka/bin/kafka-server-start.sh "$properties"
