"""A node whose follower is behind the leader's log start installs the leader's snapshot
(FetchSnapshot, KIP-630) and rebuilds what the node keeps from committed records, the
finalized features, from the snapshot: ApiVersions v3 on the follower then reports the
snapshot's metadata.version, which no record in its own log carries.

Node 1's directory is prepared as a controller that ran before: a log of ten batches in epoch
1 whose first ten offsets were taken into a snapshot (with a FeatureLevelRecord) and then
deleted, so its log starts at offset 10. Node 2 has an empty log and knows of epoch 1 from its
quorum-state (a voter that took part in epoch 1 and lost its log). Both start unattached in
epoch 1; with two static voters only node 1, whose log is ahead, can win, and node 2, fetching
from offset 0, is sent to the snapshot.
"""

from __future__ import annotations

import random
from pathlib import Path

import trio

from kwire.topics import METADATA_PARTITION_DIR
from messages.generated.api_versions_request import ApiVersionsRequest
from messages.generated.feature_level_record import FeatureLevelRecord
from messages.generated.no_op_record import NoOpRecord
from messages.metadata import encode_record
from server.net.client import open_connection
from server.node import Node
from server.raft.control import build_data_batch
from server.raft.roles import Follower, Leader
from storage.format import format_directories
from storage.log import MetadataLog
from storage.quorum_state import FileQuorumStateStore, StoredElectionState
from storage.snapshots import SnapshotId, build_snapshot_batches
from tests.server.test_node import _config, _free_port, _inline, _until

METADATA_VERSION_LEVEL = 21  # 3.9-IV0: a level the bootstrap of this format does not write


def _ran_before(data: Path) -> None:
    """Ten committed batches of epoch 1, snapshotted at offset 10, segments deleted."""
    _knows_epoch_1(data)
    with MetadataLog.open(data) as log:
        for offset in range(10):
            batch = build_data_batch([encode_record(NoOpRecord(), 0)], base_offset=offset, epoch=1, timestamp_ms=0)
            log.append_as_leader(batch, 1)
        log.flush()
        snapshot_id = SnapshotId(10, 1)
        writer = log.create_snapshot_writer(snapshot_id)
        assert writer is not None
        feature = encode_record(FeatureLevelRecord(name="metadata.version", feature_level=METADATA_VERSION_LEVEL), 0)
        for data_batch in build_snapshot_batches(
            snapshot_id, last_contained_log_timestamp=0, records=[feature], append_time_ms=0
        ):
            writer.append(data_batch)
        writer.freeze()
        log.on_snapshot_frozen(snapshot_id)
        log.delete_before_snapshot(snapshot_id)
        assert log.log_start_offset == 10


def _knows_epoch_1(data: Path) -> None:
    """quorum-state: epoch 1, no leader known, no vote cast."""
    partition_dir = data / METADATA_PARTITION_DIR
    partition_dir.mkdir(exist_ok=True)
    store = FileQuorumStateStore.in_partition_dir(partition_dir)
    store.write_election_state(StoredElectionState(epoch=1), kraft_version=0)


async def test_follower_behind_the_log_start_loads_the_snapshot_and_its_features(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    ports = {1: _free_port(), 2: _free_port()}
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in ports.items())
    nodes: dict[int, Node] = {}
    for i, port in ports.items():
        data = tmp_path / f"node{i}"
        format_directories(
            cluster_id="kwire-test-cluster-0002",
            node_id=i,
            directories=[str(data)],
            metadata_log_dir=str(data),
            controller_listener_name="CONTROLLER",
            out=lambda line: None,
        )
        if i == 1:
            _ran_before(data)
        else:
            _knows_epoch_1(data)
        nodes[i] = Node(_config(data, i, port, voters), rng=random.Random(i), run_blocking=_inline)

    async with trio.open_nursery() as nursery:
        for node in nodes.values():
            await nursery.start(node.run)
        leader, follower = nodes[1], nodes[2]
        await _until(lambda: leader.core is not None and isinstance(leader.core.state, Leader))
        await _until(
            lambda: follower.core is not None
            and isinstance(follower.core.state, Follower)
            and follower.core.high_watermark > 10
        )
        assert follower.core is not None
        assert follower.core.log.log_start_offset == 10  # the snapshot replaced its log

        connection = await open_connection("127.0.0.1", ports[2])
        try:
            response = await connection.request(
                ApiVersionsRequest(client_software_name="kwire-test", client_software_version="1"),
                version=3,
            )
        finally:
            await connection.aclose()
        finalized = {f.name: f.max_version_level for f in response.finalized_features}
        assert finalized.get("metadata.version") == METADATA_VERSION_LEVEL
        for node in nodes.values():
            node.stop()
