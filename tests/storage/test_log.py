"""The segmented metadata log: layout, appends, reads, rolls, truncation, flushing, failures."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from kwire.uuid import Uuid
from storage import segment as segment_module
from storage.batch_scan import iter_batches
from storage.control import build_control_batch
from storage.errors import (
    CorruptRecordError,
    InconsistentStateError,
    KafkaStorageError,
    LogDirectoryLockedError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    StorageError,
    UnexpectedAppendOffsetError,
)
from storage.fileio import FileRegion
from storage.index import read_offset_index, read_time_index
from storage.log import MetadataLog
from storage.segment import LogConfig
from tests.storage.helpers import SMALL, all_batches, data_batch, fill

PARTITION = "__cluster_metadata-0"


def test_fresh_directory_layout(tmp_path: Path, fsyncs: list[int]) -> None:
    log = MetadataLog.open(tmp_path)
    part = tmp_path / PARTITION
    assert (tmp_path / ".lock").exists()
    assert (part / "partition.metadata").read_bytes() == b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ"
    assert (part / "leader-epoch-checkpoint").read_bytes() == b""
    assert os.path.getsize(part / "00000000000000000000.log") == 0
    assert os.path.getsize(part / "00000000000000000000.index") == 10485760
    assert os.path.getsize(part / "00000000000000000000.timeindex") == 10485756
    assert (log.log_start_offset, log.log_end_offset, log.flushed_offset) == (0, 0, 0)
    log.close()
    assert not (tmp_path / ".lock").exists()  # removed on release, as Kafka's FileLock.destroy
    # trimmed to their (zero) entries on close; no producer snapshot for an empty log
    assert sorted(os.listdir(part)) == [
        "00000000000000000000.index",
        "00000000000000000000.log",
        "00000000000000000000.timeindex",
        "leader-epoch-checkpoint",
        "partition.metadata",
    ]
    assert os.path.getsize(part / "00000000000000000000.index") == 0
    assert os.path.getsize(part / "00000000000000000000.timeindex") == 0


def test_index_entries_follow_the_interval_rule(tmp_path: Path, fsyncs: list[int]) -> None:
    log = MetadataLog.open(tmp_path)
    batches = fill(log, 60, value_size=100)  # 3 records of 100 bytes: 397-byte batches
    size = len(batches[0])
    log.close()
    part = tmp_path / PARTITION
    entries = read_offset_index((part / "00000000000000000000.index").read_bytes(), 0)
    # Recompute LogSegment.append's rule independently: an entry for the set being appended
    # when more than 4096 bytes went in since the previous entry.
    expected, since = [], 0
    for i, raw in enumerate(batches):
        if since > 4096:
            expected.append((3 * i + 2, i * size))
            since = 0
        since += len(raw)
    assert entries == expected and len(entries) >= 4
    times = read_time_index((part / "00000000000000000000.timeindex").read_bytes(), 0)
    # one entry per offset-index entry (timestamps grow) plus the final one written on close
    assert [t[1] for t in times] == [o for o, _ in expected] + [179]
    assert times[-1] == (1000 + 177, 179)


def test_append_validation(tmp_path: Path, fsyncs: list[int]) -> None:
    log = MetadataLog.open(tmp_path)
    fill(log, 2)
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(data_batch(7))
    bad = bytearray(data_batch(6))
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append_as_follower(bad)
    with pytest.raises(ValueError):
        log.append_as_leader(data_batch(6, epoch=2), epoch=3)
    with pytest.raises(ValueError):
        log.append_as_follower(b"")
    with pytest.raises(RecordTooLargeError):
        log.append_as_follower(data_batch(6, records=1, value_size=8 * 1024 * 1024))
    assert log.log_end_offset == 6
    info = log.append_as_leader(data_batch(6, epoch=2) + data_batch(9, epoch=2), epoch=2)
    assert (info.first_offset, info.last_offset, info.batches) == (6, 11, 2)
    # a trailing partial batch (as a Fetch response may carry) is ignored
    info = log.append_as_follower(data_batch(12) + data_batch(15)[:40])
    assert (info.first_offset, info.last_offset) == (12, 14)
    log.close()


def test_read_returns_whole_batches(tmp_path: Path, fsyncs: list[int]) -> None:
    log = MetadataLog.open(tmp_path)
    batches = fill(log, 10)
    size = len(batches[0])
    assert log.read(0, size * 3).records == b"".join(batches[:3])
    assert log.read(0, size * 3 - 1).records == b"".join(batches[:2])
    assert log.read(0, 1).records == batches[0]  # at least one batch
    assert log.read(4, 10_000).records[:size] == batches[1]  # the batch holding offset 4
    info = log.read(4, 1)
    assert (info.segment_base_offset, info.position) == (0, size)
    assert log.read(30, 100).records == b""  # the log end offset
    with pytest.raises(OffsetOutOfRangeError):
        log.read(31, 100)
    # committed reads stop before the batch holding max_offset
    assert log.read(0, 10_000, max_offset=6).records == b"".join(batches[:2])
    assert log.read(0, 10_000, max_offset=8).records == b"".join(batches[:2])
    assert log.read(0, 10_000, max_offset=9).records == b"".join(batches[:3])
    assert log.read(0, 10_000, max_offset=2).records == b""
    log.close()


def test_read_region_cuts_as_read_does_without_reading_the_data(tmp_path: Path, fsyncs: list[int]) -> None:
    """MetadataLog.read_region finds the whole batches read() returns (from the offset index's
    batch positions and the headers past the last one that fits), in one segment: a region of
    the segment's file at or above min_region_bytes, bytes below it. The region keeps its own
    descriptor, so it reads what it was cut from after the log is closed; a truncation under
    it is refused, not sent."""
    log = MetadataLog.open(tmp_path)
    # uneven batches, some larger than the 4096-byte index interval, so that both the index
    # and the header walk place the cut
    written = []
    for i in range(60):
        written += fill(log, 1, records=1 + (i * 7) % 11, value_size=40 + (i * 131) % 900)
    sizes = [len(b) for b in written]
    starts = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    assert len(log.segments) == 1 and log.segments[0].offset_index.entries >= 3
    checked = 0
    for first in range(0, 60, 7):
        offset = iter_batches_offset(written[first])
        for max_bytes in (1, 500, 4096, 5000, 9999, 20_000, 10**6):
            expected = log.read(offset, max_bytes).records
            region = log.read_region(offset, max_bytes, min_region_bytes=0)
            assert isinstance(region, FileRegion)
            assert (region.position, len(region)) == (starts[first], len(expected))
            assert bytes(region) == expected and expected
            region.close()
            small = log.read_region(offset, max_bytes, min_region_bytes=len(expected) + 1)
            assert small == expected and isinstance(small, bytes)
            checked += 1
    assert checked == 63
    assert log.read_region(log.log_end_offset, 100) == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read_region(log.log_end_offset + 1, 100)
    kept = log.read_region(0, 10**6)
    cut = log.read_region(0, 10**6)
    assert isinstance(kept, FileRegion) and isinstance(cut, FileRegion)
    log.close()
    assert bytes(kept) == b"".join(written)
    os.truncate(tmp_path / PARTITION / "00000000000000000000.log", starts[30])
    with pytest.raises(KafkaStorageError, match="truncated"):
        cut.check_intact()
    with pytest.raises(KafkaStorageError):
        bytes(cut)
    for region in (kept, cut):
        fd = region.fd
        region.close()
        region.close()
        assert region.fd == -1
        with pytest.raises(OSError):
            os.fstat(fd)


def test_read_region_stops_at_its_segments_end(tmp_path: Path, fsyncs: list[int]) -> None:
    """A region is one segment's batches, as read()'s are (Kafka's LogSegment.read answers a
    fetch so), however large max_bytes; the next read starts in the next segment."""
    log = MetadataLog.open(tmp_path, config=SMALL)
    written = fill(log, 100)
    first, second = log.segments[0], log.segments[1]
    region = log.read_region(0, 10**6)
    assert isinstance(region, FileRegion) and len(region) == first.size
    assert bytes(region) == log.read(0, 10**6).records
    region.close()
    region = log.read_region(first.next_offset, 10**6)
    assert isinstance(region, FileRegion) and str(region.path).endswith(f"{second.base_offset:020d}.log")
    assert bytes(region) == log.read(first.next_offset, second.size).records
    region.close()
    assert written
    log.close()


def iter_batches_offset(raw: bytes) -> int:
    return next(iter_batches(raw)).base_offset


def test_roll_reopen_and_reads_across_segments(tmp_path: Path, fsyncs: list[int]) -> None:
    log = MetadataLog.open(tmp_path, config=SMALL)
    written = fill(log, 100)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) == 3 and bases[0] == 0
    # a read at a segment's end continues in the next segment
    first = log.segments[0]
    assert log.read(first.next_offset, 1).segment_base_offset == bases[1]
    assert all_batches(log) == written
    part = tmp_path / PARTITION
    # a producer snapshot at each rolled segment's base offset
    assert {f"{b:020d}.snapshot" for b in bases[1:]} <= set(os.listdir(part))
    # inactive segments' indexes are trimmed, the active one is pre-sized
    assert os.path.getsize(part / f"{bases[0]:020d}.index") < 100
    assert os.path.getsize(part / f"{bases[-1]:020d}.index") == 10485760
    log.close()
    assert f"{300:020d}.snapshot" in os.listdir(part)
    log = MetadataLog.open(tmp_path, config=SMALL)
    assert [s.base_offset for s in log.segments] == bases
    assert log.log_end_offset == 300 and all_batches(log) == written
    assert log.open_report.truncated_bytes == 0 and log.open_report.error is None
    log.close()


def test_leader_epochs_and_checkpoint_file(tmp_path: Path, fsyncs: list[int]) -> None:
    log = MetadataLog.open(tmp_path)
    fill(log, 2, epoch=1)
    log.initialize_leader_epoch(3)
    fill(log, 2, epoch=3)
    fill(log, 1, epoch=5)
    part = tmp_path / PARTITION
    assert (part / "leader-epoch-checkpoint").read_text() == "0\n3\n1 0\n3 6\n5 12\n"
    assert log.end_offset_for_epoch(1) == (6, 1)
    assert log.end_offset_for_epoch(2) == (6, 1)
    assert log.end_offset_for_epoch(3) == (12, 3)
    assert log.end_offset_for_epoch(5) == (15, 5)
    assert log.last_fetched_epoch() == 5
    log.truncate_to(10)  # the batch [9, 11] goes whole
    assert log.log_end_offset == 9
    assert (part / "leader-epoch-checkpoint").read_text() == "0\n2\n1 0\n3 6\n"
    log.close()


def test_truncation_and_log_start(tmp_path: Path, fsyncs: list[int]) -> None:
    log = MetadataLog.open(tmp_path, config=SMALL)
    written = fill(log, 100)
    bases = [s.base_offset for s in log.segments]
    assert not log.truncate_to(400)
    assert log.truncate_to(bases[2] + 4)
    assert [s.base_offset for s in log.segments] == bases[:3]
    assert log.log_end_offset == bases[2] + 3
    assert all_batches(log) == written[: (bases[2] + 3) // 3]
    part = tmp_path / PARTITION
    assert not any(f.endswith(".snapshot") and int(f[:20]) > log.log_end_offset for f in os.listdir(part))
    assert log.maybe_increment_log_start_offset(bases[1] + 1)
    assert [s.base_offset for s in log.segments] == bases[1:3]  # the segment holding the start stays
    assert log.log_start_offset == bases[1] + 1
    with pytest.raises(OffsetOutOfRangeError):
        log.read(bases[1], 100)
    assert log.leader_epoch_cache.entries[0].start_offset == bases[1] + 1
    log.truncate_fully_and_start_at(1000)
    assert (log.log_start_offset, log.log_end_offset) == (1000, 1000)
    assert [s.base_offset for s in log.segments] == [1000]
    assert log.leader_epoch_cache.entries == []
    log.append_as_follower(data_batch(1000))
    assert log.log_end_offset == 1003
    log.close()


def test_flush_tracks_the_durable_prefix(tmp_path: Path, fsyncs: list[int]) -> None:
    log = MetadataLog.open(tmp_path, config=SMALL)
    fill(log, 5)
    assert log.flushed_offset == 0
    fsyncs.clear()
    assert log.flush(6) == 15  # the segment was fsynced whole
    assert fsyncs == [log.segments[0].fd]  # only the .log: indexes are rebuilt on every open
    fsyncs.clear()
    assert log.flush() == 15 and fsyncs == []
    fill(log, 60)
    assert log.flush() == log.log_end_offset == log.flushed_offset
    log.truncate_to(30)
    assert log.flushed_offset == 30
    log.close()


def test_failed_fsync_stops_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fsyncs: list[int]) -> None:
    log = MetadataLog.open(tmp_path)
    fill(log, 2)

    def eio(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr("storage.fileio._fsync", eio)
    with pytest.raises(KafkaStorageError):
        log.flush()
    assert log.failed and log.flushed_offset == 0
    monkeypatch.setattr("storage.fileio._fsync", fsyncs.append)
    with pytest.raises(KafkaStorageError):  # no retry can prove the data durable
        log.flush()
    with pytest.raises(KafkaStorageError):
        log.append_as_follower(data_batch(6))
    log.close()
    assert not (tmp_path / PARTITION / "00000000000000000006.snapshot").exists()


def test_failed_write_stops_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fsyncs: list[int]) -> None:
    log = MetadataLog.open(tmp_path)
    fill(log, 2)

    def enospc(fd: int, data: object, position: int | None = None) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(segment_module, "write_all", enospc)
    with pytest.raises(KafkaStorageError):
        log.append_as_follower(data_batch(6))
    assert log.log_end_offset == 6 and log.failed
    with pytest.raises(KafkaStorageError):
        log.read(0, 100)
    log.close()


def test_lock_and_topic_id(tmp_path: Path, fsyncs: list[int]) -> None:
    log = MetadataLog.open(tmp_path)
    with pytest.raises(LogDirectoryLockedError):
        MetadataLog.open(tmp_path)
    log.close()
    with pytest.raises(StorageError):
        log.read(0, 1)
    MetadataLog.open(tmp_path).close()
    with pytest.raises(InconsistentStateError):
        MetadataLog.open(tmp_path, topic_id=Uuid.from_longs(0, 7))
    MetadataLog.open(tmp_path).close()  # the failed open released the lock


def test_control_batches_and_bytes_served_unchanged(tmp_path: Path, fsyncs: list[int]) -> None:
    from messages.generated.leader_change_message import LeaderChangeMessage, Voter

    log = MetadataLog.open(tmp_path)
    log.initialize_leader_epoch(1)
    leader_change = build_control_batch(
        [LeaderChangeMessage(leader_id=1, voters=[Voter(1)], granting_voters=[Voter(1)])],
        base_offset=0, partition_leader_epoch=1, append_time_ms=5,
    )
    log.append_as_leader(leader_change, epoch=1)
    log.append_as_leader(data_batch(1, epoch=1), epoch=1)
    served = log.read(0, 1 << 20).records
    assert served == leader_change + data_batch(1, epoch=1)
    assert [b.is_control for b in iter_batches(served)] == [True, False]
    log.close()
    segment = (tmp_path / PARTITION / "00000000000000000000.log").read_bytes()
    assert segment == served


def test_config_segment_roll_by_time(tmp_path: Path, fsyncs: list[int]) -> None:
    log = MetadataLog.open(tmp_path, config=LogConfig(segment_ms=1000))
    log.append_as_follower(data_batch(0, ts=10_000))
    log.append_as_follower(data_batch(3, ts=10_900))
    assert len(log.segments) == 1
    log.append_as_follower(data_batch(6, ts=11_001))
    assert [s.base_offset for s in log.segments] == [0, 6]
    log.close()
