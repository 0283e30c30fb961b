# kwire — one entry point for set-up, running, tests and benchmarks.
# `make run` and `make test` do all set-up on a fresh machine.

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
CONFIG ?= config/server.properties
DATA   ?= data

.PHONY: install run test nightly soak lint lint-imports typecheck generate check-generated bench compat-jars browser clean

## The packages are installed by uv (itself from PyPI): it resolves and fetches in parallel and
## links files from its cache, where pip fetched index pages one at a time (most of the time pip
## took on a warm cache). It first tries its cache alone (--offline), and
## goes to the network only when that lacks a package: a proxy that answers every revalidation
## as modified would otherwise make it download and build pyspark's sdist again on each run.
## Site-packages are installed without bytecode (uv's default): the test run writes it as
## modules are first imported (see `test`), which compiles the few hundred modules the tests use
## instead of the whole tree (pyspark alone is thousands).
## setup.py builds storage._crecords, the commit path's compiled record loops (in place, beside
## storage/record_loops.py; --reinstall-package builds it again when storage/_crecords.c changed);
## KWIRE_PURE_PYTHON=1 runs without it.
UV_INSTALL := $(VENV)/bin/uv pip install -q --python $(PY) --reinstall-package kwire -e '.[test,audit]'

$(STAMP): pyproject.toml setup.py storage/_crecords.c
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check 'uv>=0.5'
	$(UV_INSTALL) --offline 2>/dev/null || $(UV_INSTALL)
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

## Stock Kafka jars from Maven Central: the releases `make test` uses (kafka.versions and
## kafka.cover.releases in compat/kafka-versions.properties). The other releases of the matrix
## (kafka.releases) are fetched on demand, or all at once with `bash compat/fetch-kafka.sh all`.
compat-jars:
	bash compat/fetch-kafka.sh

## Debian's chromium for the fault report's browser test, installed where missing (root or sudo).
browser:
	bash compat/ensure-chromium.sh

## A standalone controller on localhost:9093, formatted on first use into ./data.
run: install
	$(PY) -m tools.cli run-standalone --config $(CONFIG) --data $(DATA)

## Set-up: the install and the stock Kafka jar fetch run side by side (one waits on pip, the
## other on Maven). Then two pytest-xdist runs go at once, two workers each (the 2-core
## machines' count): the tests, and the simulation seeds (marker `simulation`) with the checks
## at idle CPU priority (SCHED_IDLE, or nice 19 where `chrt --idle` cannot run). The tests spend
## part of their time waiting on servers and JVMs; the seeds, pure CPU, run in exactly those
## waits and take no CPU from a test that has work. The seeds' and the checks' output is printed
## after the tests'. `make test` runs the first 100 seeds of each scenario (20 stray ones): more
## seeds ran past the other tests or slowed them, and made the whole run longer (the timings
## that chose the count are in BENCHMARKS.md); `make nightly` runs seeds 100-499 (their
## recorded traces) and 10,000 more.
## Tests that share a cluster, a JVM or the Spark session run on one worker
## (conftest.py); the 15 slowest of each run are printed.
## Bytecode is written as modules are first imported, whatever PYTHONDONTWRITEBYTECODE says:
## the tests start hundreds of short-lived kwire, tool and Spark worker processes, each of
## which would otherwise compile every module it imports, and pytest keeps its rewritten test
## modules only when it may write bytecode. The project's own modules are compiled up front so
## that the workers do not all compile them at once. The stock releases' class data sharing
## archives (tools/stock_kafka.py) are made meanwhile, one after another, so that the first tests
## to start a JVM do not each wait for an archive's training. Debian's chromium, which the fault
## report's browser test (compat/test_fault_report.py) opens, is installed beside the set-up
## where missing (`make browser`).
## Every process of the run inherits KWIRE_TEST_RUN, a random id; at the end tools/leftovers.py
## lists each process carrying it that is still alive, stops it (SIGTERM, then SIGKILL) and fails
## the run: a test must stop everything it started. Processes of other runs are not touched.
test:
	$(MAKE) --no-print-directory -j 3 --output-sync=target install compat-jars browser
	@export KWIRE_TEST_RUN=$$(cat /proc/sys/kernel/random/uuid); \
	KWIRE_KAFKA_JVM_FLAGS=-XX:TieredStopAtLevel=1 $(PY) -m tools.stock_kafka --class-data-archives \
		> .class-data-archives.log 2>&1 & archives=$$!; \
	$(PY) -m compileall -q -j 0 kwire messages storage server tools tests compat conftest.py; \
	idle=$$(chrt --idle 0 true >/dev/null 2>&1 && echo "chrt --idle 0" || echo "nice -n 19"); \
	PYTHONDONTWRITEBYTECODE= KWIRE_SIM_SEEDS=100 $$idle $(PY) -m pytest -q -n 2 -m simulation -p no:cacheprovider \
		--durations=5 > .simulation.log 2>&1 & simulated=$$!; \
	$$idle $(MAKE) --no-print-directory -j 4 --output-sync=target check-generated lint lint-imports \
		typecheck > .checks.log 2>&1 & checks=$$!; \
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n 2 -m "not simulation" --durations=15; tested=$$?; \
	wait $$simulated; seeds=$$?; wait $$checks; checked=$$?; cat .simulation.log .checks.log; \
	wait $$archives; \
	$(PY) -m tools.leftovers; left=$$?; \
	if [ $$seeds -ne 0 ]; then echo "make test: the simulation seeds failed (output above)"; fi; \
	if [ $$checked -ne 0 ]; then echo "make test: the checks failed (output above)"; fi; \
	if [ $$left -ne 0 ]; then echo "make test: processes were left running (listed above)"; fi; \
	exit $$(( tested || seeds || checked || left ))

## Long soaks, not part of `make test`: 10,000 more simulation seeds, 100 leader kills in each
## of the eight mixed kwire/Kafka quorum configurations, kwire's share of 30 elections against
## two stock controllers (static and dynamic, both releases, a stock-only control beside; at
## least a third, printed with -s), 20 rounds of network and process faults
## (nemeses drawn from FAULT_SEED, the failpoint nemeses among them on kwire quorums; `make test`
## runs five, one of each kind, and the history
## checker's positive control, not the controller workload's) on kwire, stock and mixed quorums
## of both releases, each with
## its release's stock brokers under the controller workload (compat/faults/cluster.py), 10^6
## fuzzed inputs for every message decoder, the property tests of storage and the wire layer with
## twenty times their examples (Hypothesis profile `nightly`, conftest.py), 1,000 random
## messages per spec version through
## Kafka's own codecs, 50 leader kills of a kwire quorum under load, 20
## rounds of active-controller and broker kills under stock brokers on both pinned releases,
## the release matrix (three stock brokers of every line since 3.3 on kwire at their line's
## metadata.version; its table in release-matrix.md; `make test` runs one cluster of mixed releases),
## a stock 3.6.2 broker refused alike by a stock 4.4 and a kwire controller finalized past it
## (`make test` compares the same refusals request by request),
## a live controller swap (stock 3.9.2 and 4.4.0 dynamic quorums under three stock brokers, an
## idempotent producer and a consumer: each controller replaced by a kwire node with
## add-controller / remove-controller, then back to stock; no broker fenced, nothing lost),
## the differential sequences at every line's newest metadata.version against stock 4.4 (its
## table in mv-differential.md; `make test` runs 3.6-IV2),
## both secured quorums on both releases, every release-and-kind pair of the add, remove and
## replace controller runs and of the differential probe (`make test` runs a cover of each
## release and each kind), the reassignment, long-running stock controller and stock-quorum
## audit runs on the older release too (`make test` runs the newest), the replica audit of
## stock brokers under a stock controller and on the older release (`make test` runs the newest
## under a kwire one) and on a standalone Spark cluster (`make test` runs it on local[2]), and
## the fault soak
## (`soak`, SOAK_MINUTES).
FAULT_ROUNDS ?= 20
FAULT_SEED ?= 1
SOAK_MINUTES ?= 60
nightly: install compat-jars
	KWIRE_SIM_FIRST=100 KWIRE_SIM_SEEDS=400 $(PY) -m pytest -q tests/raft/test_simulation.py -k seeds
	KWIRE_SIM_FIRST=10000 KWIRE_SIM_SEEDS=10000 $(PY) -m pytest -q tests/raft/test_simulation.py
	KWIRE_MIXED_LEADER_CHANGES=100 $(PY) -m pytest -q compat/test_mixed_quorum.py
	KWIRE_MIXED_ELECTIONS=30 $(PY) -m pytest -q -s compat/test_election_share.py
	KWIRE_FAULT_ALL_CONFIGS=1 KWIRE_FAULT_ROUNDS=$(FAULT_ROUNDS) KWIRE_FAULT_SEED=$(FAULT_SEED) \
		$(PY) -m pytest -q -s compat/test_quorum_faults.py
	KWIRE_FAULT_ALL_CONFIGS=1 $(PY) -m pytest -q compat/test_disk_faults.py
	KWIRE_FUZZ_INPUTS=1000000 $(PY) -m pytest -q tests/messages/test_fuzz.py
	$(PY) -m pytest -q --hypothesis-profile=nightly tests/storage tests/kwire tests/messages \
		--ignore=tests/messages/test_fuzz.py
	KWIRE_CODEC_MESSAGES=1000 $(PY) -m pytest -q compat/test_java_byte_identity.py
	KWIRE_LEADER_KILLS=50 $(PY) -m pytest -q tests/server/test_failover.py
	KWIRE_FAILOVERS=20 $(PY) -m pytest -q compat/test_stock_brokers.py
	KWIRE_RELEASE_MATRIX=all KWIRE_RELEASE_MATRIX_TABLE=release-matrix.md $(PY) -m pytest -q -s \
		compat/test_release_matrix.py
	KWIRE_ROLLING_UPGRADE=1 $(PY) -m pytest -q -s compat/test_rolling_upgrade.py
	KWIRE_OLD_BROKER_REFUSAL=1 $(PY) -m pytest -q compat/test_old_broker_refused.py
	KWIRE_CONTROLLER_SWAP=3.9.2,4.4.0 $(PY) -m pytest -q -s compat/test_controller_swap.py
	rm -f mv-differential.md
	KWIRE_MV_DIFFERENTIAL=all KWIRE_MV_DIFFERENTIAL_TABLE=mv-differential.md $(PY) -m pytest -q -s \
		compat/test_metadata_versions.py
	KWIRE_STANDALONE_SPARK=1 $(PY) -m pytest -q tests/bench/test_bench_replicas.py
	KWIRE_SECURED_ALL=1 $(PY) -m pytest -q compat/test_secured_cluster.py
	KWIRE_COMPAT_FULL_MATRIX=1 $(PY) -m pytest -q compat/test_add_remove_controller.py \
		compat/test_replace_controller.py compat/test_differential_probe.py compat/test_reassign.py \
		compat/test_stock_controller_log.py compat/test_audit_stock_quorum.py compat/test_replica_audit_stock.py
	$(MAKE) --no-print-directory soak

## The fault soak (root): for SOAK_MINUTES, quorums of every configuration (kwire, stock and
## mixed, both releases, each also with three stock brokers under the controller workload)
## drawn from FAULT_SEED, five nemeses each, a client writing through them; prints a table per
## nemesis and configuration and fails on any lost or diverged write or failed round.
## `python -m compat.faults --help` for the knobs.
soak: install compat-jars
	$(PY) -m compat.faults --minutes $(SOAK_MINUTES) --seed $(FAULT_SEED)

## Every benchmark section, kwire beside its reference. BENCH_ARGS picks sections and flags, e.g.
## `make bench BENCH_ARGS="codec storage quorum --throughput"` adds the quorum's load curve.
## Each section that runs replaces its block of BENCHMARKS.md (dated, with the commit and the
## machine): measured figures live there, not in ARCHITECTURE.md's prose.
BENCH_ARGS ?=
bench: install compat-jars
	$(PY) -m tools.bench --record BENCHMARKS.md $(BENCH_ARGS)

clean:
	rm -rf $(VENV) compat/.cache .pytest_cache .mypy_cache .ruff_cache .hypothesis .import_linter_cache
	rm -f storage/_crecords.*.so
