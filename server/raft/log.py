"""The log as the KRaft core sees it: a read-only ``RaftLog`` protocol and an in-memory fake.

The core never mutates the log. It reads through :class:`RaftLog` and asks for changes in its
Outbox (truncation point, batches to append, flush, high watermark); the driver applies them
with the mutating methods of :class:`MutableRaftLog` before the next ``step`` (see
``server.raft.events.Outbox``). Mirrors ``org.apache.kafka.raft.ReplicatedLog`` and, for the
fake, ``MockLog`` (raft/src/test): unflushed batches are lost by :meth:`MemoryRaftLog.crash`,
truncating below the high watermark and moving the high watermark backwards raise.

Offsets: ``log_start_offset`` inclusive, ``log_end_offset`` exclusive (the next offset to be
written); ``flushed_offset`` is the exclusive end of the durable prefix. Batches are Kafka
record batch v2 bytes (``storage.records``).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from kwire.wire import RecordsRegion
from server.raft.types import MAX_FETCH_SIZE_BYTES, OffsetAndEpoch
from storage.batch_scan import iter_batches
from storage.records import RecordBatch


class LogInvariantError(AssertionError):
    """A request that would break the log's safety rules (truncating below the high watermark,
    a high watermark moving backwards or past the end, a non-contiguous append)."""


class RaftLog(Protocol):
    """What the core reads (``ReplicatedLog``)."""

    @property
    def log_start_offset(self) -> int:
        """First offset held, inclusive (``ReplicatedLog.startOffset``): 0 until the prefix
        before a snapshot is deleted or a snapshot replaces the log, then that snapshot's end
        offset."""
        ...

    @property
    def log_end_offset(self) -> int:
        """Offset the next appended record gets: the exclusive end of the log
        (``ReplicatedLog.endOffset``)."""
        ...

    @property
    def flushed_offset(self) -> int:
        """Exclusive end of the prefix known to be durable (fsynced)."""
        ...

    @property
    def last_fetched_epoch(self) -> int:
        """Epoch of the last batch in the log, else of the latest snapshot, else 0."""
        ...

    @property
    def high_watermark(self) -> int:
        """Exclusive end of the committed prefix (``ReplicatedLog.highWatermark``), at most
        ``log_end_offset``; kept in memory only, never persisted."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The largest epoch <= ``epoch`` and its end offset (``ReplicatedLog.endOffsetForEpoch``);
        for an epoch above every known one, ``(log_end_offset, last_fetched_epoch)``."""
        ...

    def read(self, start_offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one containing ``start_offset``, at most ``max_bytes`` but
        always at least one batch if any exists (``minOneMessage``); b"" at the end."""
        ...

    def read_records(self, start_offset: int, max_bytes: int) -> bytes | RecordsRegion:
        """A Fetch response's records (``ReplicatedLog.read``'s ``Records``): as :meth:`read`,
        though a log may stop at the end of one of its segments (as ``LogSegment.read``) and
        answer with a region of a file that the response is sent from; the core relies on
        its length only."""
        ...

    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        """The newest frozen snapshot, or None. It may be the bootstrap (0, 0) checkpoint, which
        the core skips (``StorageRaftLog`` leaves it out)."""
        ...

    def earliest_snapshot_id(self) -> OffsetAndEpoch | None:
        """The oldest frozen snapshot. Contract: when the log start offset is above 0 it is the
        earliest snapshot's end offset, and no snapshot ends below the log start (else a
        follower at the log start would be sent that older snapshot again and again)."""
        ...

    def snapshot_size(self, snapshot_id: OffsetAndEpoch) -> int | None:
        """Bytes in that frozen snapshot, None if there is none."""
        ...

    def read_snapshot(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> bytes:
        """Up to ``max_bytes`` of the snapshot from byte ``position`` (not batch-aligned)."""
        ...


def read_batches(log: RaftLog, start: int, end: int) -> Iterator[RecordBatch]:
    """The whole batches of ``log`` from the one holding ``start`` to the last one ending
    before ``end``, in offset order, read ``MAX_FETCH_SIZE_BYTES`` at a time. Stops early where
    nothing is readable (below the log start): the caller compares the last offset it got."""
    offset = start
    while offset < end:
        before = offset
        for batch in iter_batches(log.read(offset, MAX_FETCH_SIZE_BYTES)):
            if batch.last_offset >= end:
                return
            if batch.last_offset < offset:
                continue
            yield batch
            offset = batch.last_offset + 1
        if offset == before:
            return


class MutableRaftLog(RaftLog, Protocol):
    """What the driver calls to apply an Outbox, and to store snapshots."""

    def truncate_to(self, offset: int) -> None:
        """Remove every record at or above ``offset`` (``ReplicatedLog.truncateTo``); the core
        passes a batch boundary, and an offset at or past the log end offset removes nothing.
        Raises :class:`LogInvariantError` below the high watermark."""
        ...

    def append(self, batches: bytes) -> None:
        """Append whole record batches (v2) whose first base offset is the log end offset
        (``appendAsLeader`` / ``appendAsFollower``); raises when they do not start there. They
        are not durable until :meth:`flush`."""
        ...

    def flush(self) -> None:
        """Make everything appended durable (fsync): ``flushed_offset`` becomes
        ``log_end_offset`` (``ReplicatedLog.flush``)."""
        ...

    def update_high_watermark(self, offset: int) -> None:
        """Set the high watermark to ``offset`` (``ReplicatedLog.updateHighWatermark``). Raises
        :class:`LogInvariantError` if it would move backwards or past the log end offset."""
        ...

    def create_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """Store a frozen snapshot written by the local state machine (at most the HWM)."""
        ...

    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """Store a snapshot downloaded from the leader and replace the whole log by it: the log
        becomes empty at ``log_start_offset = log_end_offset = snapshot end offset``
        (``truncateToLatestSnapshot``)."""
        ...

    def delete_before_snapshot(self) -> None:
        """Drop the batches below the latest snapshot and move the log start offset to it
        (``deleteBeforeSnapshot``)."""
        ...


@dataclass(frozen=True, slots=True)
class StoredBatch:
    """One record batch held by :class:`MemoryRaftLog`: its offsets ``base_offset`` to
    ``last_offset`` (both inclusive), partition leader epoch, control flag and bytes."""

    base_offset: int
    last_offset: int
    epoch: int
    is_control: bool
    data: bytes


class MemoryRaftLog:
    """An in-memory :class:`MutableRaftLog` with crash semantics, for tests and the simulation.

    ``flush`` is split in two for the simulation: :meth:`begin_flush` captures the end offset
    to make durable, :meth:`complete_flush` makes it durable unless a truncation happened in
    between (then that flush is void and a later one covers the new tail).
    """

    def __init__(self) -> None:
        self._batches: list[StoredBatch] = []
        self._bases: list[int] = []
        self._epochs: list[tuple[int, int]] = []
        """(epoch, start offset) of each epoch present in the log, ascending."""
        self._start_offset = 0
        self._flushed = 0
        self._hwm = 0
        self._truncations = 0
        self._snapshots: dict[OffsetAndEpoch, bytes] = {}

    # -- RaftLog

    @property
    def log_start_offset(self) -> int:
        """First offset held, inclusive: 0 until :meth:`install_snapshot` or
        :meth:`delete_before_snapshot` moves it to a snapshot's end offset."""
        return self._start_offset

    @property
    def log_end_offset(self) -> int:
        """One past the last batch's last offset; the log start offset when no batch is held."""
        if self._batches:
            return self._batches[-1].last_offset + 1
        return self._start_offset

    @property
    def flushed_offset(self) -> int:
        """Exclusive end of the flushed prefix: what survives :meth:`crash`."""
        return self._flushed

    @property
    def last_fetched_epoch(self) -> int:
        """Epoch of the last batch, else of the latest snapshot, else 0."""
        if self._batches:
            return self._batches[-1].epoch
        latest = self.latest_snapshot_id()
        return latest.epoch if latest is not None else 0

    @property
    def high_watermark(self) -> int:
        """The high watermark (exclusive); :meth:`crash` resets it to the log start offset."""
        return self._hwm

    def _reindex(self) -> None:
        self._bases = [b.base_offset for b in self._batches]
        self._epochs = []
        for batch in self._batches:
            if not self._epochs or self._epochs[-1][0] != batch.epoch:
                self._epochs.append((batch.epoch, batch.base_offset))

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """As :meth:`RaftLog.end_offset_for_epoch`, from each epoch's start offset (``MockLog``):
        an epoch ends where the next held epoch starts. An answer at the earliest snapshot's end
        offset with an older epoch is replaced by that snapshot's id."""
        starts = self._epochs
        if starts and epoch == starts[-1][0]:
            return OffsetAndEpoch(self.log_end_offset, epoch)
        higher = next(((e, s) for e, s in starts if e > epoch), None)
        if higher is None:
            result = OffsetAndEpoch(self.log_end_offset, self.last_fetched_epoch)
        else:
            floor = [(e, s) for e, s in starts if e <= epoch]
            found_epoch = floor[-1][0] if floor else epoch
            result = OffsetAndEpoch(higher[1], found_epoch)
        earliest = self.earliest_snapshot_id()
        if (
            earliest is not None
            and result.offset == earliest.offset
            and result.epoch < earliest.epoch
        ):
            return earliest
        return result

    def read(self, start_offset: int, max_bytes: int) -> bytes:
        """Whole batches from the one holding ``start_offset``, at most ``max_bytes`` but at
        least one batch if any is left; b"" past the end."""
        out = bytearray()
        index = max(bisect.bisect_right(self._bases, start_offset) - 1, 0)
        for batch in self._batches[index:]:
            if batch.last_offset < start_offset:
                continue
            if out and len(out) + len(batch.data) > max_bytes:
                break
            out += batch.data
        return bytes(out)

    def read_records(self, start_offset: int, max_bytes: int) -> bytes:
        """:meth:`read`: memory holds no file to send from."""
        return self.read(start_offset, max_bytes)

    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        """The stored snapshot with the largest end offset (then epoch), or None; the bootstrap
        (0, 0) checkpoint counts if a test stored it."""
        if not self._snapshots:
            return None
        return max(self._snapshots, key=lambda s: (s.offset, s.epoch))

    def earliest_snapshot_id(self) -> OffsetAndEpoch | None:
        """The stored snapshot with the smallest end offset (then epoch), or None."""
        if not self._snapshots:
            return None
        return min(self._snapshots, key=lambda s: (s.offset, s.epoch))

    def snapshot_size(self, snapshot_id: OffsetAndEpoch) -> int | None:
        """Length in bytes of that stored snapshot, None if there is none."""
        data = self._snapshots.get(snapshot_id)
        return None if data is None else len(data)

    def read_snapshot(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> bytes:
        """Bytes ``[position, position + max_bytes)`` of that snapshot; KeyError if it is not
        stored."""
        return self._snapshots[snapshot_id][position : position + max_bytes]

    # -- mutations

    def append(self, batches: bytes) -> None:
        """Append whole batches; each must start at the current end offset."""
        for view in iter_batches(batches):
            expected = self.log_end_offset
            if view.base_offset != expected:
                raise LogInvariantError(
                    f"append at offset {view.base_offset}, log end offset is {expected}"
                )
            if self._batches and view.partition_leader_epoch < self._batches[-1].epoch:
                raise LogInvariantError(
                    f"batch epoch {view.partition_leader_epoch} below the log's last epoch "
                    f"{self._batches[-1].epoch}"
                )
            self._batches.append(
                StoredBatch(
                    view.base_offset,
                    view.base_offset + view.last_offset_delta,
                    view.partition_leader_epoch,
                    view.is_control,
                    view.to_bytes(),
                )
            )
            self._bases.append(view.base_offset)
            if not self._epochs or self._epochs[-1][0] != view.partition_leader_epoch:
                self._epochs.append((view.partition_leader_epoch, view.base_offset))

    def truncate_to(self, offset: int) -> None:
        """Drop every batch at or beyond ``offset`` (which must be a batch boundary)."""
        if offset < self._hwm:
            raise LogInvariantError(f"truncate to {offset} below high watermark {self._hwm}")
        if offset >= self.log_end_offset:
            return
        kept = [b for b in self._batches if b.last_offset < offset]
        if kept and kept[-1].last_offset + 1 != offset and offset > self._start_offset:
            raise LogInvariantError(f"truncation offset {offset} is inside a batch")
        self._batches = kept
        self._reindex()
        self._flushed = min(self._flushed, offset)
        self._truncations += 1

    def flush(self) -> None:
        """Make the whole log durable at once: ``flushed_offset = log_end_offset``."""
        self._flushed = self.log_end_offset

    def begin_flush(self) -> tuple[int, int]:
        """Start a two-step flush: returns the token for :meth:`complete_flush` (the log end
        offset to make durable and the count of truncations so far)."""
        return (self.log_end_offset, self._truncations)

    def complete_flush(self, token: tuple[int, int]) -> None:
        """Finish the flush ``token`` came from: the flushed offset moves up to its end offset
        (capped at the current log end offset), unless a truncation, snapshot install or crash
        happened since."""
        end_offset, truncations = token
        if truncations == self._truncations:
            self._flushed = max(self._flushed, min(end_offset, self.log_end_offset))

    def update_high_watermark(self, offset: int) -> None:
        """Set the high watermark; :class:`LogInvariantError` if it moves backwards or past the
        log end offset."""
        if offset < self._hwm:
            raise LogInvariantError(f"high watermark moved back from {self._hwm} to {offset}")
        if offset > self.log_end_offset:
            raise LogInvariantError(
                f"high watermark {offset} beyond log end offset {self.log_end_offset}"
            )
        self._hwm = offset

    def create_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """Store a frozen snapshot, leaving the log as it is; :class:`LogInvariantError` if it
        ends above the high watermark or below the log start offset."""
        if snapshot_id.offset > self._hwm:
            raise LogInvariantError(
                f"snapshot {snapshot_id} beyond the high watermark {self._hwm}"
            )
        if snapshot_id.offset < self._start_offset:
            raise LogInvariantError(f"snapshot {snapshot_id} below the log start offset")
        self._snapshots[snapshot_id] = bytes(data)

    def install_snapshot(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """Replace the log and every stored snapshot by this one (``truncateToLatestSnapshot``):
        the log becomes empty and durable at its end offset. :class:`LogInvariantError` if it
        ends below the high watermark."""
        if snapshot_id.offset < self._hwm:
            raise LogInvariantError(
                f"installing snapshot {snapshot_id} below the high watermark {self._hwm}"
            )
        # older snapshots go with the log they covered: the earliest snapshot is at the log
        # start (RaftEventSimulationTest's SnapshotAtLogStart)
        self._snapshots = {snapshot_id: bytes(data)}
        self._batches = []
        self._start_offset = snapshot_id.offset
        self._flushed = snapshot_id.offset
        self._reindex()
        self._truncations += 1

    def delete_before_snapshot(self) -> None:
        """Drop the batches and the snapshots below the latest snapshot and move the log start
        offset to its end offset (``deleteBeforeSnapshot``). Nothing changes when that offset is
        not above the log start or not a batch boundary here; :class:`LogInvariantError` if it is
        above the high watermark."""
        latest = self.latest_snapshot_id()
        if latest is None or latest.offset <= self._start_offset:
            return
        if latest.offset > self._hwm:
            raise LogInvariantError(f"log start {latest.offset} beyond the high watermark")
        if not any(b.base_offset == latest.offset for b in self._batches) and latest.offset != self.log_end_offset:
            return  # not a batch boundary of this log: keep the prefix
        self._batches = [b for b in self._batches if b.base_offset >= latest.offset]
        self._start_offset = latest.offset
        self._reindex()
        self._snapshots = {k: v for k, v in self._snapshots.items() if k.offset >= latest.offset}

    def crash(self) -> None:
        """Lose every batch not covered by the flushed offset; the high watermark (never
        durable in KRaft) resets to the log start (``MockLog.reopen``)."""
        self._batches = [b for b in self._batches if b.last_offset < self._flushed]
        self._reindex()
        self._hwm = self._start_offset
        self._truncations += 1

    # -- inspection

    @property
    def batches(self) -> list[StoredBatch]:
        """A copy of the held batches, oldest first (for assertions)."""
        return list(self._batches)
