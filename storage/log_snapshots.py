"""The KRaft snapshots of the metadata log: the frozen snapshot ids, writers and readers,
deleting the log before a snapshot, and snapshot retention.

Mirrors the snapshot half of ``kafka.raft.KafkaMetadataLog`` (``createNewSnapshot``,
``onSnapshotFrozen``, ``deleteBeforeSnapshot``, ``truncateToLatestSnapshot``) and
``KafkaRaftLog.maybeClean`` / ``cleanSnapshots``. The snapshot files themselves are
:mod:`storage.snapshots`. :class:`SnapshotLog` sits between :class:`storage.segmented_log.SegmentedLog`
and :class:`storage.log.MetadataLog`.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

from storage.batch_layout import LOG_OVERHEAD
from storage.errors import CorruptRecordError, KafkaStorageError
from storage.segment import LogConfig
from storage.segmented_log import SegmentedLog
from storage.snapshot_format import read_snapshot_header
from storage.snapshots import (
    RawSnapshotReader,
    RawSnapshotWriter,
    SnapshotId,
    delete_snapshot,
    mark_for_delete,
)


class SnapshotLog(SegmentedLog):
    """A :class:`~storage.segmented_log.SegmentedLog` with its KRaft snapshots: ``snapshots``
    holds the ids of the frozen ones, ascending (``KafkaMetadataLog.snapshots``)."""

    def __init__(self, partition_dir: Path, config: LogConfig, clock_ms: Callable[[], int]) -> None:
        super().__init__(partition_dir, config, clock_ms)
        self.snapshots: list[SnapshotId] = []

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
