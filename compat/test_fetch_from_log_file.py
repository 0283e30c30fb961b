"""A stock broker fetches a kwire leader's metadata log, sent from the log file by ``sendfile``.

A kwire leader answers a Fetch of 64 KiB or more with a region of its segment file
(``StorageRaftLog.read_records``, ``server.net.server.send_parts``) rather than bytes read into
memory. One kwire controller (a dynamic single-voter quorum) and two stock brokers of the newest
pinned release: the first broker registers and the stock topic tool creates a topic of
:data:`PARTITIONS` partitions on it, so that the log holds more than one region's worth; then
the second broker starts with an empty metadata log and fetches it all from offset 0, and must
register, be unfenced, and list the topic whole. Asserted afterwards, with every process
stopped: the controller wrote no snapshot (the broker fetched the log, not a snapshot); the log
the new broker fetched before it registered was at least :data:`REGION_MIN_BYTES` long; and the
new broker's metadata log is, batch for batch and byte for byte, a prefix of the controller's.
Cost: two broker JVMs and one kwire process, ~30 s.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from compat.clients import create_topic, partitions_of
from compat.harness import CLUSTER_ID, PARTITION, START_TIMEOUT_S, KafkaRelease, Quorum, free_port
from server.storage_raft_log import REGION_MIN_BYTES
from storage.records import iter_batches
from tools.stock_brokers import StockBrokers

pytestmark = [pytest.mark.compat, pytest.mark.slow]

PARTITIONS = 3000
"""The topic's partitions (replication factor 1): its PartitionRecords alone come to about twice
:data:`REGION_MIN_BYTES`."""
FIRST, SECOND = 101, 102
BROKER_START_TIMEOUT_S = 90.0
BOOTSTRAP_CHECKPOINT = "00000000000000000000-0000000000.checkpoint"
"""The bootstrap snapshot's file (KIP-853), which is no snapshot of the log."""


def _log_bytes(partition_dir: Path) -> bytes:
    """The metadata log's segments, joined in offset order."""
    return b"".join(path.read_bytes() for path in sorted(partition_dir.glob("*.log")))


def test_a_stock_broker_fetches_a_kwire_log_sent_from_the_file(newest_kafka: KafkaRelease, tmp_path: Path) -> None:
    quorum = Quorum(newest_kafka, tmp_path, {1}, dynamic=True, ids=(1,))
    brokers = StockBrokers.create(
        tmp_path / "brokers", newest_kafka.version, cluster_id=CLUSTER_ID,
        bootstrap_controllers=f"localhost:{quorum.ports[1]}", ports={FIRST: free_port(), SECOND: free_port()},
    )
    controller_dir = tmp_path / "data1" / PARTITION
    try:
        quorum.start(1)
        quorum.wait_leader(START_TIMEOUT_S)
        brokers.start([FIRST])
        brokers.wait_listed({FIRST}, BROKER_START_TIMEOUT_S)
        assert "Created topic wide." in create_topic(newest_kafka, brokers.bootstrap_servers_of([FIRST]), "wide",
                                                      PARTITIONS, 1)
        log_before = len(_log_bytes(controller_dir))
        started = time.monotonic()
        brokers.start([SECOND])
        brokers.wait_listed({FIRST, SECOND}, BROKER_START_TIMEOUT_S)
        print(f"broker {SECOND} fetched a {log_before}-byte log and was unfenced in {time.monotonic() - started:.1f} s")
        listed = partitions_of(brokers.bootstrap_servers_of([SECOND]), "wide")
        assert sorted(listed) == list(range(PARTITIONS)), f"{len(listed)} partitions listed"
    finally:
        brokers.stop()
        quorum.stop()
    snapshots = [p.name for p in controller_dir.glob("*.checkpoint") if p.name != BOOTSTRAP_CHECKPOINT]
    assert not snapshots, snapshots
    assert log_before >= 2 * REGION_MIN_BYTES, log_before
    leader_batches = [bytes(b.to_bytes()) for b in iter_batches(_log_bytes(controller_dir))]
    fetched = [bytes(b.to_bytes()) for b in iter_batches(_log_bytes(brokers.nodes[SECOND].data_dir / PARTITION))]
    assert sum(len(b) for b in fetched) >= log_before, (sum(len(b) for b in fetched), log_before)
    assert fetched == leader_batches[:len(fetched)], next(
        i for i, (a, b) in enumerate(zip(fetched, leader_batches, strict=False)) if a != b)
