# kwire — one entry point for set-up, running, tests and benchmarks.
# `make run` and `make test` do all set-up on a fresh machine.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
CONFIG ?= config/server.properties
DATA   ?= data

.PHONY: install run test nightly lint lint-imports typecheck generate check-generated bench compat-jars clean

## pip compiles what it installs one file at a time; compileall does it on every core (half the
## install's time on a 2-core machine).
$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q --no-compile -e '.[test,audit]'
	$(PY) -m compileall -q -j 0 $(VENV)/lib
	touch $(STAMP)

install: $(STAMP)

## Regenerate the message codecs from messages/specs.
generate: install
	$(PY) -m messages.generator

## Fail when the committed generated modules differ from what the specs produce.
check-generated: install
	$(PY) -m messages.generator --check

lint: install
	$(VENV)/bin/ruff check .

typecheck: install
	$(VENV)/bin/mypy

## The layer contracts in pyproject.toml [tool.importlinter] (ARCHITECTURE.md, "Layers").
lint-imports: install
	$(VENV)/bin/lint-imports --no-logo

## Stock Kafka jars (the versions pinned in compat/kafka-versions.properties) from Maven Central.
compat-jars: install
	bash compat/fetch-kafka.sh

## A standalone controller on localhost:9093, formatted on first use into ./data.
run: install
	$(PY) -m tools.cli run-standalone --config $(CONFIG) --data $(DATA)

## The checks and the jar fetch run side by side (the fetch mostly waits on the network), each
## one's output kept together. Then two pytest-xdist workers (the 2-core machines' count); tests
## that share a cluster, a JVM or the Spark session run on one worker (conftest.py). The 15
## slowest tests are printed. Bytecode is compiled first: the tests start hundreds of
## short-lived kwire processes, each of which would otherwise compile every module it imports
## where PYTHONDONTWRITEBYTECODE is set.
test: install
	$(MAKE) --no-print-directory -j 4 --output-sync=target check-generated lint lint-imports typecheck compat-jars
	$(PY) -m compileall -q -j 0 kwire messages storage server tools tests compat conftest.py
	$(PY) -m pytest -q -n 2 --durations=15

## Long soaks, not part of `make test`: 10,000 more simulation seeds, 100 leader kills in each
## of the eight mixed kwire/Kafka quorum configurations, 20 rounds of network and process faults
## (nemeses drawn from FAULT_SEED) on kwire, stock and mixed quorums of both releases, 10^6
## fuzzed inputs for every message decoder, 50 leader kills of a kwire quorum under load, and
## 20 rounds of active-controller and broker kills under stock brokers on both pinned releases.
FAULT_ROUNDS ?= 20
FAULT_SEED ?= 1
nightly: install compat-jars
	KWIRE_SIM_FIRST=10000 KWIRE_SIM_SEEDS=10000 $(PY) -m pytest -q tests/raft/test_simulation.py
	KWIRE_MIXED_LEADER_CHANGES=100 $(PY) -m pytest -q compat/test_mixed_quorum.py
	KWIRE_FAULT_ALL_CONFIGS=1 KWIRE_FAULT_ROUNDS=$(FAULT_ROUNDS) KWIRE_FAULT_SEED=$(FAULT_SEED) \
		$(PY) -m pytest -q -s compat/test_quorum_faults.py
	KWIRE_FAULT_ALL_CONFIGS=1 $(PY) -m pytest -q compat/test_disk_faults.py
	KWIRE_FUZZ_INPUTS=1000000 $(PY) -m pytest -q tests/messages/test_fuzz.py
	KWIRE_LEADER_KILLS=50 $(PY) -m pytest -q tests/server/test_failover.py
	KWIRE_FAILOVERS=20 $(PY) -m pytest -q compat/test_stock_brokers.py

## Every benchmark section, kwire beside its reference. BENCH_ARGS picks sections and flags, e.g.
## `make bench BENCH_ARGS="codec storage quorum --throughput"` adds the quorum's load curve.
BENCH_ARGS ?=
bench: install compat-jars
	$(PY) -m tools.bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) compat/.cache .pytest_cache .mypy_cache .ruff_cache .hypothesis .import_linter_cache
