"""A stock broker fetches a kwire leader's metadata log, sent from the log file by ``sendfile``.

A kwire leader answers a Fetch of 64 KiB or more with a region of its segment file
(``StorageRaftLog.read_records``, ``server.net.server.send_parts``) rather than bytes read into
memory. One kwire controller (a dynamic single-voter quorum) writes a NoOpRecord batch about
every millisecond (``metadata.max.idle.interval.ms=1``, ``controller.quorum.append.linger.ms=0``)
until its log holds twice :data:`REGION_MIN_BYTES`; then a stock broker of the newest pinned
release starts with an empty metadata log, fetches it all from offset 0, and must register and
be unfenced (a broker is unfenced only once it has caught up with the metadata log). Asserted
afterwards, with both processes stopped: the controller wrote no snapshot (the broker fetched
the log, not a snapshot), and the broker's metadata log is, batch for batch and byte for byte,
a prefix of the controller's at least as long as the log was when the broker started.
Cost: one broker JVM and one kwire process, ~10 s.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from compat.harness import CLUSTER_ID, PARTITION, START_TIMEOUT_S, KafkaRelease, Quorum, free_port
from server.storage_raft_log import REGION_MIN_BYTES
from storage.batch_scan import iter_batches
from tools.stock_brokers import StockBrokers

pytestmark = [pytest.mark.compat, pytest.mark.slow]

BROKER = 101
BROKER_START_TIMEOUT_S = 90.0
LOG_BYTES = 2 * REGION_MIN_BYTES
"""The log the broker fetches is at least this long when it starts: the first answer is a region."""
GROWTH_TIMEOUT_S = 60.0
BOOTSTRAP_CHECKPOINT = "00000000000000000000-0000000000.checkpoint"
"""The bootstrap snapshot's file (KIP-853), which is no snapshot of the log."""


def _log_bytes(partition_dir: Path) -> bytes:
    """The metadata log's segments, joined in offset order."""
    return b"".join(path.read_bytes() for path in sorted(partition_dir.glob("*.log")))


def _batches(partition_dir: Path) -> list[bytes]:
    return [bytes(batch.to_bytes()) for batch in iter_batches(_log_bytes(partition_dir))]


def test_a_stock_broker_fetches_a_kwire_log_sent_from_the_file(newest_kafka: KafkaRelease, tmp_path: Path) -> None:
    quorum = Quorum(newest_kafka, tmp_path, {1}, dynamic=True, ids=(1,),
                    kwire_extra="metadata.max.idle.interval.ms=1\ncontroller.quorum.append.linger.ms=0\n")
    brokers = StockBrokers.create(
        tmp_path / "brokers", newest_kafka.version, cluster_id=CLUSTER_ID,
        bootstrap_controllers=f"localhost:{quorum.ports[1]}", ports={BROKER: free_port()},
    )
    controller_dir = tmp_path / "data1" / PARTITION
    try:
        quorum.start(1)
        quorum.wait_leader(START_TIMEOUT_S)
        deadline = time.monotonic() + GROWTH_TIMEOUT_S
        while (log_before := len(_log_bytes(controller_dir))) < LOG_BYTES:
            assert time.monotonic() < deadline, f"the controller's log reached only {log_before} bytes"
            time.sleep(0.2)  # poll interval
        started = time.monotonic()
        brokers.start([BROKER])
        brokers.wait_listed({BROKER}, BROKER_START_TIMEOUT_S)
        print(f"the broker fetched a log of {log_before} bytes or more and was unfenced in "
              f"{time.monotonic() - started:.1f} s")
    finally:
        brokers.stop()
        quorum.stop()
    snapshots = [p.name for p in controller_dir.glob("*.checkpoint") if p.name != BOOTSTRAP_CHECKPOINT]
    assert not snapshots, snapshots
    leader = _batches(controller_dir)
    fetched = _batches(brokers.nodes[BROKER].data_dir / PARTITION)
    assert sum(len(b) for b in fetched) >= log_before, (sum(len(b) for b in fetched), log_before)
    mismatch = next((i for i, (a, b) in enumerate(zip(fetched, leader, strict=False)) if a != b), None)
    assert mismatch is None and len(fetched) <= len(leader), (mismatch, len(fetched), len(leader))
