"""Property tests of KRaft snapshot files (``RecordsSnapshotWriter`` / ``RecordsSnapshotReader``,
``KafkaMetadataLog.recoverSnapshots``).

* Any records written to a snapshot read back in order, between a SnapshotHeader and a
  SnapshotFooter, in batches whose record values stay within the batch limit (one record may
  exceed it alone),
  with the header's LastContainedLogTimestamp and the kraft.version written.
* Recovery keeps exactly the frozen snapshots at or above the log start offset and deletes the
  partial, the marked-for-deletion and the older ones; it refuses a log start no snapshot
  reaches, before deleting anything.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import storage.fileio
from storage.control import ControlRecordType
from storage.errors import InconsistentStateError
from storage.snapshot_format import SnapshotId
from storage.snapshots import read_snapshot, recover_snapshots, write_snapshot
from tests.properties import examples

slow = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@contextmanager
def partition_dir() -> Iterator[Path]:
    saved = storage.fileio._fsync
    storage.fileio._fsync = lambda fd: None  # file contents, not durability, are tested
    root = Path(tempfile.mkdtemp(prefix="kwire-snapshot-props-"))
    try:
        yield root
    finally:
        storage.fileio._fsync = saved
        shutil.rmtree(root, ignore_errors=True)


@settings(slow, max_examples=examples(40))
@given(
    records=st.lists(st.integers(1, 300).map(lambda n: bytes([n % 251 + 1]) * n), max_size=25),
    max_batch_bytes=st.integers(100, 800),
    timestamp=st.integers(0, 2**41),
    kraft_version=st.sampled_from([0, 1]),
    end=st.integers(0, 2**40),
    epoch=st.integers(0, 2**31 - 1),
)
@example(records=[b"x" * 150] * 4, max_batch_bytes=300, timestamp=0, kraft_version=0, end=0, epoch=0)
@example(records=[b"x" * 150] * 4, max_batch_bytes=299, timestamp=0, kraft_version=1, end=0, epoch=0)
def test_snapshot_records_round_trip_in_bounded_batches(
    records: list[bytes], max_batch_bytes: int, timestamp: int, kraft_version: int, end: int, epoch: int
) -> None:
    snapshot_id = SnapshotId(end, epoch)
    with partition_dir() as root:
        path = write_snapshot(root, snapshot_id, last_contained_log_timestamp=timestamp, records=records,
                              append_time_ms=7, kraft_version=kraft_version,
                              max_batch_bytes=max_batch_bytes)
        assert path.name == snapshot_id.file_stem + ".checkpoint"
        content = read_snapshot(root, snapshot_id)
        assert content.data_records() == records
        assert content.last_contained_log_timestamp == timestamp
        assert content.kraft_version == kraft_version
        assert content.has_footer
        control = content.control_records()
        assert control[0].type is ControlRecordType.SNAPSHOT_HEADER
        assert control[-1].type is ControlRecordType.SNAPSHOT_FOOTER
        offsets = [(b.base_offset, b.last_offset) for b in content.batches]
        assert offsets[0][0] == 0
        assert all(a[1] + 1 == b[0] for a, b in zip(offsets, offsets[1:], strict=False))
        # kwire bounds the record values of a batch (build_snapshot_batches), not its whole size
        data = [[bytes(v) for v in b.records] for b in content.batches if not b.is_control]  # type: ignore[arg-type]
        for values in data:
            assert sum(map(len, values)) <= max_batch_bytes or len(values) == 1
        # and a batch is cut only when the next record would not fit
        for a, b in zip(data, data[1:], strict=False):
            assert sum(map(len, a)) + len(b[0]) > max_batch_bytes
        assert [p.name for p in root.iterdir()] == [path.name]  # no .part file left


snapshot_files = st.lists(
    st.tuples(st.integers(0, 60), st.integers(0, 3), st.sampled_from(["", ".part", ".deleted"])),
    max_size=10,
    unique_by=lambda t: t,
)


@settings(slow, max_examples=examples(60))
@given(files=snapshot_files, log_start=st.integers(0, 70))
def test_recovery_keeps_exactly_the_frozen_snapshots_from_the_log_start(
    files: list[tuple[int, int, str]], log_start: int
) -> None:
    with partition_dir() as root:
        for end, epoch, suffix in files:
            (root / f"{SnapshotId(end, epoch).file_stem}.checkpoint{suffix}").write_bytes(b"x")
        (root / "00000000000000000000.log").write_bytes(b"")  # other files are not touched
        frozen = sorted(SnapshotId(e, p) for e, p, s in files if s == "")
        kept = [s for s in frozen if s.end_offset >= log_start]
        before = sorted(p.name for p in root.iterdir())
        if log_start > 0 and not kept:
            with pytest.raises(InconsistentStateError):
                recover_snapshots(root, log_start)
            assert sorted(p.name for p in root.iterdir()) == before  # nothing deleted
            return
        assert recover_snapshots(root, log_start) == kept
        assert sorted(p.name for p in root.iterdir()) == sorted(
            [f"{s.file_stem}.checkpoint" for s in kept] + ["00000000000000000000.log"])
