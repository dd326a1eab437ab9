#!/usr/bin/env bash
# `make deploy-test`: docker/ built and run for real with Podman on this machine, checked by tests/deploy, and torn
# down whatever happens. Phases: base image (debootstrap, cached), builds, up, checks, down; their times and the
# peak memory go to var/deploy-test/report.txt. See docs/deployment.md, "Testing the deployment".
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
export CONTAINERS_CONF=$root/tests/deploy/containers.conf
project=${RBP_DEPLOY_PROJECT:-rbp-deploy-test}
compose=("$root/.venv/bin/podman-compose" -p "$project" -f docker/docker-compose.yml -f tests/deploy/compose.local.yml)
out=$root/var/deploy-test
mkdir -p "$out"
report=$out/report.txt
: >"$report"
: >"$out/monitor.log"
work=$(mktemp -d /tmp/rbp-deploy.XXXXXX)
chmod 755 "$work"
background=()

phase_start=0
phase() { phase_start=$(date +%s); phase_name=$1; echo "== $1" >&2; }
phase_end() { echo "$phase_name: $(( $(date +%s) - phase_start )) s" | tee -a "$report" >&2; }

teardown() {
  local status=$?
  set +e
  if (( status != 0 )); then
    # What a failure on a loaded host leaves to read in CI's output: load and memory over the last minutes, and the
    # processes holding the most memory and CPU now.
    echo "== the host at the failure (var/deploy-test/monitor.log every 5 s)" >&2
    tail -24 "$out/monitor.log" >&2
    ps -eo rss=,pcpu=,etime=,args= --sort=-rss | head -12 | cut -c1-160 >&2
    ps -eo pcpu=,rss=,etime=,args= --sort=-pcpu | head -8 | cut -c1-160 >&2
  fi
  phase down
  for pid in "${background[@]}"; do kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; done
  # Bounded: on a starved host (28 Nov, CI) down ran for 20 minutes; what it leaves, the lines below remove.
  timeout 120 "${compose[@]}" logs >"$out/compose.log" 2>&1
  timeout 300 "${compose[@]}" down -v -t 20 >"$out/down.log" 2>&1
  # Whatever down missed (a container started by hand, a half-created network): by the project's label.
  podman ps -aq --filter "label=io.podman.compose.project=$project" | xargs -r podman rm -f -t 5 >/dev/null
  podman volume ls -q --filter "label=io.podman.compose.project=$project" | xargs -r podman volume rm -f >/dev/null
  podman network ls -q --filter "label=io.podman.compose.project=$project" | xargs -r podman network rm -f >/dev/null
  phase_end
  left=$(podman ps -aq --filter "label=io.podman.compose.project=$project"; \
         podman volume ls -q --filter "label=io.podman.compose.project=$project"; \
         podman network ls -q --filter "label=io.podman.compose.project=$project")
  if [[ -n "$left" ]]; then echo "left behind: $left" | tee -a "$report" >&2; status=1; fi
  if [[ -f "$work/peak_mb" ]]; then
    read -r host_peak stack_peak <"$work/peak_mb"
    echo "peak memory: the stack's containers $stack_peak MB; the host $host_peak MB used (before: $base_mb MB)" \
      | tee -a "$report" >&2
  fi
  rm -rf "$work"
  echo "deploy-test: exit $status (report: $report)" >&2
  exit "$status"
}
trap teardown EXIT
trap 'exit 130' INT TERM

base_mb=$(free -m | awk '/^Mem:/ {print $3}')
# Memory, sampled every 5 s: the host's used memory (shared with other work) and the sum over the stack's
# containers (podman stats); the peaks go to the report.
( host_peak=0; stack_peak=0
  while :; do
    used=$(free -m | awk '/^Mem:/ {print $3}')
    stack=$(podman stats --no-stream --format '{{.MemUsage}}' 2>/dev/null | awk '{
      v = $1; u = v; gsub(/[0-9.]/, "", u); sub(/[a-zA-Z]+$/, "", v)
      m = (u == "GB") ? 1024 : (u == "MB") ? 1 : (u == "kB") ? 1 / 1024 : 0; s += v * m } END { printf "%d", s }')
    (( used > host_peak )) && host_peak=$used
    (( ${stack:-0} > stack_peak )) && stack_peak=$stack
    echo "$host_peak $stack_peak" >"$work/peak_mb"
    echo "$(date +%T) load $(cut -d' ' -f1-3 /proc/loadavg) used ${used} MB stack ${stack:-0} MB" >>"$out/monitor.log"
    sleep 5
  done ) &
background+=($!)

phase "base image"
tests/deploy/base-image.sh localhost/debian:bookworm
phase_end

phase builds
tags=(localhost/rbp-python:3.11-bookworm localhost/rebalance-planner:latest localhost/rebalance-planner-spark:latest
      localhost/rebalance-planner-streams-app:latest localhost/rebalance-planner-kafka:latest
      localhost/rbp-postgres:local)
previous=()
for tag in "${tags[@]}"; do
  if podman image exists "$tag"; then previous+=("$(podman image inspect --format '{{.Id}}' "$tag")"); fi
done
build() { podman build -q --layers "$@" . >/dev/null; }
build -f tests/deploy/local-images.Containerfile --target python -t localhost/rbp-python:3.11-bookworm
build -f docker/Dockerfile --target project --build-arg PYTHON_IMAGE=localhost/rbp-python:3.11-bookworm \
  -t localhost/rebalance-planner:latest
build -f docker/Dockerfile --target spark-connect --build-arg PYTHON_IMAGE=localhost/rbp-python:3.11-bookworm \
  -t localhost/rebalance-planner-spark:latest
build -f docker/Dockerfile --target streams-app --build-arg PYTHON_IMAGE=localhost/rbp-python:3.11-bookworm \
  -t localhost/rebalance-planner-streams-app:latest
build -f docker/Dockerfile --target kafka --build-arg PYTHON_IMAGE=localhost/rbp-python:3.11-bookworm \
  -t localhost/rebalance-planner-kafka:latest
build -f tests/deploy/local-images.Containerfile --target postgres -t localhost/rbp-postgres:local
# The previous run's images, now untagged, would fill the disk run after run; removing them by id (not a prune,
# which would also drop the layer cache the next build starts from).
# Newest first: an image built on another (spark-connect on the project's) must go before the one it is built on,
# and one still in use is kept (podman refuses it) rather than ending the run.
for (( i = ${#previous[@]} - 1; i >= 0; i-- )); do
  old=${previous[i]}
  if podman image exists "$old" && [[ -z $(podman images -q --filter "id=$old" --format '{{.Repository}}' | grep -v none) ]]; then
    podman rmi "$old" >/dev/null 2>&1 || true
  fi
done
podman images --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E 'rbp-|rebalance-planner|debian' \
  | sed 's/^/image /' | tee -a "$report" >&2
phase_end

# Secrets: fresh for every run, never written outside $work. Key files and passwords are readable by the
# containers' user (uid 50000) only. The signing key is encrypted at rest (production mode refuses a plain one);
# its passphrase is a second file, mounted into the signer only.
secret() { openssl rand -hex 16; }
mkdir -m 700 "$work/secrets"
(umask 077; openssl rand -hex 24 >"$work/secrets/plan_signing_passphrase"
  openssl rand -hex 24 >"$work/secrets/airflow_signer_password")
"$root/.venv/bin/rebalance-planner" keys generate --dir "$work/keys" --key-id deploy-test \
  --passphrase-file "$work/secrets/plan_signing_passphrase" >"$work/keys.txt"
chown 50000 "$work/keys/deploy-test.pem" "$work/secrets/plan_signing_passphrase" "$work/secrets/airflow_signer_password"
chmod 755 "$work/keys" "$work/secrets"
export RBP_PLAN_SIGNING_KEY_PEM=$work/keys/deploy-test.pem RBP_PLAN_KEY_ID=deploy-test
export RBP_PLAN_SIGNING_PASSPHRASE_PATH=$work/secrets/plan_signing_passphrase
export RBP_AIRFLOW_SIGNER_PASSWORD_PATH=$work/secrets/airflow_signer_password
# TLS: a CA made for this run, Kafka's keystore and the api-server's certificate (docker/tls/make-certs.sh); the
# checks verify both servers against this CA and no other.
docker/tls/make-certs.sh "$work/tls" >/dev/null
chown 50000 "$work/tls/kafka.p12" "$work/tls/kafka.p12.password" "$work/tls/airflow.key" "$work/tls/airflow-jwt.key"
chown 999 "$work/tls/postgres.key"  # the postgres user of the official image and of the stand-in
chown 50000 "$work/tls/spark-connect.key"  # Spark Connect's TLS proxy runs as the project image's user
chmod 755 "$work/tls"
export RBP_TLS_DIR=$work/tls RBP_DEPLOY_CA=$work/tls/ca.crt
RBP_PLAN_VERIFY_KEYS=$(sed -n 's/^groups: *RBP_PLAN_VERIFY_KEYS=//p' "$work/keys.txt")
export RBP_PLAN_VERIFY_KEYS
# FAB ids: airflow-init makes the admin (1) and publish's read-only login rbp-signer (2); the approver created below
# is 3 (a wrong id shows as Airflow's 403 "User=approver (id=N) is not a respondent").
export RBP_APPROVERS=3
export AIRFLOW_JWT_SECRET=$(secret) AIRFLOW_API_SECRET_KEY=$(secret) AIRFLOW_ADMIN_USERNAME=admin \
  AIRFLOW_ADMIN_PASSWORD=$(secret) AIRFLOW_ADMIN_EMAIL=ops@example.org POSTGRES_PASSWORD=$(secret) \
  RBP_KAFKA_ADMIN_PASSWORD=$(secret) RBP_KAFKA_PIPELINE_PASSWORD=$(secret) RBP_KAFKA_APP_PASSWORD=$(secret) \
  RBP_KAFKA_STREAMS_APP_PASSWORD=$(secret) RBP_SPARK_CONNECT_TOKEN=$(openssl rand -hex 32)
export AIRFLOW_HOST_PORT=${RBP_DEPLOY_PORT:-$("$root/.venv/bin/python" -c \
  'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
export AIRFLOW_BASE_URL=https://localhost:$AIRFLOW_HOST_PORT

phase up
# In dependency order, by hand: podman-compose with podman 4.3 ignores `condition: service_healthy` and
# `service_completed_successfully`, and the --requires links it adds break once a one-shot service has exited.
up() { timeout 600 "${compose[@]}" up -d --no-deps "$@" >>"$out/up.log" 2>&1 || { tail -30 "$out/up.log" >&2; exit 1; }; }
# No systemd here, so nothing runs the healthchecks on their own: each is run here until it passes, and never again
# by the harness (a loop running them through the checks took a JVM start every few seconds from the stack under
# test). `timeout`: Podman 4.3 waits for a check past its own timeout.
healthy() {
  local deadline=$(( $(date +%s) + 300 )) c
  for c in "$@"; do
    until timeout 90 podman healthcheck run "${project}_${c}_1" >/dev/null 2>&1; do
      (( $(date +%s) < deadline )) || { echo "$c not healthy within 300 s" >&2; exit 1; }
      sleep 2
    done
  done
}
completed() {
  local c code
  for c in "$@"; do
    code=$(timeout 600 podman wait "${project}_${c}_1")
    [[ $code == 0 ]] || { echo "$c exited $code" >&2; podman logs --tail 30 "${project}_${c}_1" >&2; exit 1; }
  done
}
up kafka postgres spark-connect
healthy kafka postgres
up kafka-init airflow-init
completed kafka-init airflow-init
up airflow-apiserver airflow-scheduler airflow-dag-processor airflow-triggerer airflow-worker airflow-signer demo-fleet streams-app
url=https://127.0.0.1:$AIRFLOW_HOST_PORT
# Generous: on a loaded shared machine (load 30+ on 2 cores was seen) the api-server takes minutes to start.
deadline=$(( $(date +%s) + 900 ))
until curl -sf --cacert "$RBP_DEPLOY_CA" -o /dev/null "$url/api/v2/monitor/health"; do
  (( $(date +%s) < deadline )) || { echo "Airflow's API did not answer within 900 s" >&2; exit 1; }
  sleep 2
done
export RBP_APPROVER_USERNAME=approver RBP_APPROVER_PASSWORD=$(secret)
podman exec "${project}_airflow-apiserver_1" airflow users create --role Op --username approver \
  --password "$RBP_APPROVER_PASSWORD" --email approver@example.org --firstname A --lastname Pprover >/dev/null
phase_end

phase checks
set +e  # a failing check must still be timed and summarised; the exit status says it failed
# -v: each check's outcome in the log as it ends. The project's faulthandler exit at 15 min (pyproject.toml) would end
# the session inside the nightly run, which takes longer on a loaded machine: each test's own timeout bounds it.
RBP_DEPLOY_PROJECT=$project RBP_DEPLOY_URL=$url RBP_DEPLOY_REPORT=$report "$root/.venv/bin/pytest" -v -p no:cacheprovider \
  -o faulthandler_timeout=5400 tests/deploy \
  ${RBP_DEPLOY_PYTEST_ARGS:-} 2>&1 | tee "$out/pytest.log" >&2
checks=${PIPESTATUS[0]}
phase_end
grep -E '^[0-9]+ (passed|failed)|passed|failed' "$out/pytest.log" | tail -1 | sed 's/^/checks: /' >>"$report"
exit "$checks"
