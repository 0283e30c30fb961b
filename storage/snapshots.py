"""KRaft snapshots: ``<20-digit end offset>-<10-digit epoch>.checkpoint`` files.

Mirrors ``org.apache.kafka.snapshot``: ``Snapshots`` (names), ``FileRawSnapshotWriter`` /
``FileRawSnapshotReader`` (bytes), ``RecordsSnapshotWriter`` / ``RecordsSnapshotReader``
(content) and ``KafkaMetadataLog.recoverSnapshots`` (start-up clean-up).

A snapshot file is record batches back to back, offsets counted from 0 inside the file, every
batch's PartitionLeaderEpoch = the snapshot epoch::

    control batch   SnapshotHeader{version 0, lastContainedLogTimestamp}
                    [+ KRaftVersion{0, v} + Voters{...} when kraft.version >= 1]
    data batch(es)  framed metadata records
    control batch   SnapshotFooter{version 0}

Names: the id is (end offset exclusive, epoch of the last contained record)::

    00000000000000001234-0000000007.checkpoint               frozen (mode 0400)
    00000000000000001234-0000000007-<random>.checkpoint.part  being written (mode 0600)
    00000000000000001234-0000000007.checkpoint.deleted        marked for deletion

Freeze: fsync, close, make read-only, rename to ``.checkpoint``, fsync the directory.
Readers require the first batch to be a control batch whose first record is a SnapshotHeader.
``00000000000000000000-0000000000.checkpoint`` is the bootstrap snapshot written by formatting.

The id and the content from and to bytes are :mod:`storage.snapshot_format` (no file I/O, so the
KRaft core can use them); this module re-exports them and adds the files.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from messages.generated.voters_record import VotersRecord
from storage.errors import InconsistentStateError, StorageError
from storage.fileio import fsync_dir, fsync_fd, io_errors, write_all
from storage.snapshot_format import BOOTSTRAP_SNAPSHOT_ID as BOOTSTRAP_SNAPSHOT_ID
from storage.snapshot_format import DEFAULT_MAX_BATCH_BYTES, EPOCH_WIDTH, OFFSET_WIDTH
from storage.snapshot_format import SnapshotBatches as SnapshotBatches
from storage.snapshot_format import SnapshotContent as SnapshotContent
from storage.snapshot_format import SnapshotId as SnapshotId
from storage.snapshot_format import build_snapshot_batches as build_snapshot_batches
from storage.snapshot_format import read_snapshot_batches as read_snapshot_batches
from storage.snapshot_format import read_snapshot_content as read_snapshot_content

SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = SUFFIX + ".part"
DELETE_SUFFIX = SUFFIX + ".deleted"


@dataclass(frozen=True, slots=True)
class SnapshotPath:
    """A snapshot file found in a partition directory
    (``org.apache.kafka.snapshot.SnapshotPath``): its path, the id in its name, and whether it
    is a ``.checkpoint.part`` (``partial``) or a ``.checkpoint.deleted`` (``deleted``) file;
    both False for a frozen snapshot."""

    path: Path
    snapshot_id: SnapshotId
    partial: bool
    deleted: bool


def snapshot_path(partition_dir: Path, snapshot_id: SnapshotId) -> Path:
    """``<partition_dir>/<end offset>-<epoch>.checkpoint``, the frozen snapshot's path
    (``Snapshots.snapshotPath``); touches no file."""
    return partition_dir / (snapshot_id.file_stem + SUFFIX)


def parse_snapshot_path(path: Path) -> SnapshotPath | None:
    """Recognise a snapshot file name (``Snapshots.parse``); None for anything else."""
    name = path.name
    partial = name.endswith(PARTIAL_SUFFIX)
    deleted = name.endswith(DELETE_SUFFIX)
    if not (partial or deleted or name.endswith(SUFFIX)):
        return None
    offset_text = name[:OFFSET_WIDTH]
    epoch_text = name[OFFSET_WIDTH + 1 : OFFSET_WIDTH + 1 + EPOCH_WIDTH]
    if (
        len(name) < OFFSET_WIDTH + 1 + EPOCH_WIDTH
        or name[OFFSET_WIDTH : OFFSET_WIDTH + 1] != "-"
        or not offset_text.isdigit()
        or not epoch_text.isdigit()
    ):
        return None
    return SnapshotPath(path, SnapshotId(int(offset_text), int(epoch_text)), partial, deleted)


def list_snapshot_paths(partition_dir: Path) -> list[SnapshotPath]:
    """Every snapshot file in ``partition_dir`` (frozen, partial and deleted alike), ordered by
    id, then file name. Raises KafkaStorageError when the directory cannot be listed."""
    with io_errors(f"listing {partition_dir}"):
        names = os.listdir(partition_dir)
    found = [parse_snapshot_path(partition_dir / name) for name in names]
    return sorted((p for p in found if p is not None), key=lambda p: (p.snapshot_id, p.path.name))


def recover_snapshots(partition_dir: Path, log_start_offset: int) -> list[SnapshotId]:
    """Delete partial and marked-for-deletion snapshots and those ending below the log start
    offset; return the rest, ascending (``KafkaMetadataLog.recoverSnapshots``).

    Raises InconsistentStateError when the log starts after 0 but no snapshot reaches its
    start (the log's prefix would be lost), before anything is deleted, and KafkaStorageError
    when a file cannot be deleted or the directory not listed or fsynced."""
    retain: list[SnapshotId] = []
    delete: list[Path] = []
    for found in list_snapshot_paths(partition_dir):
        if found.partial or found.deleted or found.snapshot_id.end_offset < log_start_offset:
            delete.append(found.path)
        else:
            retain.append(found.snapshot_id)
    if log_start_offset > 0 and not (retain and retain[-1].end_offset >= log_start_offset):
        raise InconsistentStateError(
            "Inconsistent snapshot state: there must be a snapshot at an offset larger then the "
            f"current log start offset {log_start_offset}, but the latest snapshot is "
            f"{retain[-1] if retain else None}"
        )
    for path in delete:
        with io_errors(f"deleting {path}"), contextlib.suppress(FileNotFoundError):
            os.unlink(path)
    if delete:
        fsync_dir(partition_dir)
    return sorted(retain)


def mark_for_delete(partition_dir: Path, snapshot_id: SnapshotId) -> Path:
    """Rename ``<id>.checkpoint`` to ``<id>.checkpoint.deleted`` and fsync the directory
    (``Snapshots.markForDelete``); returns the new path. Raises KafkaStorageError, also when
    the snapshot does not exist."""
    source = snapshot_path(partition_dir, snapshot_id)
    target = partition_dir / (snapshot_id.file_stem + DELETE_SUFFIX)
    with io_errors(f"renaming {source}"):
        os.replace(source, target)
    fsync_dir(partition_dir)
    return target


def delete_snapshot(partition_dir: Path, snapshot_id: SnapshotId) -> bool:
    """Remove the snapshot and its ``.deleted`` form (``Snapshots.deleteIfExists``); returns
    True when either file existed. The directory is not fsynced. Raises KafkaStorageError."""
    removed = False
    for path in (
        snapshot_path(partition_dir, snapshot_id),
        partition_dir / (snapshot_id.file_stem + DELETE_SUFFIX),
    ):
        with io_errors(f"deleting {path}"):
            try:
                os.unlink(path)
                removed = True
            except FileNotFoundError:
                pass
    return removed


# ---------------------------------------------------------------------------------------------
# writing


class RawSnapshotWriter:
    """Bytes into ``<id>-<random>.checkpoint.part`` until :meth:`freeze`
    (``FileRawSnapshotWriter``). A follower appends what FetchSnapshot returns; a leader appends
    whole batches. Every I/O failure raises KafkaStorageError."""

    def __init__(self, partition_dir: Path, snapshot_id: SnapshotId) -> None:
        self.dir = partition_dir
        self.snapshot_id = snapshot_id
        self.frozen = False
        self.size_in_bytes = 0
        with io_errors(f"creating a snapshot file in {partition_dir}"):
            partition_dir.mkdir(parents=True, exist_ok=True)
            while True:
                name = f"{snapshot_id.file_stem}-{secrets.randbelow(2**63)}{PARTIAL_SUFFIX}"
                self.temp_path = partition_dir / name
                try:
                    self._fd: int | None = os.open(
                        self.temp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600
                    )
                    break
                except FileExistsError:
                    continue

    def append(self, data: bytes | bytearray | memoryview) -> None:
        """Write ``data`` at the end of the ``.part`` file, adding its length to
        ``size_in_bytes``. Raises StorageError after :meth:`freeze` or :meth:`close`, and
        KafkaStorageError on I/O failure."""
        if self.frozen or self._fd is None:
            raise StorageError(f"Append is not supported. Snapshot is already frozen: id = {self.snapshot_id}")
        with io_errors(f"writing snapshot {self.temp_path}"):
            write_all(self._fd, data)
        self.size_in_bytes += len(data)

    def flush(self) -> None:
        """fsync what was appended so far; the file stays open for more. A large file written
        whole and fsynced once leaves the disk a backlog of dirty pages that other files'
        fsyncs on the same file system may wait behind (ext4's ordered mode writes out a
        file's new blocks before the journal commit any fsync needs); flushed a piece at a
        time it leaves none. Raises StorageError after :meth:`freeze` or :meth:`close`, and
        KafkaStorageError on I/O failure."""
        if self.frozen or self._fd is None:
            raise StorageError(f"Flush is not supported. Snapshot is already frozen: id = {self.snapshot_id}")
        with io_errors(f"flushing snapshot {self.temp_path}"):
            fsync_fd(self._fd)

    def freeze(self) -> Path:
        """fsync, close, chmod read-only, rename to ``<id>.checkpoint``, fsync the directory;
        returns the frozen path. Raises StorageError when already frozen or closed, and
        KafkaStorageError on I/O failure."""
        if self.frozen or self._fd is None:
            raise StorageError(f"Freeze is not supported. Snapshot is already frozen: id = {self.snapshot_id}")
        destination = snapshot_path(self.dir, self.snapshot_id)
        with io_errors(f"freezing snapshot {self.temp_path}"):
            fd, self._fd = self._fd, None
            try:
                fsync_fd(fd)
            finally:
                os.close(fd)
            os.chmod(self.temp_path, 0o400)
            os.replace(self.temp_path, destination)
        fsync_dir(self.dir)
        self.frozen = True
        return destination

    def close(self) -> None:
        """Abandon an unfrozen snapshot (its ``.part`` file is removed); no-op after freeze."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                os.close(fd)
        if not self.frozen:
            with contextlib.suppress(OSError):
                os.unlink(self.temp_path)

    def __enter__(self) -> RawSnapshotWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def write_snapshot(
    partition_dir: Path,
    snapshot_id: SnapshotId,
    *,
    last_contained_log_timestamp: int,
    records: Iterable[bytes],
    append_time_ms: int,
    kraft_version: int = 0,
    voters: VotersRecord | None = None,
    max_batch_bytes: int = DEFAULT_MAX_BATCH_BYTES,
) -> Path:
    """Write and freeze a complete snapshot (the batches of
    :func:`storage.snapshot_format.build_snapshot_batches`, uncompressed); returns its path.
    Raises ValueError for an empty record value and KafkaStorageError on I/O failure; the
    ``.part`` file is removed on failure."""
    batches = build_snapshot_batches(
        snapshot_id,
        last_contained_log_timestamp=last_contained_log_timestamp,
        records=records,
        append_time_ms=append_time_ms,
        kraft_version=kraft_version,
        voters=voters,
        max_batch_bytes=max_batch_bytes,
    )
    with RawSnapshotWriter(partition_dir, snapshot_id) as writer:
        writer.append(b"".join(batches))
        return writer.freeze()


# ---------------------------------------------------------------------------------------------
# reading


class RawSnapshotReader:
    """A frozen snapshot's bytes (``FileRawSnapshotReader``): :meth:`read` serves FetchSnapshot
    at any byte position, batch-aligned or not.

    Opening reads the size (``size_in_bytes``); raises KafkaStorageError when the file cannot be
    opened."""

    def __init__(self, path: Path, snapshot_id: SnapshotId) -> None:
        self.path = path
        self.snapshot_id = snapshot_id
        with io_errors(f"opening snapshot {path}"):
            self._fd: int | None = os.open(path, os.O_RDONLY)
            self.size_in_bytes = os.fstat(self._fd).st_size

    @classmethod
    def open(cls, partition_dir: Path, snapshot_id: SnapshotId) -> RawSnapshotReader:
        """Raises KafkaStorageError (wrapping FileNotFoundError) when it does not exist."""
        return cls(snapshot_path(partition_dir, snapshot_id), snapshot_id)

    def read(self, position: int, max_bytes: int) -> bytes:
        """Up to ``max_bytes`` bytes from byte ``position`` (``FileRawSnapshotReader.slice``);
        empty at or past the end. Raises StorageError after :meth:`close` and
        KafkaStorageError on I/O failure (a negative position included)."""
        if self._fd is None:
            raise StorageError(f"snapshot {self.path} is closed")
        with io_errors(f"reading snapshot {self.path}"):
            return os.pread(self._fd, max(0, min(max_bytes, self.size_in_bytes - position)), position)

    def read_all(self) -> bytes:
        """The whole file. Raises as :meth:`read`."""
        return self.read(0, self.size_in_bytes)

    def close(self) -> None:
        """Close the file; idempotent, never raises."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                os.close(fd)

    def __enter__(self) -> RawSnapshotReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_snapshot(partition_dir: Path, snapshot_id: SnapshotId) -> SnapshotContent:
    """Read and validate the frozen snapshot ``snapshot_id`` in ``partition_dir``. Raises
    KafkaStorageError when it cannot be read (or does not exist) and CorruptRecordError /
    InvalidRecordError as :func:`storage.snapshot_format.read_snapshot_content` does."""
    with RawSnapshotReader.open(partition_dir, snapshot_id) as reader:
        return read_snapshot_content(reader.read_all())


def load_snapshot_batches(partition_dir: Path, snapshot_id: SnapshotId) -> SnapshotBatches:
    """Read the frozen snapshot ``snapshot_id`` and check it whole, decoding its control
    batches only (:func:`storage.snapshot_format.read_snapshot_batches`; its data records are
    decoded as they are iterated). Raises as :func:`read_snapshot` does."""
    with RawSnapshotReader.open(partition_dir, snapshot_id) as reader:
        return read_snapshot_batches(reader.read_all())


def snapshot_ids(paths: Sequence[SnapshotPath]) -> list[SnapshotId]:
    """The ids of the frozen snapshots among ``paths`` (partial and deleted ones skipped),
    ascending."""
    return sorted(p.snapshot_id for p in paths if not p.partial and not p.deleted)
