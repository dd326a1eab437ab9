# Every target installs what it needs into .venv first (Python 3.11, pinned by requirements.lock).
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
UV_VERSION := 0.13.8
# The product's data home (RBP_HOME: lake, jars, demo; see docs/onboarding.md): the checkout's var/ for everything
# make runs, so make, the tests and `RBP_HOME=$(CURDIR)/var rebalance-planner ...` share one lake and one download.
export RBP_HOME ?= $(CURDIR)/var
# JVM artifacts (Apache Kafka for the embedded broker, delta-spark for the local Apache Spark Connect server) come
# from Maven Central through mvn, cached in RBP_HOME/jvm (what Settings.jvm_dir defaults to).
JVM_DIR := $(RBP_HOME)/jvm
KAFKA_JARS := $(JVM_DIR)/kafka/.pom.sha256
DELTA_JARS := $(JVM_DIR)/spark/.pom.sha256
# Apache Kafka's WordCountDemo for the tests' outside application (tests/support/streams_app.py).
EXAMPLES_JARS := $(JVM_DIR)/streams_examples/.pom.sha256
# Our own Maven build (assignor/java): the KIP-924 plugin jar, the reference Kafka Streams app, the streams-groups
# reader and the broker-side assignor (on the embedded broker's classpath: every target running the broker needs it).
JAVA_DIR := assignor/java
JAVA_SOURCES := $(shell find $(JAVA_DIR) -path '*/target' -prune -o \( -name '*.java' -o -name pom.xml \) -print)
JAVA_JARS := $(JAVA_DIR)/target/.built
# The planner core compiled in place by mypyc (jobs/local/compile_core.py); assignor/native.py loads the build only
# while this record of its sources matches them, so an edited source runs as Python until the next build.
CORE := assignor/compiled.sha256
MVN := mvn -q -B -Dstyle.color=never
# The styles and scripts GX's Data Docs link from CDNs, as pinned npm packages (sha512-checked) served from the Data
# Docs' own folder: validate copies them in and points the pages at them (jobs/pipeline/data_docs_assets.py).
DATA_DOCS_ASSETS := $(RBP_HOME)/data-docs-assets/.manifest.sha256

.PHONY: install data-docs-assets core core-clean jdk jvm java java-test lint test test-fast deploy-tools deploy-test image-lock browser bench bench-pipeline bench-runtime bench-streams bench-streams-footprint bench-broker-assignor demo demo-spark simulate lock clean

install: $(CORE) $(KAFKA_JARS) $(DELTA_JARS) $(JAVA_JARS) $(DATA_DOCS_ASSETS)

jdk:
	@command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq openjdk-17-jdk-headless maven; }

data-docs-assets: $(DATA_DOCS_ASSETS)

$(DATA_DOCS_ASSETS): jobs/pipeline/data_docs_assets.py jobs/local/data_docs_assets.py $(STAMP)
	@command -v npm >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq npm; }
	$(BIN)/python -m jobs.local.data_docs_assets $(dir $@)
	@touch $@

jvm: $(KAFKA_JARS) $(DELTA_JARS) $(JAVA_JARS)

$(KAFKA_JARS): jobs/local/kafka/pom.xml $(STAMP) | jdk
	$(BIN)/python -m jobs.local.jvm kafka --jvm-dir $(JVM_DIR)

$(DELTA_JARS): jobs/local/spark/pom.xml $(STAMP) | jdk
	$(BIN)/python -m jobs.local.jvm spark --jvm-dir $(JVM_DIR)

$(EXAMPLES_JARS): tests/support/streams_examples/pom.xml $(STAMP) | jdk
	$(BIN)/python -m tests.support.streams_app --jvm-dir $(JVM_DIR)

java: $(JAVA_JARS)

# verify = build + JUnit (seconds; every shared vector of schemas/vectors included), so the jars are always tested.
$(JAVA_JARS): $(JAVA_SOURCES) $(wildcard schemas/vectors/*.json) | jdk
	cd $(JAVA_DIR) && $(MVN) verify
	@mkdir -p $(dir $@) && touch $@

java-test: $(JAVA_JARS)

$(STAMP): requirements.lock pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet uv==$(UV_VERSION)
	$(BIN)/uv pip install --python $(BIN)/python --quiet -r requirements.lock
	$(BIN)/uv pip install --python $(BIN)/python --quiet --no-deps -e .
	@touch $(STAMP)

core: $(CORE)

$(CORE): $(wildcard assignor/*.py) pyproject.toml $(STAMP)
	@command -v cc >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq gcc; }
	$(BIN)/python -m jobs.local.compile_core

core-clean:
	$(BIN)/python -m jobs.local.compile_core --clean

lock:
	$(BIN)/uv pip compile pyproject.toml --extra dev --python-version 3.11 -o requirements.lock

# The image's lock (docker/Dockerfile): runtime dependencies only (no dev extra) plus docker/image.in, with sha256
# hashes, at requirements.lock's versions except python-dateutil (Flask-AppBuilder needs <3).
image-lock:
	grep -v '^python-dateutil==' requirements.lock >docker/.constraints.txt
	$(BIN)/uv pip compile pyproject.toml docker/image.in --python-version 3.11 --generate-hashes --no-annotate \
	  --custom-compile-command 'make image-lock' -c docker/.constraints.txt -o docker/requirements.lock; \
	  status=$$?; rm -f docker/.constraints.txt; exit $$status

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# The tiers on PYTEST_WORKERS xdist workers (2: both cores, CI's two; 0: one process), each test group whole on one
# worker (docs/development.md). Everything the tests read but must not build concurrently is built here first.
PYTEST_WORKERS ?= 2
test: lint browser $(CORE) $(KAFKA_JARS) $(DELTA_JARS) $(EXAMPLES_JARS) $(DATA_DOCS_ASSETS) java-test
	$(BIN)/pytest -n $(PYTEST_WORKERS)

# The deployment tier: docker/ built and started with Podman (no registry needed: a debootstrap base image), checked
# live by tests/deploy, torn down whatever happens (tests/deploy/run.sh; docs/deployment.md). ~15 min from cold.
PODMAN_COMPOSE_VERSION := 1.6.0
deploy-tools: $(STAMP)
	@command -v podman >/dev/null 2>&1 && command -v runc >/dev/null 2>&1 && command -v debootstrap >/dev/null 2>&1 \
	  || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq podman runc debootstrap uidmap slirp4netns \
	       containernetworking-plugins openssl curl; }
	@test -x $(BIN)/podman-compose || $(BIN)/uv pip install --python $(BIN)/python --quiet \
	  podman-compose==$(PODMAN_COMPOSE_VERSION)

deploy-test: deploy-tools
	tests/deploy/run.sh

# The unit tier only (no broker, no Spark, no Airflow): a few minutes at most, on PYTEST_WORKERS workers too.
test-fast: $(CORE)
	$(BIN)/pytest -n $(PYTEST_WORKERS) tests/unit

bench: $(CORE)
	$(BIN)/python bench/assignor_bench.py
	$(BIN)/python bench/planner_bench.py

# Slow (10,000 groups through the lakehouse pipeline, ~10 min on 2 cores): not part of `make bench`.
bench-pipeline: $(CORE)
	$(BIN)/python bench/pipeline_bench.py

# A live scale-out of real instance processes (~5 min): not part of `make bench`.
bench-runtime: $(CORE) $(KAFKA_JARS) $(JAVA_JARS)
	$(BIN)/python bench/runtime_bench.py

# The same scale-out (3 -> 4) with real Kafka Streams JVMs on both group protocols, plan vs Kafka's own assignor:
# classic (plugin vs KIP-441) and streams (our broker-side assignor vs the broker's sticky); ~30 min, not in `make test`.
bench-streams: $(CORE) $(KAFKA_JARS) $(JAVA_JARS)
	$(BIN)/python bench/streams_bench.py

# Memory and CPU of one reference-app JVM, the fleets' default footprint vs the demo's light one (~4 min).
bench-streams-footprint: $(CORE) $(KAFKA_JARS) $(JAVA_JARS)
	$(BIN)/python bench/streams_footprint.py

# assign() of the broker-side streams assignor beside Kafka's sticky on a 1,000-task, 100-member group (~1 min).
bench-broker-assignor: $(STAMP) | jdk
	$(BIN)/python bench/broker_assignor_bench.py

# The whole product on this machine: broker, live fleet, Airflow standalone, approval, convergence (~6 min).
demo: $(CORE) $(KAFKA_JARS) $(JAVA_JARS)
	$(BIN)/rebalance-planner demo

# The same demo with the stages on Apache Spark with delta-spark (a local Spark Connect server, a child of the demo).
demo-spark: $(CORE) $(KAFKA_JARS) $(DELTA_JARS) $(JAVA_JARS)
	$(BIN)/rebalance-planner demo --engine spark

# The convergence simulation of KIP-441's scale-out, with Kafka's assignor and with the planner.
simulate: $(CORE)
	$(BIN)/rebalance-planner simulate kip441-scaling-out --assignments
	$(BIN)/rebalance-planner simulate scale-out-3-to-4
	$(BIN)/rebalance-planner simulate scale-out-3-to-4 --assignor planner --assignments

# The DAG's browser test drives Debian's Chromium (headless).
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
browser:
	@command -v chromium >/dev/null 2>&1 || { $(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq chromium; }

clean:
	@test ! -x $(BIN)/python || $(BIN)/python -m jobs.local.compile_core --clean
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
	rm -rf $(JAVA_DIR)/target $(JAVA_DIR)/*/target
