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

The jobs are split by module: :mod:`storage.segmented_log` (the segment list: offsets, reads,
truncation, the log start, flushing, the failure state), :mod:`storage.log_snapshots` (KRaft
snapshots and their retention), :mod:`storage.log_loader` (recovery on open) and this module
(opening, leader epochs, appending and rolling, closing).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kwire.topics import METADATA_PARTITION_DIR
from kwire.uuid import METADATA_TOPIC_ID, Uuid
from storage.batch_scan import iter_batches
from storage.errors import (
    CorruptRecordError,
    InconsistentStateError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from storage.fileio import DataDirLock, fsync_dir, io_errors
from storage.leader_epoch import LeaderEpochCache
from storage.log_loader import OpenReport, recover_segments, remove_temp_files
from storage.log_snapshots import SnapshotLog
from storage.partition_metadata import ensure_partition_metadata
from storage.producer_snapshot import ProducerSnapshots
from storage.segment import LogConfig, LogSegment
from storage.snapshots import recover_snapshots


@dataclass(frozen=True, slots=True)
class LogAppendInfo:
    """Offsets of an append, inclusive (``raft.LogAppendInfo``): ``first_offset`` ..
    ``last_offset``, the number of ``batches`` and their total ``size_in_bytes``."""

    first_offset: int
    last_offset: int
    batches: int
    size_in_bytes: int



def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class MetadataLog(SnapshotLog):
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
        super().__init__(partition_dir, config, clock_ms)
        self.log_dir = log_dir
        self.topic_id = topic_id
        self._lock = lock
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
        remove_temp_files(self.dir)
        ensure_partition_metadata(self.dir, self.topic_id)
        self.leader_epoch_cache = LeaderEpochCache.load(self.dir)
        self.producer_snapshots = ProducerSnapshots(self.dir)
        cache = self.leader_epoch_cache
        report = recover_segments(
            self.dir, self.config, self._clock_ms(), cache, self._segments, self.log_start_offset
        )
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
        self.open_report = report
        self.truncate_to_latest_snapshot()

    # -----------------------------------------------------------------------------------------
    # leader epochs

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
    # closing

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
