"""The release matrix (``make nightly``, ``KWIRE_RELEASE_MATRIX=all``): for each release of
``kafka.releases`` (compat/kafka-versions.properties), three of its stock brokers on three kwire
controllers (static voters) formatted with ``--release-version`` at the release's newest
metadata.version, and these checks, in order:

* ``registers``: every broker registers (BrokerRegistration at the release's version) and is
  unfenced: each lists all three in its Metadata response;
* ``topic``: the release's ``kafka-topics --create`` makes a topic of 3 partitions, replication
  factor 3, every partition led and all three replicas in sync;
* ``produce/consume``: the release's console producer (idempotent, acks=all; every release since
  3.3 has idempotence on by default in KRaft) writes 500 records and its console consumer reads
  exactly those back;
* ``controller kill``: kill -9 of the active kwire controller, another elected; then a second
  topic created with the release's tool takes 300 records (kafka-python, idempotent, acks=all);
  the killed controller restarts;
* ``broker kill``: kill -9 of a broker; the others stop listing it and it leaves every ISR; it is
  restarted and back in every ISR; all 800 records are read back, each once;
* ``quorum via broker``: the release's ``kafka-metadata-quorum --bootstrap-server <broker>
  describe --status`` (DescribeQuorum forwarded in an Envelope, KIP-590) names kwire's leader;
* ``quorum via controller``: the same with ``--bootstrap-controller`` (KIP-919), from 3.7; n/a
  before (those tools cannot talk to controllers).

Each release's checks stop at the first failure; the release x check table is printed (run with
``-s``) and written to ``$KWIRE_RELEASE_MATRIX_TABLE`` when set. The releases are fetched on
demand. Not collected unless ``KWIRE_RELEASE_MATRIX`` names releases (compat/conftest.py):
``make test`` runs the mixed-release cover (compat/test_mixed_releases.py) instead.
Cost: about 90-150 s and 150-250 CPU-s per release on a 2-core machine.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat.clients import records, stock_round_trip
from compat.harness import ELECTION_BOUND_S, KafkaRelease
from compat.kafka import KafkaCommandError, matrix_releases, release_facts
from compat.release_cluster import (
    BROKER_START_TIMEOUT_S,
    Checks,
    ReleaseCluster,
    consumed_exactly,
    facts_line,
    produce,
    table,
)

pytestmark = [pytest.mark.compat, pytest.mark.slow]

BROKER_IDS = (101, 102, 103)
COLUMNS = ("registers", "topic", "produce/consume", "controller kill", "broker kill", "quorum via broker",
           "quorum via controller")
FIRST, SECOND = 500, 300
TABLE_ENV = "KWIRE_RELEASE_MATRIX_TABLE"
CONTROLLERS_ENV = "KWIRE_RELEASE_MATRIX_CONTROLLERS"
"""``stock``: the same checks on the release's own controllers, the control for a failed cell."""

_ROWS: list[Checks] = []


@pytest.fixture(scope="module", autouse=True)
def matrix_table() -> Iterator[None]:
    """Print (and write to ``$KWIRE_RELEASE_MATRIX_TABLE``) the table once every release ran."""
    yield
    text = table(sorted(_ROWS, key=lambda r: tuple(map(int, r.release.split(".")))), COLUMNS)
    print("\n" + text)
    if os.environ.get(TABLE_ENV):
        Path(os.environ[TABLE_ENV]).write_text(text + "\n", encoding="utf-8")


@pytest.mark.parametrize("release", matrix_releases(), ids=lambda v: f"kafka-{v}")
def test_release_on_kwire(release: str, tmp_path: Path) -> None:
    facts = release_facts(release)
    print(facts_line(release))
    kafka = KafkaRelease(release)
    checks = Checks(release)
    _ROWS.append(checks)
    kwire = os.environ.get(CONTROLLERS_ENV, "kwire") != "stock"
    with ReleaseCluster(tmp_path, facts.metadata_version, dict.fromkeys(BROKER_IDS, release),
                        kwire_controllers=kwire) as cluster:
        cluster.start()

        def registers() -> str:
            cluster.wait_listed(set(BROKER_IDS), BROKER_START_TIMEOUT_S)
            return f"brokers {sorted(BROKER_IDS)} unfenced"

        def topic() -> str:
            parts = cluster.create_topic(kafka, "first")
            return f"first: {parts}"

        def round_trip() -> str:
            back = stock_round_trip(kafka, cluster.bootstrap, "first", FIRST)
            expected = set(records("first", FIRST))
            assert set(back) == expected and all(n == 1 for n in back.values()), (
                f"{len(expected - set(back))} missing, {sum(n > 1 for n in back.values())} duplicated")
            return f"{FIRST} records written by the stock console producer and read back once each"

        def controller_kill() -> str:
            done = cluster.kill_active_controller()
            cluster.create_topic(kafka, "second")
            produce(cluster.bootstrap, "second", SECOND)
            return done + f"; second topic created and {SECOND} records acknowledged"

        def broker_kill() -> str:
            done = cluster.kill_broker_and_return(BROKER_IDS[-1], {"first": 3, "second": 3})
            consumed_exactly(cluster.bootstrap, "first", FIRST)
            consumed_exactly(cluster.bootstrap, "second", SECOND)
            return done + f"; all {FIRST + SECOND} records read back once each"

        def quorum(through_controller: bool) -> str:
            leader, epoch, _ = cluster.quorum.wait_leader(ELECTION_BOUND_S)
            try:
                status = cluster.quorum_status(kafka, through_controller=through_controller)
            except KafkaCommandError as exc:
                diagnosis = cluster.quorum_status_diagnosis(kafka, through_controller=through_controller)
                raise AssertionError(f"{exc}\nDiagnosis: {diagnosis}") from None
            assert (status.get("LeaderId"), status.get("LeaderEpoch")) == (str(leader), str(epoch)), status
            return f"LeaderId {leader}, LeaderEpoch {epoch}"

        checks.run("registers", registers)
        checks.run("topic", topic)
        checks.run("produce/consume", round_trip)
        checks.run("controller kill", controller_kill)
        checks.run("broker kill", broker_kill)
        checks.run("quorum via broker", lambda: quorum(False))
        if facts.bootstrap_controller:
            checks.run("quorum via controller", lambda: quorum(True), even_after="quorum via broker")
        else:
            checks.not_applicable("quorum via controller", f"{release}'s tools have no --bootstrap-controller (KIP-919, 3.7)")
        for name, outcome in checks.outcomes.items():
            print(f"{release} {name}: {outcome.status} ({outcome.seconds:.1f} s) {outcome.detail}")
        if checks.failed is not None:
            print(cluster.report())
    assert checks.failed is None, table([checks], COLUMNS)
