"""A KRaft snapshot's id and contents, from and to bytes: no file I/O.

The sans-IO half of :mod:`storage.snapshots` (which re-exports every name here and adds the
files: names, writers, readers, recovery). The KRaft core uses it to check snapshot bytes that
reach it in memory, so it never imports a module that touches the disk.

Mirrors ``OffsetAndEpoch`` (the id), ``RecordsSnapshotWriter`` (:func:`build_snapshot_batches`)
and ``RecordsSnapshotReader`` (:func:`read_snapshot_content`). A snapshot is record batches back
to back, offsets counted from 0, every batch's PartitionLeaderEpoch = the snapshot epoch::

    control batch   SnapshotHeader{version 0, lastContainedLogTimestamp}
                    [+ KRaftVersion{0, v} + Voters{...} when kraft.version >= 1]
    data batch(es)  framed metadata records
    control batch   SnapshotFooter{version 0}
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from messages.generated.kraft_version_record import KRaftVersionRecord
from messages.generated.snapshot_footer_record import SnapshotFooterRecord
from messages.generated.snapshot_header_record import SnapshotHeaderRecord
from messages.generated.voters_record import VotersRecord
from storage.batch_scan import scan_batches
from storage.compression import CompressionType
from storage.control import (
    ControlMessage,
    ControlRecord,
    ControlRecordType,
    KRaftBatch,
    build_control_batch,
    build_data_batch,
    read_kraft_batch,
)
from storage.errors import CorruptRecordError
from storage.records import RecordBatch

OFFSET_WIDTH = 20
EPOCH_WIDTH = 10
DEFAULT_MAX_BATCH_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True, order=True)
class SnapshotId:
    """``OffsetAndEpoch`` naming a snapshot: ``end_offset`` is exclusive."""

    end_offset: int
    epoch: int

    @property
    def file_stem(self) -> str:
        """``<end offset, 20 digits>-<epoch, 10 digits>``, zero-padded: the ``.checkpoint``
        file name without its suffix (``Snapshots.filenameFromSnapshotId``)."""
        return f"{self.end_offset:0{OFFSET_WIDTH}d}-{self.epoch:0{EPOCH_WIDTH}d}"

    def __str__(self) -> str:
        return f"OffsetAndEpoch(offset={self.end_offset}, epoch={self.epoch})"


BOOTSTRAP_SNAPSHOT_ID = SnapshotId(0, 0)


def build_snapshot_batches(
    snapshot_id: SnapshotId,
    *,
    last_contained_log_timestamp: int,
    records: Iterable[bytes],
    append_time_ms: int,
    kraft_version: int = 0,
    voters: VotersRecord | None = None,
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
    compression: CompressionType = CompressionType.NONE,
) -> Iterator[bytes]:
    """The batches of a snapshot (``RecordsSnapshotWriter``): header batch, data batches of at
    most about ``max_batch_bytes`` of record values each, footer batch; offsets from 0, epoch =
    the snapshot's epoch.

    ``records`` are framed metadata records, in order; a value larger than ``max_batch_bytes``
    gets a batch of its own. ``last_contained_log_timestamp`` and ``append_time_ms`` are in ms.
    KRaftVersion and (when given) ``voters`` go into the header batch only when
    ``kraft_version`` >= 1. Gives each batch as bytes, in file order, as it is made. Raises
    ValueError for an empty record value."""
    epoch = snapshot_id.epoch
    header: list[ControlMessage] = [
        SnapshotHeaderRecord(last_contained_log_timestamp=last_contained_log_timestamp)
    ]
    if kraft_version >= 1:
        header.append(KRaftVersionRecord(kraft_version=kraft_version))
        if voters is not None:
            header.append(voters)
    yield build_control_batch(header, base_offset=0, partition_leader_epoch=epoch, append_time_ms=append_time_ms)
    offset = len(header)
    pending: list[bytes] = []
    pending_bytes = 0
    for value in records:
        if pending and pending_bytes + len(value) > max_batch_bytes:
            yield build_data_batch(pending, base_offset=offset, partition_leader_epoch=epoch,
                                   append_time_ms=append_time_ms, compression=compression)
            offset += len(pending)
            pending, pending_bytes = [], 0
        pending.append(value)
        pending_bytes += len(value)
    if pending:
        yield build_data_batch(pending, base_offset=offset, partition_leader_epoch=epoch,
                               append_time_ms=append_time_ms, compression=compression)
        offset += len(pending)
    yield build_control_batch([SnapshotFooterRecord()], base_offset=offset, partition_leader_epoch=epoch,
                              append_time_ms=append_time_ms)


@dataclass(frozen=True, slots=True)
class SnapshotContent:
    """A validated snapshot: its header, its KRaft batches (header and footer included), and
    whether it ended with a footer."""

    header: SnapshotHeaderRecord
    batches: list[KRaftBatch]
    has_footer: bool

    @property
    def last_contained_log_timestamp(self) -> int:
        """The SnapshotHeader's LastContainedLogTimestamp, in ms."""
        return self.header.last_contained_log_timestamp

    def data_records(self) -> list[bytes]:
        """Every data record value, in order."""
        out: list[bytes] = []
        for batch in self.batches:
            if not batch.is_control:
                out.extend(batch.records)  # type: ignore[arg-type]
        return out

    def control_records(self) -> list[ControlRecord]:
        """Every control record (header and footer included), in order."""
        out: list[ControlRecord] = []
        for batch in self.batches:
            if batch.is_control:
                out.extend(batch.records)  # type: ignore[arg-type]
        return out

    @property
    def kraft_version(self) -> int:
        """The last KRaftVersionRecord's kraft.version, 0 when the snapshot has none."""
        return _kraft_version(self.control_records())

    @property
    def voters(self) -> VotersRecord | None:
        """The last VotersRecord, None when the snapshot has none (kraft.version 0)."""
        return _voters(self.control_records())


def _kraft_version(control: list[ControlRecord]) -> int:
    versions = [r.message for r in control if r.type is ControlRecordType.KRAFT_VERSION]
    return versions[-1].kraft_version if versions else 0  # type: ignore[union-attr]


def _voters(control: list[ControlRecord]) -> VotersRecord | None:
    found = [r.message for r in control if r.type is ControlRecordType.KRAFT_VOTERS]
    return found[-1] if found else None  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class SnapshotBatches:
    """A snapshot checked whole (every batch present with a good CRC) whose control batches
    are decoded and whose data batches are decoded only as :meth:`iter_data_records` reaches
    them, as ``RecordsSnapshotReader`` reads a batch at a time: what the KRaft core needs of
    a snapshot (its kraft.version and voters) costs its control batches alone, and a
    controller loading 10^6 partitions holds the file's bytes, not a list of its records."""

    header: SnapshotHeaderRecord
    control: list[ControlRecord]
    batches: list[RecordBatch]
    """Every batch, in file order, control batches included."""
    has_footer: bool

    @property
    def data_batches(self) -> list[RecordBatch]:
        """The data batches, in file order."""
        return [batch for batch in self.batches if not batch.is_control]

    @property
    def kraft_version(self) -> int:
        """The last KRaftVersionRecord's kraft.version, 0 when the snapshot has none."""
        return _kraft_version(self.control)

    @property
    def voters(self) -> VotersRecord | None:
        """The last VotersRecord, None when the snapshot has none (kraft.version 0)."""
        return _voters(self.control)

    def iter_data_records(self) -> Iterator[bytes]:
        """Every data record value, in order, each batch checked by KRaft's rules as it is
        reached (InvalidRecordError, CompressionError)."""
        for batch in self.batches:
            if not batch.is_control:
                yield from read_kraft_batch(batch, validate_crc=False).records  # type: ignore[misc]


def read_snapshot_content(data: bytes | bytearray | memoryview) -> SnapshotContent:
    """Validate and decode snapshot bytes (``RecordsSnapshotReader``): checked whole as
    :func:`read_snapshot_batches` checks them, then every batch decoded by KRaft's record
    rules. Raises CorruptRecordError / InvalidRecordError."""
    checked = read_snapshot_batches(data)
    batches = [read_kraft_batch(batch, validate_crc=False) for batch in checked.batches]
    return SnapshotContent(checked.header, batches, checked.has_footer)


def read_snapshot_batches(data: bytes | bytearray | memoryview) -> SnapshotBatches:
    """Check snapshot bytes whole (every batch complete with a good CRC, the first a control
    batch whose first record is a SnapshotHeader) and decode its control batches; its data
    batches wait for :meth:`SnapshotBatches.iter_data_records`. Raises CorruptRecordError /
    InvalidRecordError."""
    scan = scan_batches(data)
    if scan.error is not None or scan.torn:
        raise CorruptRecordError(
            f"snapshot is corrupt after {scan.valid_bytes} of {len(data)} bytes: "
            f"{scan.error or 'incomplete batch'}"
        )
    batches = [RecordBatch(scanned.buffer) for scanned in scan.batches]
    decoded = [read_kraft_batch(batch, validate_crc=False).records if batch.is_control else () for batch in batches]
    first = decoded[0] if decoded else ()
    if not first:
        raise CorruptRecordError("First batch is not a control batch with at least one record")
    header = first[0]
    assert isinstance(header, ControlRecord)
    if header.type is not ControlRecordType.SNAPSHOT_HEADER:
        raise CorruptRecordError(f"First control record is not a snapshot header ({header.type.name})")
    assert isinstance(header.message, SnapshotHeaderRecord)
    last = decoded[-1]
    has_footer = bool(last) and isinstance(last[-1], ControlRecord) and last[-1].type is ControlRecordType.SNAPSHOT_FOOTER
    control = [record for records in decoded for record in records]
    return SnapshotBatches(header.message, control, batches, has_footer)  # type: ignore[arg-type]


def read_snapshot_header(first_batch: bytes | bytearray | memoryview) -> SnapshotHeaderRecord:
    """The SnapshotHeader of a snapshot from bytes that start at its beginning and hold at least
    its first batch (``Snapshots.lastContainedLogTimestamp`` reads only that). Raises
    CorruptRecordError when the first batch is torn, corrupt or not a snapshot header."""
    scan = scan_batches(first_batch)
    if not scan.batches:
        raise CorruptRecordError(f"snapshot header batch is corrupt or incomplete: {scan.error or 'torn'}")
    batch = read_kraft_batch(RecordBatch(scan.batches[0].buffer), validate_crc=False)
    first = batch.records[0] if batch.is_control and batch.records else None
    if not isinstance(first, ControlRecord) or not isinstance(first.message, SnapshotHeaderRecord):
        raise CorruptRecordError("First batch of the snapshot does not start with a snapshot header")
    return first.message

