"""The controller's image rebuilt a slice at a time: a snapshot the core hands over
(:class:`SnapshotLoad`), or the committed image rebuilt from the latest snapshot and the
committed log after it when records applied ahead of their commit must be given up
(:class:`Revert`, where Kafka reverts its timeline data structures to the last committed
offset).

A snapshot of 10^6 partitions takes seconds to replay, and the node must go on fetching,
voting and answering meanwhile, as Kafka's raft thread does while its controller replays a
snapshot on its own event queue. So a load replays at most a budget of records per call
(:meth:`ImageLoad.replay_slice`): first the snapshot's records, then the committed log read
back after it. What arrives meanwhile waits for the whole image, in order: committed batches
(:attr:`ImageLoad.committed`) and requests (:attr:`ImageLoad.requests`). Once the image is
whole the held batches are handed back a budget at a time (:meth:`ImageLoad.take_held`) for the
caller to replay as any committed batch; the load ends when none is left, and the requests run.
The loader replays through the callables it is given and reads no clock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Any

from server.raft.events import CommittedBatch
from server.raft.log import RaftLog, read_batches
from server.raft.types import OffsetAndEpoch
from storage.records import RecordBatch
from storage.snapshot_format import read_snapshot_batches

__all__ = ["SNAPSHOT_LOAD_RECORDS_PER_POLL", "ImageLoad", "Revert", "SnapshotLoad"]

SNAPSHOT_LOAD_RECORDS_PER_POLL = 20_000
"""Records of an image being rebuilt that one call replays at most (about a quarter of a
second)."""

Replay = Callable[[bytes | None, int], None]
"""``replay(value, offset)``: replay one record."""


class ImageLoad:
    """An image being rebuilt from snapshot ``snapshot_id``'s records (``records``; None once
    every one is replayed) and the committed batches after it (``log``), started at
    ``started_ms``."""

    describe = "rebuilt the image"
    """What the load did, for the line logged when the image is whole."""

    def __init__(self, snapshot_id: OffsetAndEpoch, records: Iterable[bytes | None], started_ms: int,
                 log: Iterable[CommittedBatch] = (), requests: Iterable[Any] = ()) -> None:
        self.snapshot_id = snapshot_id
        self.records: Iterator[bytes | None] | None = iter(records)
        self.started_ms = started_ms
        self.log: deque[CommittedBatch] = deque(log)
        self.replayed = 0
        """Records replayed so far."""
        self.replayed_offset = 0
        """The offset after the last record of the snapshot or log replayed (0 before the
        snapshot's last record)."""
        self.whole = False
        """The snapshot and the log are replayed (what arrived meanwhile may not be): the
        caller sets it once :meth:`replay_slice` gave a budget back."""
        self.committed: deque[CommittedBatch] = deque()
        """Batches committed meanwhile, in order, held for the whole image."""
        self.requests: deque[Any] = deque(requests)
        """Requests that arrived meanwhile, in order, held for the whole image."""

    def replay_slice(self, budget: int, replay_snapshot: Replay, replay_log: Replay) -> int | None:
        """Replay up to ``budget`` records: the snapshot's (``replay_snapshot``, at the offset
        before the snapshot's), then the log's data records (``replay_log``, at their offsets).
        The budget left once both are replayed, None while records remain."""
        if self.records is not None:
            offset, count = self.snapshot_id.offset - 1, 0
            for value in islice(self.records, budget):
                replay_snapshot(value, offset)
                count += 1
            self.replayed += count
            if count == budget:
                return None  # there may be more
            self.records = None
            self.replayed_offset = self.snapshot_id.offset
            budget -= count
        log = self.log
        while log and budget > 0:
            batch = log.popleft()
            if not batch.is_control:
                for offset, value in enumerate(RecordBatch(batch.data).iter_values(), batch.base_offset):
                    replay_log(value, offset)
            self.replayed_offset = batch.last_offset + 1
            count = batch.last_offset - batch.base_offset + 1
            self.replayed += count
            budget -= count
        return None if log else budget

    def take_held(self, budget: int) -> list[CommittedBatch]:
        """The held committed batches to replay now, in order, taken off the queue: batches
        while ``budget`` records are not used up (the last may go beyond it)."""
        taken: list[CommittedBatch] = []
        committed = self.committed
        while committed and budget > 0:
            batch = committed.popleft()
            taken.append(batch)
            budget -= batch.last_offset - batch.base_offset + 1
        return taken


class SnapshotLoad(ImageLoad):
    """A snapshot the core handed over (``load_snapshot``): it replaces the image."""

    describe = "loaded snapshot"


class Revert(ImageLoad):
    """Going back to the committed image (up to ``end``): the latest snapshot at or below
    ``end`` and the committed log after it. ``reactivate``: broker sessions start afresh at the
    end if the node is still the active controller."""

    describe = "went back to the committed image"

    def __init__(self, snapshot_id: OffsetAndEpoch, records: Iterable[bytes | None], started_ms: int,
                 log: Iterable[CommittedBatch], *, reactivate: bool) -> None:
        super().__init__(snapshot_id, records, started_ms, log)
        self.reactivate = reactivate

    @classmethod
    def from_log(cls, raft_log: RaftLog, end: int, now_ms: int, *, reactivate: bool) -> Revert:
        """The rebuild of the image committed up to ``end`` from ``raft_log``: its latest
        snapshot when that lies in ``(0, end]`` (else from the log start offset, snapshot id
        ``(0, 0)``), then the batches read back up to ``end``. Raises RuntimeError when the log
        cannot be read back that far."""
        snapshot = raft_log.latest_snapshot_id()
        records: Iterable[bytes | None] = ()
        start = OffsetAndEpoch(0, 0)
        if snapshot is not None and 0 < snapshot.offset <= end:
            size = raft_log.snapshot_size(snapshot)
            assert size is not None
            records = read_snapshot_batches(raft_log.read_snapshot(snapshot, 0, size)).iter_data_records()
            start, offset = snapshot, snapshot.offset
        else:
            offset = raft_log.log_start_offset
        log: list[CommittedBatch] = []
        for stored in read_batches(raft_log, offset, end):
            log.append(CommittedBatch(stored.base_offset, stored.last_offset, stored.partition_leader_epoch,
                                      stored.is_control, stored.to_bytes()))
            offset = stored.last_offset + 1
        if offset < end:
            raise RuntimeError(f"the committed log cannot be read back from offset {offset} up to {end}")
        return cls(start, records, now_ms, log, reactivate=reactivate)
