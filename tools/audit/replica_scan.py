"""Reading one topic-partition's copies together: each copy's batches, as the readers
(:mod:`tools.audit.broker_dirs`) give them, are folded into a :class:`CopyScan` whose memory does
not grow with the copy's size, and :func:`scan_copies` reads the copies in offset order and finds
where each pair of them parts (a :class:`PartitionScan`). Scans of consecutive offset ranges
combine, so a huge partition is read by many tasks. :mod:`tools.audit.replica_checks` judges what
a scan found.

A follower appends the leader's batches as they are (``Partition.appendRecordsToFollowerOrFuture
Replica``, ``UnifiedLog.appendAsFollower``): below the point where two replicas' histories part,
their batches are byte-identical, so base offset, last offset, partition leader epoch and CRC
compare them without decompressing anything.
"""

from __future__ import annotations

import heapq
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from storage.leader_epoch import EpochEntry


class BatchSummary(NamedTuple):
    """One batch's header as a segment holds it: offsets (inclusive), partition leader epoch,
    stored CRC and whether it matches, and where it is (file name, byte position and size);
    with a deep read, why its records could not be decoded. A tuple: a scan makes one per batch
    read, and keeps few."""

    base_offset: int
    last_offset: int
    epoch: int
    crc: int
    crc_valid: bool
    file: str
    position: int
    size: int
    records_error: str | None = None
    """With a deep read: why its records could not be decoded (None: they could, or were not read)."""

    def same_as(self, other: BatchSummary) -> bool:
        """Both replicas hold this batch: same offsets, epoch and CRC."""
        return self[:4] == other[:4]


class BadBytes(NamedTuple):
    """Bytes of a segment that are no batch: ``detail`` says why; ``at_tail``: they run to the
    end of the replica's last segment (what recovery truncates)."""

    file: str
    position: int
    size: int
    detail: str
    at_tail: bool


class ProducerSnapshotFile(NamedTuple):
    """A ``<offset>.snapshot`` producer-state file of a copy: its offset, its producers, or why it
    could not be read."""

    file: str
    offset: int
    producers: int
    error: str | None


@dataclass
class ReplicaView:
    """What one broker's log directory says of its copy of a partition before any segment is
    read: its ``leader-epoch-checkpoint`` entries (None when the file is missing or unreadable,
    ``epochs_error`` saying why), the partition's entries in the log directory's offset
    checkpoints (None where it has none), its ``partition.metadata`` topic id (base64, None when
    missing) and its producer-state files. A copy whose directory is gone but whose high
    watermark the checkpoint kept has ``on_disk`` false. Its batches are read into a
    :class:`CopyScan`."""

    node: str
    broker_id: int | None
    epochs: list[EpochEntry] | None = None
    epochs_error: str | None = None
    high_watermark: int | None = None
    recovery_point: int | None = None
    log_start_offset: int | None = None
    cleaner_offset: int | None = None
    topic_id: str | None = None
    on_disk: bool = True
    """False: the log directory has no copy, only the high watermark its checkpoint kept."""
    producer_snapshots: list[ProducerSnapshotFile] = field(default_factory=list)


class CopyScan:
    """What reading one copy's batches (all of them, or those starting in an offset range)
    leaves, in memory that does not grow with the copy's size: counts, the first, last and last
    valid batch, the runs of valid batches of one leader epoch (``[start, end, epoch,
    last_base, last_base_acked]``: offsets ``[start, end)``, the base offset of the run's last
    batch and of its last batch below the copy's high watermark, -1 for none), and what the
    checks report batch by batch: unframeable bytes (with the offset after the batch before them,
    None for none), batches failing their CRC or (deep read)
    their decoding, pairs of consecutive batches whose offsets do not increase or leave a hole
    above the cleaner's offset, and per leader epoch the first batch the epoch checkpoint does
    not name. Runs grow with the leader epochs of the log, findings with what is wrong in it,
    nothing with its bytes. Scans of consecutive offset ranges combine with :meth:`extend`."""

    __slots__ = ("batches", "bytes_read", "first", "last", "last_valid", "runs", "bad", "flagged", "disorder",
                 "misplaced")

    def __init__(self) -> None:
        self.batches = 0
        self.bytes_read = 0
        self.first: BatchSummary | None = None
        self.last: BatchSummary | None = None
        self.last_valid: BatchSummary | None = None
        self.runs: list[list[int]] = []
        self.bad: list[tuple[BadBytes, int | None]] = []
        self.flagged: list[BatchSummary] = []
        self.disorder: list[tuple[BatchSummary, BatchSummary]] = []
        self.misplaced: dict[int, BatchSummary] = {}

    def __getstate__(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        for name, value in zip(self.__slots__, state, strict=True):
            setattr(self, name, value)

    def add(self, item: BatchSummary | BadBytes, view: ReplicaView, starts: list[int]) -> bool:
        """Take the next item of the copy (file order); ``starts`` are the start offsets of
        ``view.epochs``. True when it is a batch that passes its CRC. (Once per batch read:
        written for speed.)"""
        if type(item) is BadBytes:
            self.bad.append((item, None if self.last is None else self.last[1] + 1))
            self.bytes_read += item.size
            return False
        base, last_offset, epoch, _crc, valid, _file, _position, size, error = item  # type: ignore[misc]
        self.batches += 1
        self.bytes_read += size
        prev = self.last
        if prev is None:
            self.first = item  # type: ignore[assignment]
        elif base <= prev[1] or (base > prev[1] + 1 and base > (view.cleaner_offset or 0)):
            self.disorder.append((prev, item))  # type: ignore[arg-type]
        self.last = item  # type: ignore[assignment]
        if not valid:
            self.flagged.append(item)  # type: ignore[arg-type]
            return False
        if error is not None:
            self.flagged.append(item)  # type: ignore[arg-type]
        self.last_valid = item  # type: ignore[assignment]
        acked = view.high_watermark
        runs = self.runs
        if runs and runs[-1][2] == epoch:
            run = runs[-1]
            run[1] = last_offset + 1
            run[3] = base
            if acked is not None and base < acked:
                run[4] = base
        else:
            runs.append([base, last_offset + 1, epoch, base, base if acked is not None and base < acked else -1])
        if view.epochs is not None and epoch not in self.misplaced:
            i = bisect_right(starts, base) - 1
            if i < 0 or view.epochs[i].epoch != epoch:
                self.misplaced[epoch] = item  # type: ignore[assignment]
        return True

    def extend(self, later: CopyScan, view: ReplicaView) -> None:
        """Append the scan of the offset range that follows this one's."""
        self.batches += later.batches
        self.bytes_read += later.bytes_read
        prev, b = self.last, later.first
        if prev is not None and b is not None and (b.base_offset <= prev.last_offset or (
                b.base_offset > prev.last_offset + 1 and b.base_offset > (view.cleaner_offset or 0))):
            self.disorder.append((prev, b))
        self.disorder += later.disorder
        self.first = self.first or later.first
        self.last = later.last or self.last
        self.last_valid = later.last_valid or self.last_valid
        runs = later.runs
        if self.runs and runs and self.runs[-1][2] == runs[0][2]:
            run, head = self.runs[-1], runs[0]
            self.runs[-1] = [run[0], head[1], run[2], head[3], max(run[4], head[4])]
            runs = runs[1:]
        self.runs += [list(r) for r in runs]
        after = None if prev is None else prev.last_offset + 1  # the offset before later's first bad bytes
        self.bad += [(bad, after if offset is None else offset) for bad, offset in later.bad]
        self.flagged += later.flagged
        for epoch, b in later.misplaced.items():
            self.misplaced.setdefault(epoch, b)

    def log_start(self, view: ReplicaView) -> int:
        """The first offset the copy holds: its checkpointed log start offset or its first
        batch's base offset, whichever is larger (0 for an empty log)."""
        first = self.first.base_offset if self.first is not None else 0
        return max(first, view.log_start_offset or 0)

    def log_end(self, view: ReplicaView) -> int:
        """The offset after its last valid batch (its log end offset once recovered)."""
        return self.last_valid.last_offset + 1 if self.last_valid is not None else self.log_start(view)

    def spans(self) -> list[tuple[int, int, int]]:
        """``(start, end, epoch)`` of each run (end exclusive)."""
        return [(r[0], r[1], r[2]) for r in self.runs]


class CopyStream(Protocol):
    """One copy's items in file order, as a reader gives them for an offset range: ``prior``,
    the valid batch that starts before the range and reaches into it (None: none, or the range
    starts the log); set when the iteration ends, ``exhausted``, true when it ended because the
    copy's last segment did (false: a batch at or past the range's end stopped it), and
    ``after``, the first valid batch at or past the range's end (None: none)."""

    prior: BatchSummary | None
    after: BatchSummary | None
    exhausted: bool

    def __iter__(self) -> Iterator[BatchSummary | BadBytes]: ...


class NoBatches:
    """The stream of a copy with nothing on disk."""

    prior: BatchSummary | None = None
    after: BatchSummary | None = None
    exhausted: bool = True

    def __iter__(self) -> Iterator[BatchSummary | BadBytes]:
        return iter(())


@dataclass
class PartitionScan:
    """The scans of a partition's copies (by node) over one offset range or all of them, and for
    each ordered pair ``(reference, other)`` compared, the first offset from which ``other``
    holds what ``reference`` does not (absent: none in the range). Bounded as each
    :class:`CopyScan` is."""

    copies: dict[str, CopyScan]
    compared: set[tuple[str, str]]
    differences: dict[tuple[str, str], int]

    def extend(self, later: PartitionScan, views: Sequence[ReplicaView]) -> None:
        """Append the scan of the offset range that follows this one's."""
        for view in views:
            self.copies[view.node].extend(later.copies[view.node], view)
        for pair, offset in later.differences.items():
            self.differences.setdefault(pair, offset)


def compared_pairs(views: Sequence[ReplicaView], reference: str | None) -> list[tuple[str, str]]:
    """The ordered pairs of copies on disk a scan compares: the reference with each other copy
    when it is known before the read (the leader the metadata names), else every pair."""
    nodes = [v.node for v in views if v.on_disk]
    if reference in nodes:
        return [(reference, n) for n in nodes if n != reference]
    return [(a, b) for a in nodes for b in nodes if a != b]


def scan_copies(views: Sequence[ReplicaView], streams: Sequence[CopyStream],
                pairs: Sequence[tuple[str, str]]) -> PartitionScan:
    """Read the copies' streams together, in offset order, into a :class:`PartitionScan`: each
    copy's :class:`CopyScan`, and for each pair ``(reference, other)`` the first batch of
    ``other`` (from the larger of both copies' checkpointed log start and cleaner offsets) that
    the reference does not hold: a batch starting past the reference's last valid batch, or one
    overlapping a valid batch of the reference with other offsets, epoch or CRC (followers copy
    the leader's batches as they are, ``Partition.appendRecordsToFollowerOrFutureReplica``).
    Offsets where the reference holds no valid batch are not compared: its own checks report
    them. A reference with no valid batch holds nothing. Memory: one batch ahead per copy, and
    what the copies' scans keep."""
    index = {view.node: i for i, view in enumerate(views)}
    scans = [CopyScan() for _ in views]
    starts = [[e.start_offset for e in view.epochs or ()] for view in views]
    iters = [iter(s) for s in streams]
    against: list[list[tuple[int, int]]] = [[] for _ in views]  # per copy: (reference index, low)
    for ref_node, node in pairs:
        ref, other = views[index[ref_node]], views[index[node]]
        low = max(ref.log_start_offset or 0, other.log_start_offset or 0, ref.cleaner_offset or 0,
                  other.cleaner_offset or 0)
        against[index[node]].append((index[ref_node], low))
    differences: dict[tuple[str, str], int] = {}

    def pull(i: int) -> BatchSummary | None:
        scan, view, copy_starts = scans[i], views[i], starts[i]
        for item in iters[i]:
            if scan.add(item, view, copy_starts):
                return item  # type: ignore[return-value]
        return None

    heads: list[BatchSummary | None] = []  # each copy's next valid batch (past the range: not scanned, only met)
    heap = []
    for i in range(len(views)):
        head = pull(i)
        heads.append(streams[i].after if head is None else head)
        if head is not None:
            heap.append((head.base_offset, i))
    heapq.heapify(heap)
    prev: list[BatchSummary | None] = [s.prior for s in streams]  # known once each read has begun
    while heap:
        _, i = heapq.heappop(heap)
        b = heads[i]
        assert b is not None
        if against[i]:
            open_pairs = []
            for j, low in against[i]:
                d = None if b.base_offset < low else _differs(b, prev[j], heads[j], streams[j].exhausted)
                if d is None:
                    open_pairs.append((j, low))
                else:
                    differences[(views[j].node, views[i].node)] = d
            against[i] = open_pairs
        prev[i] = b
        head = pull(i)
        heads[i] = streams[i].after if head is None else head
        if head is not None:
            heapq.heappush(heap, (head.base_offset, i))
    return PartitionScan({view.node: scan for view, scan in zip(views, scans, strict=True)},
                         set(pairs), differences)


def _differs(b: BatchSummary, prev: BatchSummary | None, head: BatchSummary | None, exhausted: bool) -> int | None:
    """Where ``b`` of one copy parts from the reference, whose last valid batch read so far is
    ``prev`` and next one ``head`` (the scan's order puts ``head`` at or past ``b``'s base
    offset; None with ``exhausted``: the reference has no more); None when it does not."""
    base = b.base_offset
    if head is None and exhausted and (prev is None or base > prev.last_offset):
        return base
    if head is not None and head.base_offset == base:
        match = head
    elif prev is not None and prev.last_offset >= base:
        match = prev
    elif head is not None and head.base_offset <= b.last_offset:
        match = head
    else:
        return None  # the reference holds nothing valid there
    return None if match[:4] == b[:4] else max(base, match.base_offset)
