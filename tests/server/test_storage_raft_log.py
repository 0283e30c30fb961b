"""A snapshot written in two halves (``StorageRaftLog.open_snapshot_writer`` on the log's
caller, the bytes and the freeze on another thread, ``snapshot_frozen`` back on the caller):
the log takes it, unless it meanwhile moved past the snapshot's offset."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    sizes=st.lists(st.integers(1, 4), min_size=1, max_size=12),
    rolls=st.sets(st.integers(1, 11)),
    start=st.integers(0, 60),
    max_bytes=st.integers(1, 2_000),
)
def test_reads_are_whole_batches_across_segments(
    tmp_path_factory: pytest.TempPathFactory, sizes: list[int], rolls: set[int], start: int, max_bytes: int
) -> None:
    """``read``: from the batch holding ``start``, whole batches in offset order across
    segments, at most ``max_bytes`` but at least one batch; nothing at or past the end."""
    with MetadataLog.open(tmp_path_factory.mktemp("log")) as log:
        raft_log = StorageRaftLog(log)
        batches = []
        for i, records in enumerate(sizes):
            if i in rolls:
                log.roll()
            batches.append(data_batch(log.log_end_offset, records=records))
            raft_log.append(batches[-1])
        ends = [sum(sizes[: i + 1]) for i in range(len(sizes))]
        expected = b""
        for batch, end in zip(batches, ends, strict=True):
            if end <= start:
                continue
            if expected and len(expected) + len(batch) > max_bytes:
                break
            expected += batch
        assert raft_log.read(start, max_bytes) == expected


def test_a_read_does_not_fetch_the_batch_that_would_pass_its_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Fetch answer of ``max_bytes`` is cut to whole batches; the next batch, which would pass
    the budget, is left on disk rather than read and dropped."""
    import storage.segment

    with MetadataLog.open(tmp_path / "log") as log:
        raft_log = StorageRaftLog(log)
        batches = []
        for _ in range(3):
            batches.append(data_batch(log.log_end_offset, records=20))
            raft_log.append(batches[-1])
        reads: list[int] = []
        pread = storage.segment.os.pread

        def counting(fd: int, length: int, offset: int) -> bytes:
            reads.append(length)
            return pread(fd, length, offset)

        monkeypatch.setattr(storage.segment.os, "pread", counting)
        budget = len(batches[0]) + len(batches[1]) // 2
        assert raft_log.read(0, budget) == batches[0]
        assert sum(reads) < budget + len(batches[1]) // 2, reads  # headers, and the one budget-sized read
        assert raft_log.read(0, len(batches[0]) + len(batches[1])) == batches[0] + batches[1]
