"""A snapshot written in two halves (``StorageRaftLog.open_snapshot_writer`` on the log's
caller, the bytes and the freeze on another thread, ``snapshot_frozen`` back on the caller):
the log takes it, unless it meanwhile moved past the snapshot's offset."""

from __future__ import annotations

from pathlib import Path

from server.raft.types import OffsetAndEpoch
from server.storage_raft_log import StorageRaftLog
from storage.log import MetadataLog
from storage.snapshot_format import SnapshotId, build_snapshot_batches
from tests.storage.helpers import data_batch


def _snapshot(offset: int) -> tuple[OffsetAndEpoch, bytes]:
    sid = SnapshotId(offset, 0)
    data = b"".join(build_snapshot_batches(sid, last_contained_log_timestamp=0, records=[b"x"], append_time_ms=0))
    return OffsetAndEpoch(offset, 0), data


def test_a_snapshot_written_beside_the_log_joins_it_once_frozen(tmp_path: Path) -> None:
    with MetadataLog.open(tmp_path) as log:
        raft_log = StorageRaftLog(log)
        raft_log.append(data_batch(0))
        raft_log.flush()
        raft_log.update_high_watermark(3)
        snapshot_id, data = _snapshot(3)
        writer = raft_log.open_snapshot_writer(snapshot_id)
        assert writer is not None and raft_log.latest_snapshot_id() is None  # not yet the log's
        with writer:
            writer.append(data)
            writer.freeze()
        assert raft_log.snapshot_frozen(snapshot_id)
        assert raft_log.latest_snapshot_id() == snapshot_id
        assert raft_log.open_snapshot_writer(snapshot_id) is None  # there already


def test_a_snapshot_the_log_moved_past_meanwhile_is_deleted(tmp_path: Path) -> None:
    with MetadataLog.open(tmp_path) as log:
        raft_log = StorageRaftLog(log)
        older, data = _snapshot(2)
        writer = raft_log.open_snapshot_writer(older)
        assert writer is not None
        with writer:
            writer.append(data)
            frozen_path = writer.freeze()
        newer, newer_data = _snapshot(9)
        raft_log.install_snapshot(newer, newer_data)  # a snapshot from the leader replaced the log
        assert not raft_log.snapshot_frozen(older)
        assert not frozen_path.exists() and raft_log.latest_snapshot_id() == newer
