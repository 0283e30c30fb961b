"""Brokers' log directories (their ``log.dirs``) as the replica audit reads them: telling them
apart from metadata directories, their offset checkpoints, and every topic-partition copy in
them, batch by batch. Read-only: nothing here writes, locks or recovers a file.

Layout read (``LogManager``, ``UnifiedLog``, ``LocalLog``)::

    <log dir>/meta.properties                       node.id, directory.id
    <log dir>/replication-offset-checkpoint         high watermarks      storage.offset_checkpoint
    <log dir>/recovery-point-offset-checkpoint      recovery points
    <log dir>/log-start-offset-checkpoint           log start offsets
    <log dir>/cleaner-offset-checkpoint             compacted up to
    <log dir>/<topic>-<partition>/<20-digit base offset>.log      segments
    <log dir>/<topic>-<partition>/leader-epoch-checkpoint         storage.leader_epoch
    <log dir>/<topic>-<partition>/partition.metadata              storage.partition_metadata
    <log dir>/__cluster_metadata-0/                  a broker's copy of the metadata log

Partition directories renamed for deletion (``.<id>-delete``), a JBOD move in progress
(``.<id>-future``) or a replica the broker found stray (``.<id>-stray``, KIP-858) are listed
with their suffix and not audited as replicas.

A segment is read in chunks of :data:`READ_CHUNK_BYTES` (grown to fit one batch larger than
that), and a copy's batches are summarised as they are read
(:class:`~tools.audit.replica_checks.CopyScan`), so the memory of a read is a chunk per copy
being read, whatever the size of the files.
"""

from __future__ import annotations

import glob
import io
import os
import re
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import accumulate

from kwire.topics import METADATA_PARTITION_DIR
from tools.audit.replica_scan import BadBytes, BatchSummary, ProducerSnapshotFile, ReplicaView
from tools.audit.scan import NodeDir, named_item, node_names

READ_CHUNK_BYTES = 8 * 1024 * 1024
READ_AHEAD_BYTES = 64 * 1024 * 1024
PREFETCH_THREADS = 4
SEGMENT_RE = re.compile(r"^(\d{20})\.log$")
PARTITION_DIR_RE = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)(?:\.(?P<id>[0-9a-f]{32})-(?P<suffix>delete|future|stray))?$")


@dataclass(frozen=True, slots=True)
class AuditDir:
    """One directory given to ``kwire audit``: ``metadata_dir`` is its ``__cluster_metadata-0``
    (None when it holds no metadata log), ``broker``: it holds topic-partition directories or a
    broker's offset checkpoints (a directory of ``log.dirs``). ``node_id`` (the broker id of a
    broker log directory), ``directory_id`` and ``cluster_id`` come from its ``meta.properties``
    whether or not the directory was named on the command line; ``meta`` false: it has no
    readable ``meta.properties``, and ``node_id`` is then the trailing digits of an explicit
    name (``b11=DIR``: 11), else None. ``explicit``: it was given as ``name=DIR``."""

    name: str
    path: str
    metadata_dir: str | None
    broker: bool
    node_id: int | None
    directory_id: str | None
    cluster_id: str | None = None
    meta: bool = False
    explicit: bool = False


@dataclass
class PartitionDir:
    """A topic-partition directory of a log directory; ``suffix`` is ``delete``, ``future`` or
    ``stray`` for one Kafka renamed, None for a live replica."""

    topic: str
    partition: int
    path: str
    suffix: str | None = None


@dataclass
class LogDir:
    """A broker log directory: its node name, broker id, offset checkpoints (``(topic,
    partition) -> offset``; ``errors`` names each that could not be read) and partitions, and the
    ``directory.id`` and ``cluster.id`` of its ``meta.properties``."""

    node: str
    path: str
    broker_id: int | None
    high_watermarks: dict[tuple[str, int], int] = field(default_factory=dict)
    recovery_points: dict[tuple[str, int], int] = field(default_factory=dict)
    log_starts: dict[tuple[str, int], int] = field(default_factory=dict)
    cleaner_offsets: dict[tuple[str, int], int] = field(default_factory=dict)
    partitions: list[PartitionDir] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    directory_id: str | None = None
    cluster_id: str | None = None


def _is_broker_dir(path: str, names: Sequence[str]) -> bool:
    from storage.offset_checkpoint import OFFSET_CHECKPOINT_FILES

    if any(n in OFFSET_CHECKPOINT_FILES for n in names):
        return True
    return any(n != METADATA_PARTITION_DIR and PARTITION_DIR_RE.match(n) and os.path.isdir(os.path.join(path, n))
               for n in names)


def expand_dir_args(items: Sequence[str]) -> list[tuple[str | None, str]]:
    """``[(explicit name or None, path)]`` from ``DIR``, ``name=DIR`` or glob items (a glob
    matching nothing, or naming a file, is a usage error: ValueError)."""
    out: list[tuple[str | None, str]] = []
    for raw in items:
        named = named_item(raw)
        if named is None:
            continue
        name, item = named
        if glob.has_magic(item):
            matches = sorted(p for p in glob.glob(item) if os.path.isdir(p))
            if not matches:
                raise ValueError(f"no directory matches {item!r}")
            if name is not None and len(matches) > 1:
                raise ValueError(f"{name}={item} matches {len(matches)} directories; a name needs one")
            out += [(name, p) for p in matches]
        else:
            out.append((name, item))
    if not out:
        raise ValueError("no directories given")
    return out


def classify_dirs(items: Sequence[str]) -> list[AuditDir]:
    """Each directory of ``items`` (see :func:`expand_dir_args`), told apart: a metadata log
    directory (``__cluster_metadata-0`` in it, or that directory itself), a broker log
    directory, or both (a broker's first log dir holds its copy of the metadata log). Names come
    from ``name=`` or ``meta.properties`` (:func:`tools.audit.scan.node_names`); ids from
    ``meta.properties`` in either case (:class:`AuditDir`; :mod:`tools.audit.identity` reports
    directories whose ids disagree). Raises
    ValueError for a directory that is neither, or is missing, or for colliding names."""
    from storage.errors import StorageError
    from storage.meta_properties import read_meta_properties

    found = []
    for name, raw in expand_dir_args(items):
        path = os.path.abspath(raw)
        if os.path.basename(path) == METADATA_PARTITION_DIR:
            path = os.path.dirname(path)
        if not os.path.isdir(path):
            raise ValueError(f"no directory at {raw}")
        names = os.listdir(path)
        metadata_dir = os.path.join(path, METADATA_PARTITION_DIR) if METADATA_PARTITION_DIR in names else None
        broker = _is_broker_dir(path, names)
        if metadata_dir is None and not broker:
            raise ValueError(f"{raw} holds neither a metadata log ({METADATA_PARTITION_DIR}) nor topic partitions")
        try:  # a name labels the directory; what it says of itself is read all the same
            meta = read_meta_properties(path)
        except StorageError:
            meta = None
        found.append((path, metadata_dir, broker, meta, NodeDir(
            path, os.path.basename(path), explicit=name,
            node_id=meta.node_id if meta else None,
            directory_id=str(meta.directory_id) if meta and meta.directory_id else None)))
    names = node_names([d for *_, d in found])
    out = []
    for n, (path, mdir, broker, meta, d) in zip(names, found, strict=True):
        node_id = d.node_id
        if node_id is None and d.explicit is not None:
            digits = re.search(r"(\d+)$", d.explicit)
            node_id = int(digits.group(1)) if digits else None
        out.append(AuditDir(n, path, mdir, broker, node_id, d.directory_id,
                            cluster_id=meta.cluster_id if meta else None, meta=meta is not None and meta.node_id is not None,
                            explicit=d.explicit is not None))
    return out


def read_log_dir(audit_dir: AuditDir) -> LogDir:
    """The offset checkpoints and partition directories of a broker log directory. A
    checkpoint that cannot be read is named in ``errors`` and counts as absent."""
    from storage.errors import StorageError
    from storage.offset_checkpoint import (
        CLEANER_OFFSET_CHECKPOINT,
        LOG_START_OFFSET_CHECKPOINT,
        RECOVERY_POINT_OFFSET_CHECKPOINT,
        REPLICATION_OFFSET_CHECKPOINT,
        read_offset_checkpoint,
    )

    log_dir = LogDir(audit_dir.name, audit_dir.path, audit_dir.node_id, directory_id=audit_dir.directory_id,
                     cluster_id=audit_dir.cluster_id)
    for file_name, attr in ((REPLICATION_OFFSET_CHECKPOINT, "high_watermarks"),
                            (RECOVERY_POINT_OFFSET_CHECKPOINT, "recovery_points"),
                            (LOG_START_OFFSET_CHECKPOINT, "log_starts"),
                            (CLEANER_OFFSET_CHECKPOINT, "cleaner_offsets")):
        try:
            setattr(log_dir, attr, read_offset_checkpoint(os.path.join(audit_dir.path, file_name)) or {})
        except StorageError as exc:
            log_dir.errors.append(f"{file_name}: {exc}")
    for entry in sorted(os.listdir(audit_dir.path)):
        match = PARTITION_DIR_RE.match(entry)
        path = os.path.join(audit_dir.path, entry)
        if match is None or entry == METADATA_PARTITION_DIR or not os.path.isdir(path):
            continue
        log_dir.partitions.append(PartitionDir(match["topic"], int(match["partition"]), path, match["suffix"]))
    return log_dir


def segment_paths(partition_dir: str) -> list[str]:
    """The ``.log`` segments of a partition directory, in base offset order."""
    try:
        names = os.listdir(partition_dir)
    except OSError:
        return []
    return [os.path.join(partition_dir, n) for n in sorted(names) if SEGMENT_RE.match(n)]


class ReadAhead:
    """Asks the kernel to read file ranges before the scan needs them (``posix_fadvise``
    ``WILLNEED``), about ``window`` bytes ahead of the range being read: a scan of thousands of
    small segments is otherwise bound by each read's latency. Advice only: on a system without
    ``posix_fadvise``, or for a file that cannot be opened, nothing happens. A Spark task uses it:
    there the CPU is the limit, and :class:`Prefetch`'s copies cost more than the waits they save
    (``local[2]`` over 10 GiB cold: 31.9 s with this, 37.1 s with one prefetch thread per task).
    (Issuing the advice from a thread of its own measured no faster.)"""

    def __init__(self, ranges: Sequence[tuple[str, int, int]], window: int = READ_AHEAD_BYTES) -> None:
        self.ranges = ranges
        self.window = window
        self.ends = list(accumulate(end - start for _, start, end in ranges))
        self.issued = 0

    def reading(self, i: int) -> None:
        """The scan is about to read ``ranges[i]``: advise every range up to ``window`` bytes past it."""
        advise = getattr(os, "posix_fadvise", None)
        if advise is None:
            return
        wanted = max(i + 1, bisect_right(self.ends, (self.ends[i - 1] if i else 0) + self.window))
        for path, start, end in self.ranges[self.issued:wanted]:
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            try:  # a large file's first window only: past it the kernel's own read-ahead follows the scan
                advise(fd, start, min(end - start, self.window), os.POSIX_FADV_WILLNEED)
            except OSError:
                pass
            finally:
                os.close(fd)
        self.issued = max(self.issued, wanted)


class Prefetch:
    """Reads the byte ranges the scan needs next on ``threads`` threads, at most ``window``
    bytes ahead of it, each range of at most ``max_range`` bytes whole (a larger one the scan
    reads itself, in chunks, the kernel's read-ahead following it). A cold scan of thousands of
    small segments is otherwise bound by one read's latency at a time; reads on threads keep
    several in flight, as ``cat`` of eight files at a time does: 10 GiB over 3,000 copies, cold,
    in 30.8 s where :class:`ReadAhead`'s advice took 46.7 s and no help 1.2 times that. The scan
    calls :meth:`take` for each range, about in order; :meth:`close` stops the threads."""

    def __init__(self, ranges: Sequence[tuple[str, int, int]], threads: int = PREFETCH_THREADS,
                 window: int = READ_AHEAD_BYTES, max_range: int = READ_CHUNK_BYTES) -> None:
        self.ranges = ranges
        self.window, self.max_range = window, max_range
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="kwire-audit-prefetch")
        self._futures: dict[int, Future[bytes | None]] = {}
        self._next = 0
        self._ahead = 0
        self._taken: set[int] = set()

    def _size(self, i: int) -> int:
        _, start, end = self.ranges[i]
        return end - start

    def _fill(self) -> None:
        while self._next < len(self.ranges) and (not self._futures or self._ahead + self._size(self._next) <= self.window):
            if self._next not in self._taken:
                size = self._size(self._next)
                if size <= self.max_range:
                    self._futures[self._next] = self._pool.submit(_read_range, *self.ranges[self._next])
                    self._ahead += size
            self._next += 1

    def take(self, i: int) -> bytes | None:
        """``ranges[i]``'s bytes, read ahead; None when it was too large to read whole, could
        not be read, or is taken before its turn came (the scan then reads it, and reports what
        fails). Ranges are best taken in order; one taken early is not read ahead any more."""
        self._fill()
        future = self._futures.pop(i, None)
        if future is None:
            if i >= self._next:
                self._taken.add(i)
            return None
        data = future.result()
        self._ahead -= self._size(i)
        self._fill()
        return data

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> Prefetch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _read_range(path: str, start: int, end: int) -> bytes | None:
    try:
        with open(path, "rb") as f:
            f.seek(start)
            return f.read(end - start)
    except OSError:
        return None


def iter_segment(path: str, last_segment: bool, chunk_bytes: int = READ_CHUNK_BYTES, start: int = 0,
                 end: int | None = None, deep: bool = False, data: bytes | None = None) -> Iterator[BatchSummary | BadBytes]:
    """The batches of one segment's bytes ``[start, end)`` (``start`` at a batch boundary; to
    the end of the file by default), read ``chunk_bytes`` at a time, as summaries (CRC checked);
    then, if bytes follow that are no batch (a torn tail, an impossible size or magic), one
    :class:`BadBytes` covering them to ``end``, after which nothing more is read (Kafka's
    recovery stops there too). ``last_segment``: these bytes end the partition's last segment,
    so bad bytes there are its tail. ``deep``: every batch that passes its CRC also has its
    records decoded (:func:`records_error`). ``data``: those bytes, read already
    (:class:`Prefetch`). Never raises for bad content; an unreadable file is one BadBytes."""
    from storage.batch_scan import batch_headers
    from storage.errors import CorruptRecordError

    file_name = os.path.basename(path)
    try:
        f = open(path, "rb") if data is None else io.BytesIO(data)  # noqa: SIM115 - closed below
    except OSError as exc:
        yield BadBytes(file_name, start, 0, f"unreadable: {exc}", last_segment)
        return
    with f:
        if data is not None:
            stop = start + len(data)
        else:
            stop = os.fstat(f.fileno()).st_size if end is None else end
            f.seek(start)
        buf = b""
        base = start  # file position of buf[0]
        while True:
            pos = 0
            try:
                for position, size, base_offset, last_offset, epoch, crc, valid in batch_headers(buf):
                    error = records_error(memoryview(buf)[position:position + size]) if deep and valid else None
                    yield BatchSummary(base_offset, last_offset, epoch, crc, valid, file_name, base + position, size,
                                       error)
                    pos = position + size
            except CorruptRecordError as exc:
                yield BadBytes(file_name, base + pos, stop - base - pos, f"unframeable bytes: {exc}", last_segment)
                return
            rest = buf[pos:]
            base += pos
            want = min(max(chunk_bytes, _needed(rest) - len(rest)), stop - base - len(rest))
            try:
                more = f.read(want) if want > 0 else b""
            except OSError as exc:
                yield BadBytes(file_name, base, stop - base, f"unreadable: {exc}", last_segment)
                return
            if not more:
                if rest:
                    yield BadBytes(file_name, base, len(rest), f"torn batch: {len(rest)} bytes at the end of the file",
                                   last_segment)
                return
            buf = rest + more


def records_error(batch_bytes: memoryview) -> str | None:
    """Why a batch's records do not decode, None when they do: the codec's payload, every
    record's framing and offset, the record count (``DefaultRecordBatch``'s iterators), and a
    control batch's one record, an ABORT or COMMIT marker (``EndTransactionMarker``) or another
    known control type. The records are checked by ``RecordBatch.validate_records`` (compiled
    when built)."""
    from storage.control import ControlRecordType, EndTransactionMarker, parse_control_key
    from storage.records import RecordBatch

    try:
        batch = RecordBatch(batch_bytes)
        batch.validate_records()
        if batch.is_control:
            records = batch.records()
            if len(records) != 1:
                return f"a control batch of {len(records)} records"
            control_type = parse_control_key(records[0].key)
            if control_type in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
                EndTransactionMarker.deserialize(control_type, records[0].value or b"")
    except Exception as exc:  # noqa: BLE001 - CompressionError, InvalidRecordError, ...: bad bytes, not a bug
        return f"{type(exc).__name__}: {exc}"
    return None


def read_producer_snapshots(partition_dir: str) -> list[ProducerSnapshotFile]:
    """The ``<offset>.snapshot`` producer-state files of a partition directory, decoded."""
    from kwire.wire import DecodeError
    from storage.errors import StorageError
    from storage.producer_snapshot import decode_producer_snapshot, offset_from_snapshot_name

    out = []
    for name in sorted(os.listdir(partition_dir)):
        offset = offset_from_snapshot_name(name)
        if offset is None:
            continue
        try:
            with open(os.path.join(partition_dir, name), "rb") as f:
                producers, error = len(decode_producer_snapshot(f.read())), None
        except (OSError, StorageError, DecodeError) as exc:
            producers, error = 0, str(exc)
        out.append(ProducerSnapshotFile(name, offset, producers, error))
    return out


def _needed(rest: bytes) -> int:
    """Bytes the batch starting ``rest`` needs in all (its size field, once there)."""
    from storage.batch_layout import LOG_OVERHEAD

    if len(rest) < LOG_OVERHEAD:
        return LOG_OVERHEAD
    return int.from_bytes(rest[8:12], "big", signed=True) + LOG_OVERHEAD


def open_replica(log_dir: LogDir, part: PartitionDir) -> ReplicaView:
    """One partition copy of ``log_dir`` without its segments: its epoch checkpoint, topic id,
    and its entries in the log directory's offset checkpoints."""
    from storage.errors import StorageError
    from storage.leader_epoch import LEADER_EPOCH_CHECKPOINT_FILE, decode_checkpoint
    from storage.partition_metadata import PARTITION_METADATA_FILE, decode_partition_metadata

    key = (part.topic, part.partition)
    view = ReplicaView(
        log_dir.node, log_dir.broker_id,
        high_watermark=log_dir.high_watermarks.get(key), recovery_point=log_dir.recovery_points.get(key),
        log_start_offset=log_dir.log_starts.get(key), cleaner_offset=log_dir.cleaner_offsets.get(key),
    )
    epoch_path = os.path.join(part.path, LEADER_EPOCH_CHECKPOINT_FILE)
    try:
        with open(epoch_path, "rb") as f:
            view.epochs = decode_checkpoint(f.read(), epoch_path)
    except (OSError, StorageError) as exc:
        view.epochs_error = str(exc)
    try:
        with open(os.path.join(part.path, PARTITION_METADATA_FILE), "rb") as f:
            view.topic_id = str(decode_partition_metadata(f.read()))
    except (OSError, StorageError):
        view.topic_id = None
    view.producer_snapshots = read_producer_snapshots(part.path)
    return view


class CopyReader:
    """A :class:`~tools.audit.replica_checks.CopyStream` over one copy's ``segments`` (paths in
    base offset order): every item :func:`iter_segment` gives (``deep``: records decoded too),
    or, with ``lo``/``hi``, those of the batches that start in ``[lo, hi)``. A range's read
    starts in the segment whose name (its base offset) is the largest at or below ``lo``, at the
    position the segment's ``.index`` gives for ``lo`` (:func:`tools.audit.scan.index_position`),
    skips the batches before ``lo`` (keeping as ``prior`` a valid one that reaches into the
    range) and the bytes among them that are no batch (the range before reads those), and stops
    at the first batch at or past ``hi``, keeping the first valid one from there as ``after``.
    ``take(i)``: segment ``i``'s bytes, read already, or
    None (:class:`Prefetch`)."""

    def __init__(self, segments: Sequence[str], deep: bool = False, lo: int | None = None, hi: int | None = None,
                 take: Callable[[int], bytes | None] | None = None) -> None:
        self.segments, self.deep, self.lo, self.hi, self.take = segments, deep, lo, hi, take
        self.prior: BatchSummary | None = None
        self.after: BatchSummary | None = None
        self.exhausted = False

    def __iter__(self) -> Iterator[BatchSummary | BadBytes]:
        from tools.audit.scan import index_position

        segments, lo, hi = self.segments, self.lo, self.hi
        first, position = 0, 0
        if lo is not None and segments:
            bases = [int(os.path.basename(path)[:20]) for path in segments]
            first = max(0, bisect_right(bases, lo) - 1)
            position = index_position(segments[first], bases[first], lo)
        leading, past = lo is not None, False
        if lo is None and hi is None:  # the whole copy: nothing to skip or stop at
            for i, path in enumerate(segments):
                data = self.take(i) if self.take is not None else None
                yield from iter_segment(path, i == len(segments) - 1, deep=self.deep, data=data)
            self.exhausted = True
            return
        for i in range(first, len(segments)):
            start = position if i == first else 0
            data = self.take(i) if self.take is not None and start == 0 else None
            for item in iter_segment(segments[i], i == len(segments) - 1, start=start, deep=self.deep, data=data):
                if leading:
                    if type(item) is BadBytes:
                        continue
                    if item.base_offset < lo:  # type: ignore[operator, union-attr]
                        if item.crc_valid:  # type: ignore[union-attr]
                            self.prior = item if item.last_offset >= lo else None  # type: ignore[assignment, operator, union-attr]
                        continue
                    leading = False
                if hi is not None and type(item) is BatchSummary and item.base_offset >= hi:
                    if item.crc_valid:
                        self.after = item
                        return
                    past = True
                if not past:
                    yield item
        self.exhausted = not past
