"""The segment list of the metadata log: offsets, reads, truncation, the log start, flushing,
and the failure state every operation checks.

Mirrors Kafka's ``kafka.log.LocalLog`` (the segments, ``read``, ``flush``, deleting segments)
with the parts of ``UnifiedLog`` that keep the leader epoch cache and the producer snapshots in
step with them (``truncateTo``, ``truncateFullyAndStartAt``, ``maybeIncrementLogStartOffset``).
:class:`SegmentedLog` is the base of :class:`storage.log.MetadataLog` (through
:class:`storage.log_snapshots.SnapshotLog`), which opens, recovers and appends; see
:mod:`storage.log` for the directory layout and the durability contract.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

from kwire.topics import METADATA_PARTITION_DIR
from storage.batch_scan import iter_batches
from storage.errors import KafkaStorageError, OffsetOutOfRangeError, StorageError
from storage.fileio import FileRegion, fsync_dir
from storage.leader_epoch import LeaderEpochCache
from storage.producer_snapshot import ProducerSnapshots
from storage.records import RecordBatch
from storage.segment import LogConfig, LogSegment

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class LogReadInfo:
    """What :meth:`MetadataLog.read` returns: whole batches as stored (possibly empty), and
    where they start (``LogFetchInfo`` / ``LogOffsetMetadata``).

    ``start_offset`` is the offset asked for (the first batch may begin before it);
    ``segment_base_offset`` names the segment read and ``position`` is the byte offset of
    ``records`` in its ``.log`` (the segment's size when nothing was read)."""

    records: bytes
    start_offset: int
    segment_base_offset: int
    position: int



class SegmentedLog:
    """The segments of one partition directory, ascending by base offset, the last one active.
    Not thread-safe: one caller at a time.

    Public state: ``dir`` (the partition directory), ``config``, ``log_start_offset``
    (inclusive), ``flushed_offset`` (exclusive end of what is durable), ``leader_epoch_cache``
    and ``producer_snapshots``. Once an operation raised KafkaStorageError every operation that
    checks usability raises KafkaStorageError; after ``close`` it raises StorageError.
    """

    def __init__(self, partition_dir: Path, config: LogConfig, clock_ms: Callable[[], int]) -> None:
        self.dir = partition_dir
        self.config = config
        self._clock_ms = clock_ms
        self._segments: list[LogSegment] = []
        self.log_start_offset = 0
        self.flushed_offset = 0
        self._failed: KafkaStorageError | None = None
        self._closed = False
        self.leader_epoch_cache = LeaderEpochCache(None)
        self.producer_snapshots: ProducerSnapshots

    # -----------------------------------------------------------------------------------------
    # state

    @property
    def _active(self) -> LogSegment:
        return self._segments[-1]

    @property
    def segments(self) -> list[LogSegment]:
        """A copy of the segment list, ascending by base offset; the last is the active one."""
        return list(self._segments)

    @property
    def log_end_offset(self) -> int:
        """The offset the next append must start at (exclusive end of the log)."""
        return self._active.next_offset

    @property
    def size_in_bytes(self) -> int:
        """Total bytes of every ``.log`` file (indexes not counted)."""
        return sum(s.size for s in self._segments)

    # -----------------------------------------------------------------------------------------
    # reading

    def read(
        self, start_offset: int, max_bytes: int = 8 * 1024 * 1024, max_offset: int | None = None, *,
        at_least_one: bool = True,
    ) -> LogReadInfo:
        """Whole batches from the one holding ``start_offset``, within one segment: at most
        ``max_bytes`` but at least one batch (none when that batch alone is larger and
        ``at_least_one`` is False: a caller filling what is left of a budget); with
        ``max_offset`` (exclusive, e.g. the high watermark) only batches whose last offset is
        below it. ``max_bytes`` is in bytes.
        Raises OffsetOutOfRangeError outside ``[log_start_offset, log_end_offset]`` (both
        inclusive; at the end the records are empty) and KafkaStorageError on I/O failure."""
        self._check_readable(start_offset)
        index = self._segment_index_for(start_offset)
        for segment in self._segments[index:]:
            max_position: int | None = None
            if max_offset is not None:
                if max_offset <= segment.base_offset:
                    break
                found = segment.translate_offset(max_offset)
                max_position = found[0] if found is not None else None
            result = self._read_segment(segment, start_offset, max_bytes, max_position, at_least_one)
            if result is not None:
                position, data = result
                return LogReadInfo(data, start_offset, segment.base_offset, position)
        return LogReadInfo(b"", start_offset, self._active.base_offset, self._active.size)

    def read_region(
        self, start_offset: int, max_bytes: int = 8 * 1024 * 1024, *, min_region_bytes: int = 0
    ) -> FileRegion | bytes:
        """Whole batches from the one holding ``start_offset``, within one segment, at most
        ``max_bytes`` but at least one batch, as a :class:`~storage.fileio.FileRegion` of the
        segment's file when they come to ``min_region_bytes`` or more (to be sent from the
        file, as Kafka's ``LogSegment.read`` answers a fetch with a ``FileRecords`` slice), else
        read into ``bytes``. b"" at the log end. Raises as :meth:`read`."""
        self._check_readable(start_offset)
        for segment in self._segments[self._segment_index_for(start_offset):]:
            found = self._guard(partial(segment.locate, start_offset, max_bytes))
            if found is None:
                continue
            position, length = found
            if length >= min_region_bytes:
                return self._guard(partial(FileRegion, segment.fd, position, length, segment.log_path))
            return self._guard(partial(segment.read_at, position, length))
        return b""

    def _check_readable(self, start_offset: int) -> None:
        """Raise unless the log is usable and ``start_offset`` lies in ``[log_start_offset,
        log_end_offset]`` (OffsetOutOfRangeError, Kafka's message)."""
        self._check_usable()
        if start_offset < self.log_start_offset or start_offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"Received request for offset {start_offset} for partition {METADATA_PARTITION_DIR}, "
                f"but we only have log segments in the range {self.log_start_offset} to {self.log_end_offset}."
            )

    def _read_segment(
        self, segment: LogSegment, start_offset: int, max_bytes: int, max_position: int | None,
        at_least_one: bool = True,
    ) -> tuple[int, bytes] | None:
        return self._guard(lambda: segment.read(start_offset, max_bytes, max_position, at_least_one=at_least_one))

    def _segment_index_for(self, offset: int) -> int:
        index = 0
        for i, segment in enumerate(self._segments):
            if segment.base_offset <= offset:
                index = i
            else:
                break
        return index

    def iter_batches(self, start_offset: int | None = None) -> Iterator[RecordBatch]:
        """Every batch from the one holding ``start_offset`` (default: the log start) to the
        end -- for tools, tests and state rebuilding. CRCs are not checked here. Raises as
        :meth:`read`."""
        offset = self.log_start_offset if start_offset is None else start_offset
        while offset < self.log_end_offset:
            info = self.read(offset, self.config.max_batch_bytes)
            if not info.records:
                break
            for batch in iter_batches(info.records):
                yield batch
                offset = batch.next_offset

    # -----------------------------------------------------------------------------------------
    # truncation and log start

    def truncate_to(self, offset: int) -> bool:
        """Remove everything at or after ``offset`` (``UnifiedLog.truncateTo``); a batch holding
        ``offset`` is removed whole. Returns True when anything was removed. The caller must
        not truncate below the high watermark (the raft core enforces that). Raises ValueError
        for a negative offset and KafkaStorageError."""
        self._check_usable()
        if offset < 0:
            raise ValueError(f"Cannot truncate partition {METADATA_PARTITION_DIR} to a negative offset ({offset}).")
        if offset >= self.log_end_offset:
            # An epoch may have been started here without any append (a leader that lost
            # its epoch at once): its entry goes, as in UnifiedLog.truncateTo.
            self._guard(lambda: self.leader_epoch_cache.truncate_from_end(self.log_end_offset))
            return False
        if offset < self._segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return True

        def do() -> None:
            while len(self._segments) > 1 and self._active.base_offset > offset:
                self._segments.pop().delete()
            self._active.truncate_to(offset)
            self._active.resize_indexes(self.config.max_index_size)
            fsync_dir(self.dir)
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            self.producer_snapshots.delete_after(self.log_end_offset)
            self._active.flush()

        self._guard(do)
        self.flushed_offset = min(self.flushed_offset, self.log_end_offset)
        self.log_start_offset = min(self.log_start_offset, offset, self.log_end_offset)
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start empty at ``offset`` (``truncateFullyAndStartAt``),
        e.g. after installing a snapshot that ends past the log. The epoch cache and producer
        snapshots are cleared; ``flushed_offset`` becomes ``offset``. Raises KafkaStorageError."""
        self._check_usable()

        def do() -> None:
            for segment in self._segments:
                segment.delete()
            self._segments = [LogSegment.create(self.dir, offset, self.config, self._clock_ms())]
            fsync_dir(self.dir)
            self.leader_epoch_cache.clear()
            self.producer_snapshots.delete_all()

        self._guard(do)
        self.log_start_offset = offset
        self.flushed_offset = offset

    def maybe_increment_log_start_offset(self, new_log_start_offset: int) -> bool:
        """Move the log start offset up (never past the log end) and delete segments wholly
        below it (``maybeIncrementLogStartOffset`` + ``deleteOldSegments``). Returns True
        when it moved. Raises OffsetOutOfRangeError past the log end offset and
        KafkaStorageError."""
        self._check_usable()
        if new_log_start_offset <= self.log_start_offset:
            return False
        if new_log_start_offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"Cannot increment the log start offset to {new_log_start_offset} of partition "
                f"{METADATA_PARTITION_DIR} since it is larger than the log end offset {self.log_end_offset}"
            )
        self.log_start_offset = new_log_start_offset

        def do() -> None:
            while len(self._segments) > 1 and self._segments[1].base_offset <= new_log_start_offset:
                self._segments.pop(0).delete()
            fsync_dir(self.dir)
            self.leader_epoch_cache.truncate_from_start(new_log_start_offset)
            self.producer_snapshots.delete_before(self._segments[0].base_offset)

        self._guard(do)
        return True

    # -----------------------------------------------------------------------------------------
    # durability

    def flush(self, up_to_offset: int | None = None) -> int:
        """fsync every segment holding offsets in ``[flushed_offset, up_to_offset)`` (default:
        the log end offset) and return the new :attr:`flushed_offset`. Raises
        KafkaStorageError; nothing may be acknowledged after that."""
        self._check_usable()
        target = self.log_end_offset if up_to_offset is None else min(up_to_offset, self.log_end_offset)
        if target <= self.flushed_offset:
            return self.flushed_offset
        # Offsets below the first segment were deleted, not lost: nothing to make durable.
        flushed = max(self.flushed_offset, self._segments[0].base_offset)
        for segment in self._segments:
            if segment.next_offset <= flushed or segment.size == 0:
                continue
            if segment.base_offset >= target:
                break
            self._guard(segment.flush)
            flushed = segment.next_offset
        self.flushed_offset = flushed
        return flushed

    # -----------------------------------------------------------------------------------------
    # failure handling

    def _guard(self, action: Callable[[], T]) -> T:
        try:
            return action()
        except KafkaStorageError as exc:
            self._failed = exc
            raise

    def _check_usable(self) -> None:
        if self._failed is not None:
            raise KafkaStorageError(f"the metadata log in {self.dir} failed earlier: {self._failed}") from self._failed
        if self._closed:
            raise StorageError(f"the metadata log in {self.dir} is closed")

    @property
    def failed(self) -> bool:
        """True once an operation raised KafkaStorageError; the log is then unusable."""
        return self._failed is not None
