"""KRaft snapshot files: names, writing and freezing, reading and validation, start-up clean-up,
and the log operations that depend on snapshots."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from kwire.uuid import Uuid
from messages.generated.voters_record import Endpoint, KRaftVersionFeature, Voter, VotersRecord
from storage.batch_scan import iter_batches
from storage.control import ControlRecordType, build_data_batch, build_kraft_batch
from storage.errors import (
    CorruptRecordError,
    InconsistentStateError,
    InvalidRecordError,
    StorageError,
)
from storage.log import MetadataLog
from storage.records import RecordBatch
from storage.snapshots import (
    BOOTSTRAP_SNAPSHOT_ID,
    RawSnapshotReader,
    RawSnapshotWriter,
    SnapshotId,
    build_snapshot_batches,
    load_snapshot_batches,
    parse_snapshot_path,
    read_snapshot,
    read_snapshot_batches,
    read_snapshot_content,
    recover_snapshots,
    snapshot_path,
    write_snapshot,
)
from tests.storage.helpers import SMALL, fill


def _voters() -> VotersRecord:
    return VotersRecord(
        voters=[
            Voter(1, Uuid.from_string("J8aAPcfLQt2bqs1JT_rMgQ"), [Endpoint("CONTROLLER", "localhost", 9093)],
                  KRaftVersionFeature(0, 1))
        ]
    )


def test_names() -> None:
    snapshot_id = SnapshotId(1234, 7)
    assert snapshot_path(Path("/d"), snapshot_id).name == "00000000000000001234-0000000007.checkpoint"
    assert BOOTSTRAP_SNAPSHOT_ID.file_stem == "00000000000000000000-0000000000"
    parsed = parse_snapshot_path(Path("00000000000000001234-0000000007-998877.checkpoint.part"))
    assert parsed is not None and parsed.partial and parsed.snapshot_id == snapshot_id
    parsed = parse_snapshot_path(Path("00000000000000001234-0000000007.checkpoint.deleted"))
    assert parsed is not None and parsed.deleted
    assert parse_snapshot_path(Path("bootstrap.checkpoint")) is None
    assert parse_snapshot_path(Path("00000000000000001234.log")) is None


def test_write_freeze_and_read(tmp_path: Path, fsyncs: list[int]) -> None:
    records = [b"\x01\x0c\x00" + bytes([i]) * 20 for i in range(50)]
    snapshot_id = SnapshotId(100, 4)
    writer = RawSnapshotWriter(tmp_path, snapshot_id)
    assert writer.temp_path.name.startswith("00000000000000000100-0000000004-")
    assert writer.temp_path.name.endswith(".checkpoint.part")
    assert stat.S_IMODE(os.stat(writer.temp_path).st_mode) == 0o600
    batches = build_snapshot_batches(
        snapshot_id, last_contained_log_timestamp=777, records=records, append_time_ms=900,
        kraft_version=1, voters=_voters(), max_batch_bytes=400,
    )
    for raw in batches:
        writer.append(raw)
    path = writer.freeze()
    with pytest.raises(StorageError):
        writer.append(b"x")
    assert path == snapshot_path(tmp_path, snapshot_id)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o400
    assert not writer.temp_path.exists()
    parsed = [RecordBatch(b.buffer) for b in iter_batches(path.read_bytes())]
    assert [b.base_offset for b in parsed][0] == 0
    assert all(b.partition_leader_epoch == 4 for b in parsed)
    assert parsed[0].is_control and parsed[-1].is_control and len(parsed) > 3
    content = read_snapshot(tmp_path, snapshot_id)
    lazy = load_snapshot_batches(tmp_path, snapshot_id)
    assert (lazy.header, lazy.control, lazy.has_footer) == (content.header, content.control_records(), True)
    assert (lazy.kraft_version, lazy.voters) == (1, _voters()) and len(lazy.data_batches) > 1
    assert list(lazy.iter_data_records()) == records
    assert content.last_contained_log_timestamp == 777 and content.has_footer
    assert content.data_records() == records
    assert content.kraft_version == 1 and content.voters == _voters()
    assert [r.type for r in content.control_records()] == [
        ControlRecordType.SNAPSHOT_HEADER, ControlRecordType.KRAFT_VERSION,
        ControlRecordType.KRAFT_VOTERS, ControlRecordType.SNAPSHOT_FOOTER,
    ]
    offsets = [(b.base_offset, b.last_offset) for b in parsed]
    assert all(a[1] + 1 == b[0] for a, b in zip(offsets, offsets[1:], strict=False))
    with RawSnapshotReader.open(tmp_path, snapshot_id) as reader:
        assert reader.read(10, 20) == path.read_bytes()[10:30]
        assert reader.read(reader.size_in_bytes - 3, 100) == path.read_bytes()[-3:]


def test_kraft_version_zero_header_has_only_the_snapshot_header() -> None:
    batches = list(build_snapshot_batches(SnapshotId(5, 1), last_contained_log_timestamp=0, records=[], append_time_ms=0))
    assert len(batches) == 2
    content = read_snapshot_content(b"".join(batches))
    assert [r.type for r in content.control_records()] == [
        ControlRecordType.SNAPSHOT_HEADER, ControlRecordType.SNAPSHOT_FOOTER,
    ]
    assert content.kraft_version == 0 and content.voters is None


def test_abandoned_writer_leaves_nothing(tmp_path: Path, fsyncs: list[int]) -> None:
    with RawSnapshotWriter(tmp_path, SnapshotId(3, 1)) as writer:
        writer.append(b"partial")
    assert os.listdir(tmp_path) == []


def test_reader_requires_a_header_first() -> None:
    data = build_data_batch([b"\x01\x0c\x00x"], base_offset=0, partition_leader_epoch=0, append_time_ms=0)
    good = b"".join(build_snapshot_batches(SnapshotId(1, 0), last_contained_log_timestamp=0, records=[b"\x01"], append_time_ms=0))
    footer = list(build_snapshot_batches(SnapshotId(1, 0), last_contained_log_timestamp=0, records=[], append_time_ms=0))[-1]
    for read in (read_snapshot_content, read_snapshot_batches):
        with pytest.raises(CorruptRecordError, match="First batch is not a control batch"):
            read(data)
        with pytest.raises(CorruptRecordError, match="snapshot is corrupt"):
            read(good[:-1])
        with pytest.raises(CorruptRecordError):
            read(b"")
        with pytest.raises(CorruptRecordError, match="First control record is not a snapshot header"):
            read(footer)  # the footer batch alone


def test_a_bad_data_record_is_found_when_the_lazy_reader_reaches_it() -> None:
    batches = list(build_snapshot_batches(SnapshotId(3, 1), last_contained_log_timestamp=0, records=[b"\x01\x0c"] * 2,
                                          append_time_ms=0))
    keyed = build_kraft_batch([(b"k", b"\x01\x0c")], base_offset=3, partition_leader_epoch=1, append_time_ms=0,
                              is_control=False)
    data = b"".join([batches[0], batches[1], keyed, batches[2]])
    with pytest.raises(InvalidRecordError, match="Got key in the record"):
        read_snapshot_content(data)
    lazy = read_snapshot_batches(data)  # checked whole by CRC; the records wait
    records = lazy.iter_data_records()
    assert [next(records), next(records)] == [b"\x01\x0c"] * 2
    with pytest.raises(InvalidRecordError, match="Got key in the record"):
        next(records)


def test_recover_snapshots(tmp_path: Path, fsyncs: list[int]) -> None:
    for sid in (SnapshotId(10, 1), SnapshotId(20, 2), SnapshotId(30, 2)):
        write_snapshot(tmp_path, sid, last_contained_log_timestamp=0, records=[], append_time_ms=0)
    (tmp_path / "00000000000000000040-0000000003-55.checkpoint.part").write_bytes(b"x")
    (tmp_path / "00000000000000000005-0000000001.checkpoint.deleted").write_bytes(b"x")
    with pytest.raises(InconsistentStateError):
        recover_snapshots(tmp_path, 31)
    assert len(os.listdir(tmp_path)) == 5  # nothing deleted by the failed check
    assert recover_snapshots(tmp_path, 20) == [SnapshotId(20, 2), SnapshotId(30, 2)]
    assert sorted(os.listdir(tmp_path)) == [
        "00000000000000000020-0000000002.checkpoint",
        "00000000000000000030-0000000002.checkpoint",
    ]


def _snapshot_at(log: MetadataLog, end_offset: int, epoch: int, timestamp: int = 1) -> SnapshotId:
    snapshot_id = SnapshotId(end_offset, epoch)
    writer = log.create_snapshot_writer(snapshot_id)
    assert writer is not None
    for raw in build_snapshot_batches(
        snapshot_id, last_contained_log_timestamp=timestamp, records=[b"\x01"], append_time_ms=timestamp
    ):
        writer.append(raw)
    writer.freeze()
    log.on_snapshot_frozen(snapshot_id)
    return snapshot_id


def test_log_deletes_before_snapshot(tmp_path: Path, fsyncs: list[int]) -> None:
    log = MetadataLog.open(tmp_path, config=SMALL)
    fill(log, 100)
    bases = [s.base_offset for s in log.segments]
    first = _snapshot_at(log, 60, 1)
    second = _snapshot_at(log, bases[2] + 6, 1)
    assert log.create_snapshot_writer(second) is None
    assert not log.delete_before_snapshot(SnapshotId(61, 1))  # unknown id
    assert log.delete_before_snapshot(second)
    assert log.snapshots == [second] and log.log_start_offset == second.end_offset
    assert [s.base_offset for s in log.segments] == [bases[2]]
    assert not snapshot_path(log.dir, first).exists()
    assert log.open_snapshot(first) is None and log.open_snapshot(second) is not None
    log.close()
    # on reopen the log starts at its first segment, which a snapshot must cover
    log = MetadataLog.open(tmp_path, config=SMALL)
    assert log.log_start_offset == bases[2] and log.snapshots == [second]
    log.close()


def test_open_truncates_to_a_snapshot_ahead_of_the_log(tmp_path: Path, fsyncs: list[int]) -> None:
    # a follower that crashed after installing a snapshot but before truncating its log
    log = MetadataLog.open(tmp_path, config=SMALL)
    fill(log, 5)
    log.close()
    part = tmp_path / "__cluster_metadata-0"
    write_snapshot(part, SnapshotId(500, 7), last_contained_log_timestamp=0, records=[], append_time_ms=0)
    log = MetadataLog.open(tmp_path, config=SMALL)
    assert (log.log_start_offset, log.log_end_offset) == (500, 500)
    assert log.last_fetched_epoch() == 7
    assert log.end_offset_for_epoch(3) == (500, 7)
    log.close()


def test_log_start_without_snapshot_is_inconsistent(tmp_path: Path, fsyncs: list[int]) -> None:
    log = MetadataLog.open(tmp_path, config=SMALL)
    log.truncate_fully_and_start_at(90)
    log.close()
    with pytest.raises(InconsistentStateError):
        MetadataLog.open(tmp_path, config=SMALL)


def test_retention_by_size_deletes_all_but_the_newest_snapshot(tmp_path: Path, fsyncs: list[int]) -> None:
    """``metadata.max.retention.bytes`` (``KafkaRaftLog.cleanSnapshotsRetentionSize``): while the
    log and snapshots exceed it, the oldest snapshot goes with the log below the next one; the
    newest stays, and no snapshot past ``max_offset`` (the high watermark) moves the log start."""
    log = MetadataLog.open(tmp_path, config=SMALL)
    fill(log, 100)
    ids = [_snapshot_at(log, offset, 1) for offset in (20, 50, 80)]
    assert not log.maybe_clean(retention_bytes=10**9, retention_ms=-1, now_ms=0, max_offset=100)
    assert log.snapshots == ids and log.log_start_offset == 0
    assert log.maybe_clean(retention_bytes=1, retention_ms=-1, now_ms=0, max_offset=60)
    assert log.snapshots == ids[1:] and log.log_start_offset == 50  # 80 is above the high watermark
    assert log.maybe_clean(retention_bytes=1, retention_ms=-1, now_ms=0, max_offset=100)
    assert log.snapshots == ids[2:] and log.log_start_offset == 80
    assert not log.maybe_clean(retention_bytes=1, retention_ms=-1, now_ms=0, max_offset=100)  # one left
    assert all(segment.next_offset > 80 for segment in log.segments)  # none wholly below the start
    log.close()


def test_retention_by_age_deletes_the_snapshots_older_than_it(tmp_path: Path, fsyncs: list[int]) -> None:
    """``metadata.max.retention.ms``: a snapshot whose last contained record is older than the
    retention goes, with the log below the next snapshot; the walk stops at the first young one."""
    log = MetadataLog.open(tmp_path, config=SMALL)
    fill(log, 100)
    old, middle, young, newest = (
        _snapshot_at(log, offset, 1, timestamp) for offset, timestamp in ((20, 1_000), (40, 5_000), (60, 9_000), (80, 1_000))
    )
    assert log.snapshot_timestamp(middle) == 5_000
    assert log.maybe_clean(retention_bytes=-1, retention_ms=3_000, now_ms=10_000, max_offset=100)
    # 1,000 and 5,000 are older than 7,000; 9,000 is not, so 80 (old again) is never reached
    assert log.snapshots == [young, newest] and log.log_start_offset == 60
    assert old not in log.snapshots
    log.close()



def test_flush_syncs_what_was_written_and_the_writer_goes_on(tmp_path: Path, fsyncs: list[int]) -> None:
    with RawSnapshotWriter(tmp_path, SnapshotId(8, 2)) as writer:
        writer.append(b"first")
        writer.flush()
        assert len(fsyncs) == 1
        writer.append(b"second")
        path = writer.freeze()
    assert path.read_bytes() == b"firstsecond"
    assert len(fsyncs) == 3  # the flush, the file at freeze, its directory
    with pytest.raises(StorageError, match="already frozen"):
        writer.flush()
