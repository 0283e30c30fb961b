"""The ``__cluster_metadata-0`` log: segments, epochs, flushing, truncation and snapshots.

Mirrors ``kafka.raft.KafkaMetadataLog`` over ``UnifiedLog`` / ``LocalLog`` / ``LogLoader``.
The directory, inside ``metadata.log.dir`` (which holds ``.lock``, ``meta.properties`` and
``bootstrap.checkpoint``)::

    __cluster_metadata-0/
        00000000000000000000.log / .index / .timeindex     segments (storage.segment)
        00000000000000004512.log / .index / .timeindex
        00000000000000004512.snapshot                      producer snapshots
        leader-epoch-checkpoint                            storage.leader_epoch
        partition.metadata                                 storage.partition_metadata
        quorum-state                                       storage.quorum_state (not this class)
        00000000000000004000-0000000003.checkpoint         KRaft snapshots (storage.snapshots)

Opening always recovers every segment, as Kafka does for the metadata log (recovery point 0,
unclean shutdown assumed): each batch is CRC-checked, indexes are rebuilt, a torn or corrupt
tail is cut off and every later segment deleted; then everything kept is fsynced so that the
flushed offset starts at the log end offset.

Durability contract for the node: an append is not durable until :meth:`MetadataLog.flush`
returns; :attr:`MetadataLog.flushed_offset` is the exclusive end of what is. Every failed
write, fsync, truncate or rename raises :class:`~storage.errors.KafkaStorageError`; the log is
then unusable (further calls raise) and the node must stop without acknowledging anything.

Where kwire differs from Kafka: appends must be contiguous (Kafka
followers accept offset gaps, which KRaft never produces); truncating to an offset inside a batch
leaves the log end at that batch's base offset; deleted segments are removed at once rather than
renamed ``.deleted`` and removed a minute later.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TypeVar

from kwire.topics import METADATA_PARTITION_DIR
from kwire.uuid import METADATA_TOPIC_ID, Uuid
from storage.batch_layout import LOG_OVERHEAD
from storage.batch_scan import iter_batches
from storage.errors import (
    CorruptRecordError,
    InconsistentStateError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    StorageError,
    UnexpectedAppendOffsetError,
)
from storage.fileio import DataDirLock, FileRegion, fsync_dir, io_errors
from storage.leader_epoch import LEADER_EPOCH_CHECKPOINT_FILE, LeaderEpochCache
from storage.partition_metadata import PARTITION_METADATA_FILE, ensure_partition_metadata
from storage.producer_snapshot import ProducerSnapshots
from storage.records import RecordBatch
from storage.segment import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    BatchInfo,
    LogConfig,
    LogSegment,
    offset_from_file_name,
)
from storage.snapshot_format import read_snapshot_header
from storage.snapshots import (
    RawSnapshotReader,
    RawSnapshotWriter,
    SnapshotId,
    delete_snapshot,
    mark_for_delete,
    recover_snapshots,
)

logger = logging.getLogger(__name__)
T = TypeVar("T")



@dataclass(frozen=True, slots=True)
class LogAppendInfo:
    """Offsets of an append, inclusive (``raft.LogAppendInfo``): ``first_offset`` ..
    ``last_offset``, the number of ``batches`` and their total ``size_in_bytes``."""

    first_offset: int
    last_offset: int
    batches: int
    size_in_bytes: int


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


@dataclass(frozen=True, slots=True)
class OpenReport:
    """What recovery found when the log was opened: ``segments`` kept, valid ``batches``,
    ``truncated_bytes`` cut off a torn or corrupt tail, base offsets of ``deleted_segments``
    (those after a torn or corrupt segment, or from a gap between segments on), and ``error``
    describing the damage (None for a clean log)."""

    segments: int
    batches: int
    truncated_bytes: int
    deleted_segments: list[int]
    error: str | None


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class MetadataLog:
    """The segmented metadata log of one node (``kafka.raft.KafkaMetadataLog``). Not
    thread-safe: one caller at a time.

    Public state: ``log_start_offset`` (inclusive), ``flushed_offset`` (exclusive end of what is
    durable), ``leader_epoch_cache``, ``producer_snapshots``, ``snapshots`` (ids of the frozen
    KRaft snapshots, ascending) and ``open_report``. After :meth:`close` every operation that
    checks usability raises StorageError; after a KafkaStorageError it raises KafkaStorageError.
    """

    def __init__(
        self,
        log_dir: Path,
        partition_dir: Path,
        config: LogConfig,
        topic_id: Uuid,
        clock_ms: Callable[[], int],
        lock: DataDirLock | None,
    ) -> None:
        self.log_dir = log_dir
        self.dir = partition_dir
        self.config = config
        self.topic_id = topic_id
        self._clock_ms = clock_ms
        self._lock = lock
        self._segments: list[LogSegment] = []
        self.log_start_offset = 0
        self.flushed_offset = 0
        self._failed: KafkaStorageError | None = None
        self._closed = False
        self.leader_epoch_cache = LeaderEpochCache(None)
        self.producer_snapshots: ProducerSnapshots
        self.snapshots: list[SnapshotId] = []
        self.open_report = OpenReport(0, 0, 0, [], None)

    # -----------------------------------------------------------------------------------------
    # opening

    @classmethod
    def open(
        cls,
        log_dir: str | os.PathLike[str],
        *,
        config: LogConfig | None = None,
        topic_id: Uuid = METADATA_TOPIC_ID,
        clock_ms: Callable[[], int] = _wall_clock_ms,
        lock: bool = True,
        partition_dir_name: str = METADATA_PARTITION_DIR,
    ) -> MetadataLog:
        """Open (creating if needed) ``<log_dir>/__cluster_metadata-0`` and recover it.

        ``log_dir`` is ``metadata.log.dir``; its ``.lock`` is held until :meth:`close` when
        ``lock``. Raises LogDirectoryLockedError, InconsistentStateError (a partition.metadata
        for another topic id, a malformed checkpoint, a log start with no snapshot covering it)
        or KafkaStorageError."""
        base = Path(log_dir)
        with io_errors(f"creating {base}"):
            base.mkdir(parents=True, exist_ok=True)
        dir_lock = DataDirLock(base) if lock else None
        try:
            partition_dir = base / partition_dir_name
            if not partition_dir.is_dir():
                with io_errors(f"creating {partition_dir}"):
                    partition_dir.mkdir()
                fsync_dir(base)
            log = cls(base, partition_dir, config or LogConfig(), topic_id, clock_ms, dir_lock)
            try:
                log._load()
            except BaseException:
                for segment in log._segments:
                    segment.close_handlers()
                raise
            return log
        except BaseException:
            if dir_lock is not None:
                dir_lock.release()
            raise

    def _load(self) -> None:
        self._remove_temp_files()
        ensure_partition_metadata(self.dir, self.topic_id)
        self.leader_epoch_cache = LeaderEpochCache.load(self.dir)
        self.producer_snapshots = ProducerSnapshots(self.dir)
        bases = sorted(
            offset
            for name in os.listdir(self.dir)
            if name.endswith(LOG_FILE_SUFFIX) and (offset := offset_from_file_name(name)) is not None
        )
        now = self._clock_ms()
        cache = self.leader_epoch_cache

        def on_batch(info: BatchInfo) -> None:
            latest = cache.latest_epoch
            if info.partition_leader_epoch >= 0 and (latest is None or info.partition_leader_epoch > latest):
                cache.assign(info.partition_leader_epoch, info.base_offset)

        expected: int | None = None
        truncated_bytes = 0
        batches = 0
        doomed: list[int] = []
        error: str | None = None
        for i, base_offset in enumerate(bases):
            if expected is not None and base_offset != expected:
                error = f"segment {base_offset} does not start where the previous one ends ({expected})"
                doomed = bases[i:]
                break
            segment = LogSegment.load(self.dir, base_offset, self.config, now)
            self._segments.append(segment)
            result = segment.recover(expected, on_batch)
            batches += result.batches
            truncated_bytes += result.truncated_bytes
            expected = segment.next_offset
            if result.truncated_bytes or result.error is not None:
                error = result.error or f"torn tail of {result.truncated_bytes} bytes in segment {base_offset}"
                doomed = bases[i + 1 :]
                break
        if error is not None:
            # Everything after a damaged segment goes, as LogLoader.recoverLog does.
            logger.warning("metadata log recovery in %s: %s; deleting segments %s", self.dir, error, doomed)
            for later in doomed:
                LogSegment(self.dir, later, self.config, now).delete()
        if not self._segments:
            self._segments.append(LogSegment.create(self.dir, self.log_start_offset, self.config, now))
        self.log_start_offset = self._segments[0].base_offset
        self._active.resize_indexes(self.config.max_index_size)
        cache.truncate_from_end(self.log_end_offset)
        self.producer_snapshots.take_snapshot(self.log_end_offset)
        self.producer_snapshots.remove_stray([s.base_offset for s in self._segments])
        # What recovery kept was read back, not necessarily fsynced: make it durable now so
        # the flushed offset can start at the log end offset.
        for segment in self._segments:
            segment.flush()
        fsync_dir(self.dir)
        self.flushed_offset = self.log_end_offset
        self.snapshots = recover_snapshots(self.dir, self.log_start_offset)
        self.open_report = OpenReport(len(self._segments), batches, truncated_bytes, doomed, error)
        self.truncate_to_latest_snapshot()

    def _remove_temp_files(self) -> None:
        # LogLoader.removeTempFilesAndCollectSwapFiles, plus checkpoint temporaries and index
        # files whose .log is gone.
        names = set(os.listdir(self.dir))
        doomed = [
            n
            for n in names
            if n.endswith((DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX))
            or n in (LEADER_EPOCH_CHECKPOINT_FILE + ".tmp", PARTITION_METADATA_FILE + ".tmp")
        ]
        for name in names:
            if name.endswith((INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX)):
                stem = name.rsplit(".", 1)[0]
                if offset_from_file_name(name) is not None and stem + LOG_FILE_SUFFIX not in names:
                    doomed.append(name)
        for name in doomed:
            if name.endswith(".checkpoint.deleted"):
                continue  # snapshot clean-up handles these
            with io_errors(f"deleting {name}"), contextlib.suppress(FileNotFoundError):
                os.unlink(self.dir / name)

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

    @property
    def latest_epoch(self) -> int | None:
        """The highest leader epoch in ``leader-epoch-checkpoint``, None when it is empty."""
        return self.leader_epoch_cache.latest_epoch

    def last_fetched_epoch(self) -> int:
        """The epoch of the last record, else of the snapshot the log starts at, else 0
        (``KafkaMetadataLog.lastFetchedEpoch``). Raises InconsistentStateError when there is a
        snapshot but the empty log does not start at it."""
        latest = self.leader_epoch_cache.latest_epoch
        if latest is not None:
            return latest
        snapshot = self.latest_snapshot_id
        if snapshot is None:
            return 0
        if snapshot.end_offset == self.log_start_offset == self.log_end_offset:
            return snapshot.epoch
        raise InconsistentStateError(
            f"Log doesn't have a last fetch epoch and there is a snapshot ({snapshot}). Expected "
            f"the snapshot's end offset to match the log's end offset ({self.log_end_offset}) and "
            f"the log start offset ({self.log_start_offset})"
        )

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """``(end offset, epoch)`` of the largest epoch <= ``epoch`` (``endOffsetForEpoch``),
        redirected to the earliest snapshot when the epoch ends at it."""
        found_epoch, found_offset = self.leader_epoch_cache.end_offset_for(epoch, self.log_end_offset)
        if found_epoch < 0:
            return self.log_end_offset, self.last_fetched_epoch()
        earliest = self.earliest_snapshot_id
        if earliest is not None and found_offset == earliest.end_offset and found_epoch == epoch:
            return earliest.end_offset, earliest.epoch
        return found_offset, found_epoch

    def initialize_leader_epoch(self, epoch: int) -> None:
        """A new leader's epoch starts at the log end offset (``initializeLeaderEpoch``). Raises
        ValueError for a negative epoch and KafkaStorageError when the checkpoint cannot be
        written."""
        self._check_usable()
        self._guard(lambda: self.leader_epoch_cache.assign(epoch, self.log_end_offset))

    # -----------------------------------------------------------------------------------------
    # appending

    def append_as_leader(self, records: bytes | bytearray | memoryview, epoch: int) -> LogAppendInfo:
        """Append batches the leader built: offsets must start at the log end offset and every
        batch must carry ``epoch`` as its PartitionLeaderEpoch
        (``KafkaMetadataLog.appendAsLeader``).

        Every batch is checked before anything is written. Raises ValueError for no batch or a
        batch of another epoch, RecordTooLargeError for a batch above ``max_batch_bytes``,
        CorruptRecordError for a bad size, magic or CRC or a batch without records,
        UnexpectedAppendOffsetError for a gap or overlap, and KafkaStorageError when the write
        fails. Not durable until :meth:`flush`."""
        return self._append(records, leader_epoch=epoch)

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> LogAppendInfo:
        """Append batches exactly as a Fetch response carried them (whole batches; a trailing
        partial batch is ignored, as Kafka's follower does; ``KafkaMetadataLog.appendAsFollower``).
        Raises as :meth:`append_as_leader`, without the epoch check."""
        return self._append(records, leader_epoch=None)

    def _append(self, records: bytes | bytearray | memoryview, leader_epoch: int | None) -> LogAppendInfo:
        self._check_usable()
        buf = memoryview(records).cast("B") if not isinstance(records, memoryview) else records.cast("B")
        batches = list(iter_batches(buf))
        if not batches:
            raise ValueError("Attempt to append an empty record set")
        expected = self.log_end_offset
        size = 0
        for batch in batches:
            if batch.size_in_bytes > self.config.max_batch_bytes:
                raise RecordTooLargeError(
                    f"batch of {batch.size_in_bytes} bytes exceeds max.message.bytes {self.config.max_batch_bytes}"
                )
            batch.ensure_valid()
            if batch.last_offset_delta < 0 or batch.records_count <= 0:
                raise CorruptRecordError(f"batch at offset {batch.base_offset} holds no records")
            if batch.base_offset != expected:
                raise UnexpectedAppendOffsetError(
                    f"batch at offset {batch.base_offset} does not follow on from offset {expected}"
                )
            if leader_epoch is not None and batch.partition_leader_epoch != leader_epoch:
                raise ValueError(
                    f"leader batch carries epoch {batch.partition_leader_epoch}, expected {leader_epoch}"
                )
            expected = batch.next_offset
            size += batch.size_in_bytes
        data = buf[:size]
        # The append set goes to one segment; roll first if it would not fit.
        max_timestamp = max(b.max_timestamp for b in batches)
        if self._active.should_roll(size, max_timestamp, batches[-1].last_offset, self._clock_ms()):
            self._guard(lambda: self._roll(batches[0].base_offset))
        self._guard(lambda: self._active.append(data, batches))
        for batch in batches:
            epoch = batch.partition_leader_epoch
            latest = self.leader_epoch_cache.latest_epoch
            if epoch >= 0 and (latest is None or epoch > latest):
                self._assign_epoch(epoch, batch.base_offset)
        return LogAppendInfo(batches[0].base_offset, batches[-1].last_offset, len(batches), size)

    def _assign_epoch(self, epoch: int, start_offset: int) -> None:
        self._guard(lambda: self.leader_epoch_cache.assign(epoch, start_offset))

    def roll(self) -> LogSegment:
        """Start a new segment at the log end offset (no-op while the active one is empty);
        returns the active segment. Raises KafkaStorageError."""
        self._check_usable()
        if self._active.size > 0:
            self._guard(lambda: self._roll(self.log_end_offset))
        return self._active

    def _roll(self, new_base: int) -> None:
        old = self._active
        old.on_become_inactive()
        segment = LogSegment.create(self.dir, new_base, self.config, self._clock_ms())
        self._segments.append(segment)
        fsync_dir(self.dir)
        self.producer_snapshots.take_snapshot(new_base)

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
    # KRaft snapshots

    @property
    def latest_snapshot_id(self) -> SnapshotId | None:
        """The id of the newest frozen snapshot, None when there is none (``latestSnapshotId``)."""
        return self.snapshots[-1] if self.snapshots else None

    @property
    def earliest_snapshot_id(self) -> SnapshotId | None:
        """The id of the oldest frozen snapshot, None when there is none
        (``earliestSnapshotId``)."""
        return self.snapshots[0] if self.snapshots else None

    def create_snapshot_writer(self, snapshot_id: SnapshotId) -> RawSnapshotWriter | None:
        """A writer for a new snapshot, None if that id already exists
        (``createNewSnapshotUnchecked``). Call :meth:`on_snapshot_frozen` after freezing.
        Raises KafkaStorageError when the ``.part`` file cannot be created."""
        self._check_usable()
        if snapshot_id in self.snapshots:
            return None
        return self._guard(lambda: RawSnapshotWriter(self.dir, snapshot_id))

    def on_snapshot_frozen(self, snapshot_id: SnapshotId) -> None:
        """Add a snapshot frozen by a writer from :meth:`create_snapshot_writer` to
        ``snapshots`` (``KafkaMetadataLog.onSnapshotFrozen``); idempotent, touches no file."""
        if snapshot_id not in self.snapshots:
            self.snapshots.append(snapshot_id)
            self.snapshots.sort()

    def open_snapshot(self, snapshot_id: SnapshotId) -> RawSnapshotReader | None:
        """A reader of a frozen snapshot, None when it is not known or its file has vanished
        (it is then forgotten). Raises KafkaStorageError for any other failure to open it."""
        if snapshot_id not in self.snapshots:
            return None
        try:
            return RawSnapshotReader.open(self.dir, snapshot_id)
        except KafkaStorageError as exc:
            if isinstance(exc.__cause__, FileNotFoundError):
                self.snapshots.remove(snapshot_id)
                return None
            raise

    def delete_before_snapshot(self, snapshot_id: SnapshotId) -> bool:
        """Advance the log start offset to ``snapshot_id`` and drop older segments and
        snapshots (``KafkaMetadataLog.deleteBeforeSnapshot``). Returns True when anything was
        deleted."""
        self._check_usable()
        latest = self.latest_snapshot_id
        if (
            latest is None
            or snapshot_id not in self.snapshots
            or not self.log_start_offset < snapshot_id.end_offset <= latest.end_offset
            or snapshot_id.end_offset > self.log_end_offset
        ):
            return False
        before = len(self._segments)
        self.maybe_increment_log_start_offset(snapshot_id.end_offset)
        forgotten = [s for s in self.snapshots if s < snapshot_id]
        self._forget_snapshots(forgotten)
        return before != len(self._segments) or bool(forgotten)

    def snapshot_timestamp(self, snapshot_id: SnapshotId) -> int | None:
        """The ``lastContainedLogTimestamp`` of a snapshot's header, in ms; None when it is not
        known. Reads only its first batch. Raises KafkaStorageError or CorruptRecordError."""
        reader = self.open_snapshot(snapshot_id)
        if reader is None:
            return None
        with reader:
            head = reader.read(0, LOG_OVERHEAD)
            if len(head) < LOG_OVERHEAD:
                raise CorruptRecordError(f"snapshot {snapshot_id} is shorter than a batch header")
            length = int.from_bytes(head[8:12], "big", signed=True)
            first = reader.read(0, LOG_OVERHEAD + max(0, length))
        return read_snapshot_header(first).last_contained_log_timestamp

    def maybe_clean(self, *, retention_bytes: int, retention_ms: int, now_ms: int, max_offset: int) -> bool:
        """Delete the oldest snapshots, each with the log below the snapshot after it, while the
        log and snapshots together exceed ``retention_bytes`` and then while the oldest one
        holds records older than ``retention_ms`` (``KafkaRaftLog.maybeClean``, run every 60 s
        by ``KafkaRaftClient``; -1 turns a limit off). The newest snapshot always stays, and the
        log start moves to no snapshot ending past ``max_offset`` (the high watermark). The
        bootstrap checkpoint counts as the oldest snapshot, as in Kafka. Returns True when it
        deleted anything. Raises KafkaStorageError."""
        cleaned = False
        if retention_bytes >= 0:
            sizes: dict[SnapshotId, int] = {}
            for snapshot_id in list(self.snapshots):
                reader = self.open_snapshot(snapshot_id)
                if reader is not None:
                    with reader:
                        sizes[snapshot_id] = reader.size_in_bytes
            total = sum(sizes.values())

            def too_big(snapshot_id: SnapshotId) -> bool:
                nonlocal total
                size = sizes.get(snapshot_id)
                if size is None or self.size_in_bytes + total <= retention_bytes:
                    return False
                total -= size
                return True

            cleaned |= self._clean_snapshots(too_big, max_offset)
        if retention_ms >= 0:

            def too_old(snapshot_id: SnapshotId) -> bool:
                timestamp = self.snapshot_timestamp(snapshot_id)
                return timestamp is not None and now_ms - timestamp > retention_ms

            cleaned |= self._clean_snapshots(too_old, max_offset)
        return cleaned

    def _clean_snapshots(self, should_clean: Callable[[SnapshotId], bool], max_offset: int) -> bool:
        """``KafkaRaftLog.cleanSnapshots``: walk the snapshots oldest first; while one should
        go, delete everything before the next one."""
        cleaned = False
        ids = list(self.snapshots)
        for current, following in zip(ids, ids[1:], strict=False):
            if not should_clean(current) or following.end_offset > max_offset:
                break
            if not self.delete_before_snapshot(following):
                break
            cleaned = True
        return cleaned

    def truncate_to_latest_snapshot(self) -> bool:
        """If the latest snapshot is ahead of the log, empty the log and start it at the
        snapshot (``truncateToLatestSnapshot``). Returns True when it did."""
        latest = self.latest_snapshot_id
        latest_epoch = self.leader_epoch_cache.latest_epoch or 0
        if latest is None or not (
            latest.epoch > latest_epoch
            or (latest.epoch == latest_epoch and latest.end_offset > self.log_end_offset)
        ):
            return False
        self.truncate_fully_and_start_at(latest.end_offset)
        self._forget_snapshots([s for s in self.snapshots if s < latest])
        return True

    def _forget_snapshots(self, doomed: list[SnapshotId]) -> None:
        for snapshot_id in doomed:
            self.snapshots.remove(snapshot_id)
            self._guard(partial(mark_for_delete, self.dir, snapshot_id))
            self._guard(partial(delete_snapshot, self.dir, snapshot_id))

    # -----------------------------------------------------------------------------------------
    # failure handling and closing

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

    def close(self) -> None:
        """Flush, write the producer snapshot at the log end, close every segment (trimming
        indexes), release ``.lock``. After a storage failure only releases descriptors."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._failed is None:
                for segment in self._segments:
                    segment.flush(indexes=True)
                self.producer_snapshots.take_snapshot(self.log_end_offset)
                for segment in self._segments:
                    segment.close()
            else:
                for segment in self._segments:
                    segment.close_handlers()
        finally:
            if self._lock is not None:
                self._lock.release()

    def __enter__(self) -> MetadataLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
