#!/usr/bin/env bash
# The streams-app service: a Kafka Streams application with the plan-honoring plugin (the repo's reference app,
# assignor/java/reference-app), each instance a JVM whose state lives under $STREAMS_APP_ROOT/INSTANCE.
#   start.sh INSTANCE...        writes its input once, then runs these instances until one ends
#   start.sh --join INSTANCE    one more instance in the foreground (what an operator scaling out runs)
# Its Kafka login is RBP_KAFKA_CONFIG's (JSON, like every client of the stack: SASL_SSL with SCRAM and the CA),
# rendered here into the Java client properties file the app reads (--client-properties); the KIP-441 settings are
# the STREAMS_APP_* variables, the product's topics and verify keys the RBP_* ones.
set -euo pipefail
(( $# > 0 )) || { echo "usage: start.sh INSTANCE... | start.sh --join INSTANCE" >&2; exit 2; }
: "${STREAMS_APP_ID:?}" "${RBP_KAFKA_BOOTSTRAP:?}" "${RBP_KAFKA_CONFIG:?}" "${RBP_PLAN_VERIFY_KEYS:?}"
root=${STREAMS_APP_ROOT:-/data/streams-app}
jar=$(ls /opt/rebalance-planner/assignor/java/reference-app/target/reference-app-*.jar)
umask 077
props=/tmp/streams-app/client.properties
mkdir -p /tmp/streams-app "$root"
python - "$props" <<'PY'
import json, os, sys
c = json.loads(os.environ["RBP_KAFKA_CONFIG"])
if c.get("security.protocol") != "SASL_SSL" or c.get("sasl.mechanism") != "SCRAM-SHA-512":
    sys.exit("start.sh: RBP_KAFKA_CONFIG must be SASL_SSL with SCRAM-SHA-512")
for key in ("sasl.username", "sasl.password"):
    if any(ch in c[key] for ch in '"\\\n'):
        sys.exit(f"start.sh: {key} must not contain a quote, a backslash or a newline")
login = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="{}" password="{}";'
lines = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.jaas.config": login.format(c["sasl.username"], c["sasl.password"]),
    "ssl.truststore.type": "PEM",
    "ssl.truststore.location": c["ssl.ca.location"],
}
with open(sys.argv[1], "w", encoding="utf-8") as out:
    out.writelines(f"{k}={v}\n" for k, v in lines.items())
PY
app=(--bootstrap "$RBP_KAFKA_BOOTSTRAP" --client-properties "$props" --application-id "$STREAMS_APP_ID"
     --input-topic "$STREAMS_APP_ID-input" --partitions "${STREAMS_APP_PARTITIONS:-6}")
# The light footprint of the tests' fleets (jobs/local/streams_fleet.py LIGHT): ~110 MB a JVM.
java=(java -Xmx96m -Xms16m -Xss256k -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:CICompilerCount=1
      -XX:ReservedCodeCacheSize=32m -XX:MaxMetaspaceSize=96m -XX:MaxDirectMemorySize=32m
      -Djava.io.tmpdir=/tmp/streams-app -jar "$jar")

instance() {
  local name=$1
  mkdir -p "$root/$name"
  exec "${java[@]}" "${app[@]}" --state-dir "$root/$name" --events "$root/$name/events.jsonl" \
    --standbys "${STREAMS_APP_STANDBYS:-1}" --acceptable-recovery-lag "${STREAMS_APP_ACCEPTABLE_RECOVERY_LAG:-10000}" \
    --max-warmup-replicas "${STREAMS_APP_MAX_WARMUP_REPLICAS:-2}" \
    --probing-interval-ms "${STREAMS_APP_PROBING_INTERVAL_MS:-60000}" \
    --verify-keys "$RBP_PLAN_VERIFY_KEYS" --plans-topic "${RBP_PLANS_TOPIC:-_rebalance_plans}" \
    --reports-topic "${RBP_REPORTS_TOPIC:-_rebalance_reports}" \
    --plan-check-interval-ms "${STREAMS_APP_PLAN_CHECK_INTERVAL_MS:-30000}" --session-timeout-ms 10000 \
    --rocksdb-memory-mb 16 --create-topics true
}

if [[ $1 == --join ]]; then
  [[ $# == 2 ]] || { echo "usage: start.sh --join INSTANCE" >&2; exit 2; }
  instance "$2"
fi
if [[ ! -e "$root/.produced" ]]; then
  # Input once per volume: counting tasks with changelogs worth restoring (~1,000 records a partition).
  "${java[@]}" --produce "${STREAMS_APP_RECORDS:-6000}" --keys "${STREAMS_APP_RECORDS:-6000}" "${app[@]}"
  touch "$root/.produced"
fi
pids=()
for name in "$@"; do
  ( instance "$name" >>"$root/$name.log" 2>&1 ) &
  pids+=($!)
done
trap 'kill -TERM "${pids[@]}" 2>/dev/null' TERM INT
status=0
wait -n "${pids[@]}" || status=$?
kill -TERM "${pids[@]}" 2>/dev/null || true
wait || true
exit "$status"
