# replicator — every target is idempotent; test/run/bench do their own set-up.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
CACHE := .cache
KAFKA_PORT ?= 9092
S3_PORT ?= 9000
CATALOG_PORT ?= 9083
WAREHOUSE ?= ./warehouse
export KAFKA_PORT S3_PORT CATALOG_PORT

.DEFAULT_GOAL := help
.PHONY: help setup spark-jars kafka-jars s3-jars catalog-jars prometheus jvm-archive proto test test-unit lint bench run run-s3 kafka-up kafka-down s3-up s3-down catalog-up catalog-down cluster-up cluster-down notebook soak clean

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-11s %s\n", $$1, $$2}'

# Quiet unless it fails: pip's and setuptools' output (the editable-install banner) goes to
# .venv/install.log, printed in full when a step fails.
$(VENV)/.installed: pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "Python 3.11 is required ($(PYTHON) not found)"; exit 1; }
	@echo "setting up $(VENV) (log: $(VENV)/install.log)"
	@$(PYTHON) -m venv $(VENV)
	@{ $(PY) -m pip install -q --upgrade pip && $(PY) -m pip install -q -e '.[dev]'; } >$(VENV)/install.log 2>&1 \
		|| { cat $(VENV)/install.log; echo "pip install failed (log: $(VENV)/install.log)"; exit 1; }
	@touch $@

$(CACHE)/spark-jars/.resolved: replicator/runtime/jars.py $(wildcard replicator/runtime/java/s3commit/*.java) $(VENV)/.installed
	@echo "fetching the Spark session's jars (replicator/runtime/jars.py) into $(CACHE)/spark-jars"
	@mkdir -p $(CACHE)
	@$(PY) -m replicator jars --all --into $(CACHE)/spark-jars >$(CACHE)/spark-jars.log 2>&1 \
		|| { cat $(CACHE)/spark-jars.log; echo "fetching the jars failed"; exit 1; }
	@touch $@

$(CACHE)/kafka-libs/.resolved: tools/kafka-broker/pom.xml
	@echo "resolving the Kafka broker classpath into $(CACHE)/kafka-libs"
	@mkdir -p $(CACHE)
	@mvn -q -B -f tools/kafka-broker/pom.xml dependency:copy-dependencies -DincludeScope=runtime \
		-DoutputDirectory=$(CURDIR)/$(CACHE)/kafka-libs \
		>$(CACHE)/mvn-kafka-libs.log 2>&1 || { cat $(CACHE)/mvn-kafka-libs.log; echo "mvn failed"; exit 1; }
	@touch $@

$(CACHE)/s3proxy-libs/.resolved: tools/s3proxy/pom.xml
	@echo "resolving the S3Proxy classpath into $(CACHE)/s3proxy-libs"
	@mkdir -p $(CACHE)
	@mvn -q -B -f tools/s3proxy/pom.xml dependency:copy-dependencies -DincludeScope=runtime \
		-DoutputDirectory=$(CURDIR)/$(CACHE)/s3proxy-libs \
		>$(CACHE)/mvn-s3proxy-libs.log 2>&1 || { cat $(CACHE)/mvn-s3proxy-libs.log; echo "mvn failed"; exit 1; }
	@touch $@

# The Hive metastore service runs from pyspark's own jars plus this one (Hive's async logging needs it).
$(CACHE)/metastore-libs/.resolved:
	@echo "fetching the metastore's extra jar (com.lmax:disruptor) into $(CACHE)/metastore-libs"
	@mkdir -p $(CACHE)
	@mvn -q -B org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy -Dartifact=com.lmax:disruptor:3.4.4 \
		-DoutputDirectory=$(CURDIR)/$(CACHE)/metastore-libs \
		>$(CACHE)/mvn-metastore-libs.log 2>&1 || { cat $(CACHE)/mvn-metastore-libs.log; echo "mvn failed"; exit 1; }
	@touch $@

# Hadoop's local file system without its per-file shell calls (tools/localfs/README.md): compiled with the
# JDK's javac against the Hadoop API jar pyspark ships, so it needs nothing downloaded.
LOCALFS_SRC := $(wildcard tools/localfs/src/replicator/localfs/*.java)
$(CACHE)/spark-jars/replicator-localfs.jar: $(LOCALFS_SRC) $(VENV)/.installed
	@echo "building $@"
	@rm -rf $(CACHE)/localfs-classes && mkdir -p $(CACHE)/localfs-classes $(CACHE)/spark-jars
	@hadoop_api=$$($(PY) -c "import pathlib, pyspark; print(next((pathlib.Path(pyspark.__file__).parent / 'jars').glob('hadoop-client-api-*.jar')))") \
		&& javac --release 17 -Xlint:all -Werror -cp "$$hadoop_api" -d $(CACHE)/localfs-classes $(LOCALFS_SRC) \
		&& jar cf $@.tmp -C $(CACHE)/localfs-classes . && mv $@.tmp $@

# Debian's prometheus package unpacked, not installed (tools/prometheus/fetch.sh: no root, a private
# package index when the machine has none): prometheus and promtool for the monitoring tests and lint.
PROMTOOL := $(CACHE)/prometheus/usr/bin/promtool
$(CACHE)/prometheus/.fetched: tools/prometheus/fetch.sh
	@echo "fetching Debian's prometheus package (prometheus, promtool; not installed) into $(CACHE)/prometheus"
	@mkdir -p $(CACHE)
	@bash tools/prometheus/fetch.sh $(CACHE)/prometheus >$(CACHE)/prometheus.log 2>&1 \
		|| { cat $(CACHE)/prometheus.log; echo "fetching prometheus failed"; exit 1; }
	@touch $@

spark-jars: $(CACHE)/spark-jars/.resolved $(CACHE)/spark-jars/replicator-localfs.jar ## the Spark session's jars (Delta, Kafka source, S3A) from Maven Central + the local file system jar into .cache/spark-jars
kafka-jars: $(CACHE)/kafka-libs/.resolved ## resolve the Kafka broker classpath into .cache/kafka-libs
s3-jars: $(CACHE)/s3proxy-libs/.resolved ## resolve the S3Proxy classpath (local S3-compatible server) into .cache/s3proxy-libs
catalog-jars: $(CACHE)/metastore-libs/.resolved ## the Hive metastore's one jar beyond pyspark's into .cache/metastore-libs
prometheus: $(CACHE)/prometheus/.fetched ## Debian's prometheus + promtool unpacked (not installed) into .cache/prometheus

# The driver JVM's class archive (replicator/sim/jvm_archive.py): written once per installation by a
# small replication (about a minute); quiet when it exists; a failure only warns.
jvm-archive: $(VENV)/.installed spark-jars ## the driver JVM's class archive in .cache/jvm (faster Spark start)
	@$(PY) -m replicator.sim.jvm_archive

setup: $(VENV)/.installed spark-jars kafka-jars s3-jars catalog-jars prometheus jvm-archive ## venv + package (editable, dev extras) + cached JVM jars + prometheus + JVM class archive

proto: $(VENV)/.installed ## regenerate replicator/_proto from schemas/*.proto
	bash tools/gen_proto.sh

test: setup ## the whole suite but the soak-only scenarios (unit + integration: real Kafka broker, S3 server, Delta)
	$(VENV)/bin/pytest -q -m "not soak" --durations=40

test-unit: setup ## fast pure-Python tests only
	$(VENV)/bin/pytest -q -m "not integration and not reliability"

lint: setup ## ruff + mypy + promtool on the shipped alert rules
	$(VENV)/bin/ruff check replicator tests
	$(VENV)/bin/mypy replicator
	$(PROMTOOL) check rules deploy/prometheus/replicator-rules.yml
	$(PROMTOOL) test rules deploy/prometheus/replicator-rules.test.yml

bench: setup ## benchmarks -> bench/results.md + results.png (BENCH_ARGS="--events 100000", "--quick")
	$(PY) -m bench $(BENCH_ARGS)

run: setup ## main job on the embedded default: local broker, simulated stream, ./warehouse
	$(PY) -m replicator.sim.demo --warehouse $(WAREHOUSE)

run-s3: setup ## make run into s3a://warehouse/demo on the local S3-compatible server (state/s3, port $S3_PORT; make s3-down stops it)
	$(PY) -m replicator.sim.demo --s3

kafka-up: setup ## start the local Kafka broker (KRaft) on 127.0.0.1:$KAFKA_PORT
	@$(PY) -m replicator.sim.localkafka up --port $(KAFKA_PORT)

kafka-down: ## stop the local Kafka broker
	@if [ -x $(PY) ]; then $(PY) -m replicator.sim.localkafka down; fi

s3-up: setup ## start the local S3-compatible server (S3Proxy) on 127.0.0.1:$S3_PORT
	@$(PY) -m replicator.sim.locals3 up --port $(S3_PORT)

s3-down: ## stop the local S3-compatible server
	@if [ -x $(PY) ]; then $(PY) -m replicator.sim.locals3 down; fi

catalog-up: setup ## start the local Hive metastore service on 127.0.0.1:$CATALOG_PORT; print the URI for --catalog-uri
	@$(PY) -m replicator.sim.localcatalog up --port $(CATALOG_PORT)

catalog-down: ## stop the local Hive metastore service
	@if [ -x $(PY) ]; then $(PY) -m replicator.sim.localcatalog down; fi

cluster-up: setup ## start a Spark standalone master + 2 workers on 127.0.0.1:$SPARK_MASTER_PORT; print the master URL
	@$(PY) -m replicator.sim.localspark up

cluster-down: ## stop the local Spark cluster
	@if [ -x $(PY) ]; then $(PY) -m replicator.sim.localspark down; fi

notebook: setup ## Jupyter Lab on notebooks/explore.ipynb (explores ./warehouse; REPLICATOR_WAREHOUSE=DIR to change)
	REPLICATOR_WAREHOUSE=$${REPLICATOR_WAREHOUSE:-$(abspath $(WAREHOUSE))} $(VENV)/bin/jupyter lab --ip 127.0.0.1 notebooks/explore.ipynb

soak: setup ## reliability scenarios at full size + the soak-only scenarios
	REPLICATOR_SOAK=1 $(VENV)/bin/pytest -q -m "reliability or soak"

clean: kafka-down s3-down catalog-down cluster-down ## remove venv, caches, local state, ./warehouse and ./warehouse-craft
	rm -rf $(VENV) $(CACHE) state warehouse warehouse-craft build .pytest_cache .mypy_cache .ruff_cache .hypothesis
