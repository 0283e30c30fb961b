"""How the tests run stock Kafka, and how ``make test`` spreads them over parallel workers
(pytest-xdist, ``-n 2``).

* Every stock Kafka JVM of a test run (controllers, brokers, tools) compiles with C1 only
  (``KWIRE_KAFKA_JVM_FLAGS``, see tools/stock_kafka.py) and maps a class data sharing archive
  of its classpath (``KWIRE_KAFKA_CDS``), unless the variables are set already: they live for
  seconds, which never pays back C2's compilations, and a good part of a short run is class
  loading.
* Stock Kafka tools (``kafka-storage``, ``kafka-metadata-quorum``, ``kafka-dump-log``, ...) run
  one after another in a long-lived JVM per release and classpath in each worker
  (``KWIRE_KAFKA_TOOL_RUNNER``, see tools/stock_kafka.py and tools/tool_runner.py), unless the
  variable is set already: each run in a JVM of its own is about a CPU-second of start-up and
  class loading.

With ``-n`` (and only then):

* The modules of one entry of :data:`GROUPS` share a session's or a module's resource (a
  cluster, a JVM, the Spark session): their tests are one unit of work, run on one worker in
  collection order. Every other test is a unit of its own, handed to whichever worker is free
  (:class:`GroupScheduling`).
* ``slow``-marked tests (and the groups holding one), and the simulation seeds (items of 50
  seeds, each a few CPU-seconds to half a minute), come first, so that no worker starts a long
  test when the others are nearly done. (``make test`` runs the simulation seeds, marker
  ``simulation``, in a second pytest-xdist run beside this one, at idle CPU priority: see the
  Makefile.)
* Each worker picks free ports from its own slice of the port range
  (``tools.local_cluster.PORT_SLICE_ENV``), so two workers never choose the same port, not
  even one whose server is down between a kill and its restart.

The ``pki`` fixture, one test authority and its certificates per session, serves the TLS tests
under tests/ and compat/.

Hypothesis profiles: the default one runs each property test with the example count its module
asks for (a modest one, so that ``make test`` stays within its time); ``make nightly`` passes
``--hypothesis-profile=nightly``, which multiplies every count written as
``tests.properties.examples(n)`` by :data:`NIGHTLY_EXAMPLES_FACTOR` (and gives tests that name
no count that many times Hypothesis's 100).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings
from xdist.scheduler import LoadScopeScheduling

from tools.local_cluster import PORT_SLICE_ENV
from tools.stock_kafka import CDS_ENV, EXTRA_JVM_FLAGS_ENV, TOOL_RUNNER_ENV

ROOT = Path(__file__).resolve().parent
GROUPS = {
    # the run's one Spark session (tests/audit/session.py) and the kwire failover run that
    # tests/audit/conftest.py starts in the background
    "tests/audit/": "spark",
    "tests/bench/test_bench_audit.py": "spark",
    "compat/test_audit_stock_quorum.py": "spark",
    "compat/test_replica_audit_stock.py": "spark",
    # the module's one kwire quorum
    "compat/test_quorum_interop.py": "quorum-interop",
    # the session's codec oracles (compat/conftest.py java_oracles): one JVM per release
    "compat/test_java_byte_identity.py": "java-oracles",
}
"""Test paths (a module, or a directory ending in ``/``) -> the group whose tests run on one
worker."""
FIRST = (ROOT / "tests" / "raft" / "test_simulation.py",)
"""Modules handed out first as if their tests were ``slow``-marked."""
TEST_JVM_FLAGS = "-XX:TieredStopAtLevel=1"
NIGHTLY_EXAMPLES_FACTOR = 20
"""How many times more examples each property test runs under the ``nightly`` profile."""

settings.register_profile("nightly", max_examples=100 * NIGHTLY_EXAMPLES_FACTOR)


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A test authority's PEM file ``ca`` and key-and-certificate PEM files it signed:
    ``server`` (for localhost), ``admin``, ``alice``, ``expired``; and ``stranger``, signed by
    another authority (tools/pki.py). For the TLS tests under tests/ and compat/."""
    from tools.pki import make_pki

    return make_pki(tmp_path_factory.mktemp("pki"))


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault(EXTRA_JVM_FLAGS_ENV, TEST_JVM_FLAGS)
    os.environ.setdefault(CDS_ENV, "1")
    os.environ.setdefault(TOOL_RUNNER_ENV, "1")
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if worker.startswith("gw") and count:
        os.environ[PORT_SLICE_ENV] = f"{int(worker[2:])}/{int(count)}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    slow = [_slow(item) for item in items]
    slow_groups = {group_of(item.nodeid) for item, is_slow in zip(items, slow, strict=True) if is_slow}
    # a stable sort: slow tests and their groups first, each part in collection order (every
    # worker sorts alike, so the collections they report stay the same)
    items.sort(key=lambda item: not (_slow(item) or group_of(item.nodeid) in slow_groups))


def _slow(item: pytest.Item) -> bool:
    return item.get_closest_marker("slow") is not None or Path(str(item.fspath)).resolve() in FIRST


def group_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its group in :data:`GROUPS`, else the test itself."""
    path = nodeid.split("::", 1)[0]
    for prefix, group in GROUPS.items():
        if path == prefix or (prefix.endswith("/") and path.startswith(prefix)):
            return f"group:{group}"
    return nodeid


class GroupScheduling(LoadScopeScheduling):
    """pytest-xdist's load scheduling by scope, with :func:`group_of` as the scope: a group's
    tests go to one worker together, every other test alone; units are handed out in the order
    the workers collected them (slow first), not reordered by size."""

    def _split_scope(self, nodeid: str) -> str:
        return group_of(nodeid)


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> GroupScheduling:
    config.option.loadscopereorder = False
    return GroupScheduling(config, log)  # type: ignore[arg-type]
