"""``StorageRaftLog``: the on-disk :class:`storage.log.MetadataLog` seen through the KRaft
core's :class:`server.raft.log.MutableRaftLog` protocol.

Mirrors ``kafka.raft.KafkaMetadataLog`` (the ``ReplicatedLog`` over ``UnifiedLog``). What it
adds to :class:`~storage.log.MetadataLog`:

* ``read`` returns whole batches across segments (the core reads ranges that may span them);
* the high watermark, which KRaft keeps in memory only (never persisted);
* the safety checks of ``ReplicatedLog``: no truncation below the high watermark, no high
  watermark moving backwards or past the log end offset
  (:class:`~server.raft.log.LogInvariantError`);
* snapshot ids as ``OffsetAndEpoch``. The bootstrap checkpoint ``00000000000000000000-
  0000000000.checkpoint`` that ``kafka-storage format`` writes for a dynamic quorum holds only
  the initial voters, not log state, so it is not reported as a snapshot: a fetch from offset 0
  must be served from the log, not redirected to it (``KafkaRaftClient`` and
  ``ReplicatedLog.validateOffsetAndEpoch`` skip the bootstrap snapshot the same way).

Not thread-safe, like the log it wraps: the node calls it from one task (blocking calls go
through ``trio.to_thread`` one at a time). Any storage failure raises
:class:`~storage.errors.KafkaStorageError` and leaves the log unusable.
"""

from __future__ import annotations

import logging
import time

from server.raft.log import LogInvariantError
from server.raft.types import OffsetAndEpoch
from storage.batch_scan import next_offset_after
from storage.fileio import FileRegion
from storage.log import MetadataLog
from storage.snapshots import BOOTSTRAP_SNAPSHOT_ID, RawSnapshotWriter, SnapshotId, delete_snapshot

logger = logging.getLogger(__name__)

__all__ = ["REGION_MIN_BYTES", "StorageRaftLog"]

REGION_MIN_BYTES = 64 * 1024
"""A Fetch response's records of at least this many bytes are sent from the log's file
(:meth:`StorageRaftLog.read_records`); a smaller read costs less to copy than the region's
descriptor (``dup``, ``fstat``, ``sendfile``, ``close``) costs to set up."""


def _offset_and_epoch(snapshot_id: SnapshotId) -> OffsetAndEpoch:
    return OffsetAndEpoch(snapshot_id.end_offset, snapshot_id.epoch)


def _snapshot_id(offset_and_epoch: OffsetAndEpoch) -> SnapshotId:
    return SnapshotId(offset_and_epoch.offset, offset_and_epoch.epoch)


class StorageRaftLog:
    """A :class:`~server.raft.log.MutableRaftLog` over an open :class:`MetadataLog`."""

    def __init__(self, log: MetadataLog, *, unsafe_fsync_interval_ms: int | None = None) -> None:
        """``unsafe_fsync_interval_ms``: TEST ONLY (``KRaftConfig.unsafe_test_fsync_interval_ms``):
        :meth:`flush` fsyncs at most once per this many ms and returns at once otherwise."""
        self.log = log
        self._high_watermark = log.log_start_offset
        self._unsafe_fsync_interval_s = None if unsafe_fsync_interval_ms is None else unsafe_fsync_interval_ms / 1000
        self._last_fsync: float | None = None
        """When the switch last let an fsync through (None: never, so the first flush fsyncs
        whatever the monotonic clock reads, which starts near 0 on a freshly booted machine)."""
        if unsafe_fsync_interval_ms is not None:
            logger.warning("kwire.unsafe.test.fsync.interval.ms=%d: the log is acknowledged before it is "
                           "durable (a test-only switch)", unsafe_fsync_interval_ms)

    # -- RaftLog

    @property
    def log_start_offset(self) -> int:
        """The first offset the log holds (the latest snapshot's end offset once older
        segments are deleted)."""
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets (exclusive end of the log)."""
        return self.log.log_end_offset

    @property
    def flushed_offset(self) -> int:
        """The end offset (exclusive) up to which the log is fsynced."""
        if self._unsafe_fsync_interval_s is not None:  # TEST ONLY: everything written counts as durable
            return self.log.log_end_offset
        return self.log.flushed_offset

    @property
    def last_fetched_epoch(self) -> int:
        """The leader epoch of the last batch in the log (or of the latest snapshot when the
        log is empty after it); 0 for an empty log."""
        return self.log.last_fetched_epoch()

    @property
    def high_watermark(self) -> int:
        """The high watermark (exclusive): in memory only, as in Kafka."""
        return self._high_watermark

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """``(end offset, epoch)`` of the largest epoch <= ``epoch`` in the leader epoch
        checkpoint (``ReplicatedLog.endOffsetForEpoch``)."""
        offset, found_epoch = self.log.end_offset_for_epoch(epoch)
        return OffsetAndEpoch(offset, found_epoch)

    def read(self, start_offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding ``start_offset``, across segments, at most
        ``max_bytes`` but at least one batch when any exists; b"" at or past the end."""
        log = self.log
        end = log.log_end_offset
        if start_offset >= end:
            return b""
        parts: list[bytes] = []
        size = 0
        offset = max(start_offset, log.log_start_offset)
        # one segment's read is the whole answer unless that segment ends first: the parts are
        # joined only then, so a leader's Fetch answer is not copied again here. After the first
        # part, a batch that would pass max_bytes is not read at all (not read and dropped).
        while offset < end and (not parts or size < max_bytes):
            records = log.read(offset, max(max_bytes - size, 1), at_least_one=not parts).records
            if not records or (parts and size + len(records) > max_bytes):
                break
            parts.append(records)
            size += len(records)
            next_offset = next_offset_after(records)
            if next_offset is None:
                break
            offset = next_offset
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def read_records(self, start_offset: int, max_bytes: int) -> bytes | FileRegion:
        """A Fetch response's records: whole batches of the segment holding ``start_offset``
        (fewer than ``max_bytes`` when that segment ends first, as Kafka's ``LogSegment.read``
        answers), at least one batch; when they come to :data:`REGION_MIN_BYTES` or more, as a
        :class:`~storage.fileio.FileRegion` that the connection sends from the file
        (``sendfile``) instead of copying it twice through memory. b"" at or past the end."""
        log = self.log
        if start_offset >= log.log_end_offset:
            return b""
        return log.read_region(max(start_offset, log.log_start_offset), max_bytes, min_region_bytes=REGION_MIN_BYTES)

    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        """The newest frozen snapshot's id, the bootstrap checkpoint excepted; None if none."""
        ids = self._snapshot_ids()
        return ids[-1] if ids else None

    def earliest_snapshot_id(self) -> OffsetAndEpoch | None:
        """The oldest frozen snapshot's id, the bootstrap checkpoint excepted; None if none."""
        ids = self._snapshot_ids()
        return ids[0] if ids else None

    def snapshot_size(self, snapshot_id: OffsetAndEpoch) -> int | None:
        """The snapshot file's size in bytes, or None if there is no such snapshot."""
        reader = self.log.open_snapshot(_snapshot_id(snapshot_id))
        if reader is None:
            return None
        with reader:
            return reader.size_in_bytes

    def read_snapshot(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> bytes:
        """At most ``max_bytes`` of the snapshot file from byte ``position`` (FetchSnapshot);
        b"" if there is no such snapshot or ``position`` is at its end."""
        reader = self.log.open_snapshot(_snapshot_id(snapshot_id))
        if reader is None:
            return b""
        with reader:
            return reader.read(position, max_bytes)

    def _snapshot_ids(self) -> list[OffsetAndEpoch]:
        return [_offset_and_epoch(s) for s in self.log.snapshots if s != BOOTSTRAP_SNAPSHOT_ID]

    # -- mutations

    def truncate_to(self, offset: int) -> None:
        """Remove every record at or after ``offset``. Raises LogInvariantError below the high
        watermark (committed records are never truncated)."""
        if offset < self._high_watermark:
            raise LogInvariantError(
                f"truncate to {offset} below the high watermark {self._high_watermark}"
            )
        self.log.truncate_to(offset)

    def append(self, batches: bytes) -> None:
        """Append whole batches at the log end offset (leader and follower alike: the core
        built or validated them)."""
        self.log.append_as_follower(batches)

    def flush(self) -> None:
        """fsync the log up to its end offset. Raises KafkaStorageError on failure."""
        if self._unsafe_fsync_interval_s is not None:
            if self._last_fsync is not None and time.monotonic() - self._last_fsync < self._unsafe_fsync_interval_s:
                return
            self._last_fsync = time.monotonic()
        self.log.flush()

    def create_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """Write and freeze (fsync, rename) a snapshot of the local state machine."""
        self._write_snapshot(snapshot_id, data)

    def open_snapshot_writer(self, snapshot_id: OffsetAndEpoch) -> RawSnapshotWriter | None:
        """The first half of :meth:`create_snapshot`, for a large snapshot: a writer of its
        ``.part`` file, None when the snapshot exists or the log starts at or after its offset.
        The writer's ``append`` and ``freeze`` touch its own file only, so they may run on
        another thread while this log goes on; then call :meth:`snapshot_frozen`."""
        if snapshot_id.offset <= self.log.log_start_offset:
            return None
        return self.log.create_snapshot_writer(_snapshot_id(snapshot_id))

    def snapshot_frozen(self, snapshot_id: OffsetAndEpoch) -> bool:
        """The second half: the snapshot a writer of :meth:`open_snapshot_writer` froze joins
        the log's snapshots, unless the log meanwhile moved to start at or after its offset
        (a snapshot from the leader replaced it), when its file is deleted. Returns whether it
        joined. Raises KafkaStorageError when the file cannot be deleted."""
        sid = _snapshot_id(snapshot_id)
        if snapshot_id.offset <= self.log.log_start_offset:
            delete_snapshot(self.log.dir, sid)
            return False
        self.log.on_snapshot_frozen(sid)
        return True

    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """Freeze a snapshot downloaded from the leader, then replace the log by it
        (``truncateToLatestSnapshot``)."""
        self._write_snapshot(snapshot_id, data)
        if not self.log.truncate_to_latest_snapshot():
            self.log.truncate_fully_and_start_at(snapshot_id.offset)
        self._high_watermark = max(self._high_watermark, self.log.log_start_offset)

    def delete_before_snapshot(self) -> None:
        """Delete the segments wholly below the latest snapshot and advance the log start
        offset to it (``ReplicatedLog.deleteBeforeSnapshot``); nothing without a snapshot."""
        latest = self.log.latest_snapshot_id
        if latest is not None and latest != BOOTSTRAP_SNAPSHOT_ID:
            self.log.delete_before_snapshot(latest)

    def maybe_clean(self, *, retention_bytes: int, retention_ms: int, now_ms: int) -> bool:
        """Delete old snapshots and the log below them by retention
        (``storage.log.MetadataLog.maybe_clean``); the log start never passes the high
        watermark. Returns True when anything was deleted."""
        return self.log.maybe_clean(
            retention_bytes=retention_bytes, retention_ms=retention_ms, now_ms=now_ms, max_offset=self._high_watermark
        )

    def _write_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        sid = _snapshot_id(snapshot_id)
        writer = self.log.create_snapshot_writer(sid)
        if writer is None:
            return  # already there (snapshots are immutable once frozen)
        with writer:
            writer.append(data)
            writer.freeze()
        self.log.on_snapshot_frozen(sid)

    def update_high_watermark(self, offset: int) -> None:
        """Record the high watermark the core computed. Raises LogInvariantError if it moves
        back or past the log end offset."""
        if offset < self._high_watermark:
            raise LogInvariantError(
                f"high watermark moved back from {self._high_watermark} to {offset}"
            )
        if offset > self.log.log_end_offset:
            raise LogInvariantError(
                f"high watermark {offset} beyond the log end offset {self.log.log_end_offset}"
            )
        self._high_watermark = offset

