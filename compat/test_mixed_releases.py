"""Brokers of three releases in one cluster on kwire (``make test``'s cover of the release matrix,
whose whole run is ``make nightly``'s ``compat/test_release_matrix.py``).

Three kwire controllers (static voters) formatted with ``--release-version 3.6-IV2``, the newest
metadata.version a 3.6 broker supports, and one stock broker each of 3.6.2, 3.9.2 and 4.4.0: the
oldest line's level is the one a rolling upgrade starts from. Asserted: every broker registers
(BrokerRegistration v1 from 3.6, v4 from 3.9, the newest from 4.4, each with its own feature
ranges) and is unfenced, each listing all three; the finalized metadata.version the brokers
see (ApiVersions' finalized features) is 3.6-IV2; a topic of 3 partitions with replication
factor 3 is created, every partition led and in sync on all three; 300 records written by an
idempotent acks=all producer (kafka-python) are read back, each once.

Then the upgrade, with the brokers live: the 3.6.2 broker is restarted on 4.4.0 (SIGTERM, a
controlled shutdown, the same data directory) and must be back in every ISR; stock
``kafka-features upgrade --release-version 3.9-IV0`` (4.4's tool, through a broker) moves the
finalized metadata.version to 3.9-IV0, the newest the 3.9.2 broker supports, and every broker
must report it; a topic created after the bump (its PartitionRecords now at the version 3.9-IV0
gates, with directories) takes 300 more records; both topics are read back, each record once.
The whole upgrade under load, to 4.4's level, is ``make nightly``'s
``compat/test_rolling_upgrade.py``.

3.6.2's jars are fetched on demand (``compat/fetch-kafka.sh 3.6.2``) when ``make compat-jars``
has not fetched them. Cost: four broker JVM starts, one tool JVM and three kwire processes;
one run took 23 CPU-s (user and system time, the JVMs included) and 44 s.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from compat.harness import KafkaRelease, wait_until
from compat.release_cluster import BROKER_START_TIMEOUT_S, ReleaseCluster, consumed_exactly, produce

pytestmark = [pytest.mark.compat, pytest.mark.slow]

METADATA_VERSION = "3.6-IV2"
METADATA_VERSION_LEVEL = 14
BROKERS = {101: "3.6.2", 102: "3.9.2", 103: "4.4.0"}
RECORDS = 300
UPGRADED_BROKER, UPGRADED_TO = 101, "4.4.0"
UPGRADE_RELEASE, UPGRADE_LEVEL = "3.9-IV0", 21


def test_brokers_of_three_releases_in_one_cluster(tmp_path: Path) -> None:
    with ReleaseCluster(tmp_path, METADATA_VERSION, BROKERS) as cluster:
        cluster.start()
        cluster.wait_listed(set(BROKERS), BROKER_START_TIMEOUT_S)
        for broker_id in BROKERS:
            host, _, port = cluster.broker_address(broker_id).rpartition(":")
            finalized = trio.run(_finalized_metadata_version, host, int(port))
            assert finalized == METADATA_VERSION_LEVEL, (broker_id, finalized)
        _create(cluster.bootstrap)
        parts = cluster.wait_in_sync("mixed", set(BROKERS), 3)
        assert {replicas[0] for _, replicas, _ in parts.values()} == set(BROKERS), parts
        produce(cluster.bootstrap, "mixed", RECORDS)
        consumed_exactly(cluster.bootstrap, "mixed", RECORDS)

        cluster.restart_on(UPGRADED_BROKER, UPGRADED_TO)
        cluster.wait_listed(set(BROKERS), BROKER_START_TIMEOUT_S)
        cluster.wait_in_sync("mixed", set(BROKERS), 3)
        tools = KafkaRelease(UPGRADED_TO)
        done = tools.run_tool("features", ["--bootstrap-server", cluster.broker_address(UPGRADED_BROKER),
                                           "upgrade", "--release-version", UPGRADE_RELEASE], check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        wait_until(f"every broker reports metadata.version {UPGRADE_LEVEL} finalized",
                   lambda: {b: trio.run(_finalized_metadata_version, *_host_port(cluster.broker_address(b)))
                            for b in BROKERS},
                   60.0, ok=lambda seen: set(seen.values()) == {UPGRADE_LEVEL}, interval_s=0.5)
        _create(cluster.bootstrap, "upgraded")
        cluster.wait_in_sync("upgraded", set(BROKERS), 3)
        produce(cluster.bootstrap, "upgraded", RECORDS)
        consumed_exactly(cluster.bootstrap, "upgraded", RECORDS)
        consumed_exactly(cluster.bootstrap, "mixed", RECORDS)


def _host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


def _create(bootstrap: str, topic: str = "mixed") -> None:
    """Create ``topic`` (3 partitions, replication factor 3) with kafka-python's admin."""
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kwire-mixed", request_timeout_ms=30_000)
    try:
        admin.create_topics([NewTopic(topic, 3, 3)], timeout_ms=30_000)
    finally:
        admin.close()


async def _finalized_metadata_version(host: str, port: int) -> int:
    """The ``metadata.version`` level a broker reports as finalized in its ApiVersions answer
    (KIP-584's finalized features), -1 when it reports none."""
    from server.net.client import open_connection

    with trio.fail_after(10):
        async with await open_connection(host, port, "kwire-mixed", request_timeout_ms=10_000) as conn:
            answer = conn.api_versions_response  # the connection's own ApiVersions exchange
    assert answer is not None
    return next((f.max_version_level for f in answer.finalized_features if f.name == "metadata.version"), -1)
