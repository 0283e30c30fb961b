"""``<20-digit offset>.snapshot``: producer-state snapshots written beside the segments.

Mirrors ``ProducerStateManager.writeSnapshot`` / ``readSnapshot`` with the schema
``ProducerSnapshot.json`` (version 1, not flexible)::

    version  int16 = 1
    crc      uint32        CRC-32C of every byte after this field
    count    int32         then per producer entry:
      ProducerId int64 | Epoch int16 | LastSequence int32 | LastOffset int64 |
      OffsetDelta int32 | Timestamp int64 | CoordinatorEpoch int32 | CurrentTxnFirstOffset int64

KRaft batches carry no producer id, so the metadata log's snapshots are always the 10-byte empty
form ``00 01 48 67 4B C7 00 00 00 00``. kwire writes them where Kafka's ``UnifiedLog`` does in
the common cases -- at the log end offset on close, at the new base offset on a segment roll,
at the end of recovery -- keeps those at segment base offsets plus the newest one, and deletes
those past a truncation point or below the first segment. Kafka itself tolerates any set of
these files (it rebuilds producer state when one is missing).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

import crc32c

from storage.errors import CorruptRecordError
from storage.fileio import fsync_fd, io_errors, write_all

SNAPSHOT_SUFFIX = ".snapshot"
PRODUCER_SNAPSHOT_VERSION = 1
_HEADER = struct.Struct(">hIi")
_ENTRY = struct.Struct(">qhiqiqiq")


@dataclass(frozen=True, slots=True)
class ProducerSnapshotEntry:
    """One producer's row of a snapshot (``ProducerSnapshot.json`` ProducerEntry), in file order.

    ``producer_id`` int64, ``epoch`` int16, ``last_sequence`` int32, ``last_offset`` int64 (an
    offset), ``offset_delta`` int32, ``timestamp`` int64 (ms since the epoch),
    ``coordinator_epoch`` int32, ``current_txn_first_offset`` int64 (an offset, -1 when no
    transaction is open). The metadata log never has any; the type exists so that files written
    by a broker's ``ProducerStateManager`` can be read.
    """

    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int


def encode_producer_snapshot(entries: list[ProducerSnapshotEntry] | None = None) -> bytes:
    """A whole ``.snapshot`` file (version 1, CRC-32C over the count and entries) holding
    ``entries`` in order; None or empty gives the 10-byte empty form. Raises struct.error when
    a field does not fit its width."""
    body = struct.pack(">i", len(entries or []))
    for e in entries or []:
        body += _ENTRY.pack(
            e.producer_id, e.epoch, e.last_sequence, e.last_offset, e.offset_delta,
            e.timestamp, e.coordinator_epoch, e.current_txn_first_offset,
        )
    return struct.pack(">hI", PRODUCER_SNAPSHOT_VERSION, crc32c.crc32c(body)) + body


EMPTY_PRODUCER_SNAPSHOT = encode_producer_snapshot()
assert EMPTY_PRODUCER_SNAPSHOT == bytes.fromhex("000148674bc700000000")


def decode_producer_snapshot(data: bytes) -> list[ProducerSnapshotEntry]:
    """The entries of a whole ``.snapshot`` file, in file order
    (``ProducerStateManager.readSnapshot``).

    Raises CorruptRecordError (where Kafka raises ``CorruptSnapshotException``) when the file is
    shorter than its 10-byte header, its version is not 1, its CRC-32C does not match, or its
    length is not exactly header + count × 46 bytes."""
    if len(data) < _HEADER.size:
        raise CorruptRecordError(f"producer snapshot of {len(data)} bytes is too short")
    version, crc, count = _HEADER.unpack_from(data, 0)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptRecordError(f"Snapshot contained an unknown file version {version}")
    computed = crc32c.crc32c(data[6:])
    if computed != crc:
        raise CorruptRecordError(
            f"Snapshot is corrupt (CRC is no longer valid). Stored crc: {crc}. Computed crc: {computed}"
        )
    if count < 0 or len(data) != _HEADER.size + count * _ENTRY.size:
        raise CorruptRecordError(f"producer snapshot holds {len(data)} bytes for {count} entries")
    return [
        ProducerSnapshotEntry(*_ENTRY.unpack_from(data, _HEADER.size + i * _ENTRY.size))
        for i in range(count)
    ]


def producer_snapshot_path(partition_dir: Path, offset: int) -> Path:
    """``<partition_dir>/<offset, 20 digits zero-padded>.snapshot``
    (``LogFileUtils.producerSnapshotFile``); touches no file."""
    return partition_dir / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def offset_from_snapshot_name(name: str) -> int | None:
    """The offset in a file name such as ``00000000000000000042.snapshot``, or None when the
    name is not a producer snapshot's (any other suffix, or a stem that is not all digits)."""
    stem = name[: -len(SNAPSHOT_SUFFIX)]
    if name.endswith(SNAPSHOT_SUFFIX) and stem.isdigit():
        return int(stem)
    return None


class ProducerSnapshots:
    """The ``.snapshot`` files of one partition directory, tracked by offset in ``offsets``.

    The file-management half of ``ProducerStateManager`` (the producer state itself is always
    empty in the metadata log). Constructing it lists ``partition_dir``; raises
    KafkaStorageError when that fails. Every method that touches files raises
    KafkaStorageError on I/O failure.
    """

    def __init__(self, partition_dir: Path) -> None:
        self.dir = partition_dir
        self.offsets: set[int] = set()
        with io_errors(f"listing {partition_dir}"):
            for entry in os.scandir(partition_dir):
                offset = offset_from_snapshot_name(entry.name)
                if offset is not None and entry.is_file():
                    self.offsets.add(offset)

    @property
    def latest_offset(self) -> int | None:
        """The highest offset with a snapshot file, or None when there is none."""
        return max(self.offsets) if self.offsets else None

    def take_snapshot(self, offset: int, *, sync: bool = True) -> bool:
        """Write ``<offset>.snapshot`` unless a snapshot at or after ``offset`` exists
        (``ProducerStateManager.takeSnapshot``); offsets <= 0 are never written. Returns True
        when written. ``sync=False`` skips the fsync (the caller syncs later or does not need
        durability). Raises KafkaStorageError."""
        latest = self.latest_offset
        if offset <= 0 or (latest is not None and offset <= latest):
            return False
        path = producer_snapshot_path(self.dir, offset)
        with io_errors(f"writing producer snapshot {path}"):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                write_all(fd, EMPTY_PRODUCER_SNAPSHOT)
                if sync:
                    fsync_fd(fd)
            finally:
                os.close(fd)
        self.offsets.add(offset)
        return True

    def remove_stray(self, segment_base_offsets: list[int]) -> None:
        """Keep snapshots at segment base offsets and the newest other one if it lies past the
        last segment's base offset (``ProducerStateManager.removeStraySnapshots``)."""
        bases = set(segment_base_offsets)
        strays = sorted(o for o in self.offsets if o not in bases)
        keep_latest = strays and segment_base_offsets and strays[-1] >= max(segment_base_offsets)
        for offset in strays[:-1] if keep_latest else strays:
            self._delete(offset)

    def delete_after(self, end_offset: int) -> None:
        """Delete snapshots at offsets > ``end_offset`` (exclusive bound; a truncation to
        ``end_offset``). Raises KafkaStorageError."""
        for offset in [o for o in self.offsets if o > end_offset]:
            self._delete(offset)

    def delete_before(self, offset: int) -> None:
        """Delete snapshots at offsets < ``offset`` (exclusive bound; the log start moved to a
        later segment, ``ProducerStateManager.deleteSnapshotsBefore``). A missing file is not an
        error. Raises KafkaStorageError."""
        for o in [o for o in self.offsets if o < offset]:
            self._delete(o)

    def delete_all(self) -> None:
        """Delete every snapshot (the log was emptied, as ``truncateFullyAndStartAt`` does). A
        missing file is not an error. Raises KafkaStorageError."""
        for offset in list(self.offsets):
            self._delete(offset)

    def _delete(self, offset: int) -> None:
        with io_errors(f"deleting producer snapshot at {offset}"):
            try:
                os.unlink(producer_snapshot_path(self.dir, offset))
            except FileNotFoundError:
                pass
        self.offsets.discard(offset)
