"""Durable file operations: fsync, directory fsync, atomic replace, and the data-directory lock.

Every function here turns an ``OSError`` into :class:`storage.errors.KafkaStorageError`, so a
failed write or fsync reaches the node as one exception type that means "stop".

Atomic replace mirrors Kafka's ``CheckpointFile.write`` / ``FileQuorumStateStore.writeElectionState``
followed by ``Utils.atomicMoveWithFallback``::

    write <name>.tmp  ->  fsync(<name>.tmp)  ->  rename(<name>.tmp, <name>)  ->  fsync(dir)

The directory lock mirrors ``kafka.utils.FileLock`` on ``<data dir>/.lock``. Java's
``FileChannel.tryLock`` takes a POSIX record lock (``fcntl(F_SETLK)``) on Linux, which does not
conflict with ``flock``; kwire takes both, so that it excludes another kwire process and a Kafka
JVM alike.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from storage.errors import KafkaStorageError, LogDirectoryLockedError

LOCK_FILE_NAME = ".lock"


@contextlib.contextmanager
def io_errors(what: str) -> Iterator[None]:
    """Re-raise any ``OSError`` inside the block as :class:`KafkaStorageError` naming ``what``."""
    try:
        yield
    except OSError as exc:
        raise KafkaStorageError(f"{what}: {exc}") from exc


def _full_fsync(fd: int) -> None:
    # On macOS fsync does not flush the drive's cache; F_FULLFSYNC does.
    fcntl.fcntl(fd, getattr(fcntl, "F_FULLFSYNC"))  # noqa: B009 -- absent from Linux stubs


_fsync: Callable[[int], None] = (
    _full_fsync if sys.platform == "darwin" and hasattr(fcntl, "F_FULLFSYNC") else os.fsync
)
"""The system call behind :func:`fsync_fd`; tests of recovery logic (not durability) and
fault-injection tests replace it."""


def fsync_fd(fd: int) -> None:
    """Flush a file descriptor's data and metadata to stable storage (raises OSError)."""
    _fsync(fd)


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a directory so that file creations, renames and deletions in it are durable
    (``Utils.flushDir``). Raises KafkaStorageError."""
    with io_errors(f"fsync of directory {path}"):
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            fsync_fd(fd)
        finally:
            os.close(fd)


def write_all(fd: int, data: bytes | bytearray | memoryview, position: int | None = None) -> None:
    """Write every byte of ``data`` (at ``position`` if given, else at the file offset).

    ``os.write`` may write less than asked (a signal, a full disk); a short write that makes no
    progress is reported as ENOSPC rather than looping forever."""
    view = memoryview(data).cast("B")
    written = 0
    while written < len(view):
        if position is None:
            n = os.write(fd, view[written:])
        else:
            n = os.pwrite(fd, view[written:], position + written)
        if n <= 0:
            raise OSError(28, "no progress writing (disk full?)")
        written += n


class FileRegion:
    """``length`` bytes at byte ``position`` of a file, held open by a descriptor of the
    region's own (an ``os.dup`` of the caller's): a log segment's whole batches that a Fetch
    response sends from the file, without reading them into memory (Kafka's ``FileRecords``
    slice, written to the socket by ``FileRecords.writeTo``, a ``sendfile``). The segment may be
    closed or deleted meanwhile; the region still reads the bytes it was cut from. It is a
    ``kwire.wire.RecordsRegion``: ``len()`` is ``length``, ``bytes()`` reads it.

    :meth:`check_intact` (before a send) and ``bytes()`` raise KafkaStorageError when the file
    became shorter than the region's end (a truncation after the region was cut; Kafka's
    ``FileRecords.writeTo`` refuses the same). Close it (:meth:`close`, idempotent) once sent;
    an unclosed region closes its descriptor when collected."""

    __slots__ = ("_fd", "length", "path", "position")

    def __init__(self, fd: int, position: int, length: int, path: str | os.PathLike[str]) -> None:
        self._fd = -1
        if position < 0 or length < 0:
            raise ValueError(f"a region needs a position and a length >= 0, not {position} and {length}")
        self.path = path
        self.position = position
        self.length = length
        with io_errors(f"opening a region of {path}"):
            self._fd = os.dup(fd)

    @property
    def fd(self) -> int:
        """The region's own descriptor (-1 once closed)."""
        return self._fd

    def __len__(self) -> int:
        return self.length

    def __bytes__(self) -> bytes:
        self.check_intact()
        with io_errors(f"reading {self.path}"):
            data = os.pread(self._fd, self.length, self.position)
        if len(data) != self.length:
            raise KafkaStorageError(f"{self.path} ended inside a region: {len(data)} of {self.length} bytes read")
        return data

    def check_intact(self) -> None:
        """Raise KafkaStorageError if the region is closed or the file ends before its end."""
        if self._fd < 0:
            raise KafkaStorageError(f"the region of {self.path} at {self.position} is closed")
        with io_errors(f"checking {self.path}"):
            size = os.fstat(self._fd).st_size
        if size < self.position + self.length:
            raise KafkaStorageError(
                f"{self.path} was truncated to {size} bytes under a region ending at {self.position + self.length}"
            )

    def close(self) -> None:
        """Close the region's descriptor (once)."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FileRegion({self.path!s}, position={self.position}, length={self.length})"


def atomic_write(path: str | os.PathLike[str], data: bytes, *, fsync: bool = True) -> None:
    """Replace ``path`` with ``data``: write ``<path>.tmp``, fsync it, rename it over ``path``,
    fsync the parent directory. The temporary file is removed if anything fails.

    Raises KafkaStorageError."""
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    with io_errors(f"atomic write of {target}"):
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                write_all(fd, data)
                if fsync:
                    fsync_fd(fd)
            finally:
                os.close(fd)
            os.replace(tmp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    if fsync:
        fsync_dir(target.parent)


class DataDirLock:
    """An exclusive lock on ``<directory>/.lock`` held until :meth:`release`.

    Like Kafka's ``FileLock.destroy`` on shutdown, :meth:`release` removes the file. Because of
    that, a lock taken on a file that was meanwhile unlinked is worthless; the lock is retried
    until the locked file is the one at the path.

    Raises LogDirectoryLockedError when another process (kwire or a Kafka JVM) holds it, and
    KafkaStorageError when the file cannot be created."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.path = Path(directory) / LOCK_FILE_NAME
        self._fd: int | None = None
        while self._fd is None:
            with io_errors(f"creating {self.path}"):
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                raise LogDirectoryLockedError(
                    f"{self.path} is locked by another process; is another node using "
                    f"{self.path.parent}?"
                ) from exc
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                self._fd = fd
            else:
                os.close(fd)  # the holder released and removed it meanwhile: lock the new file

    @property
    def held(self) -> bool:
        """True from construction until :meth:`release`."""
        return self._fd is not None

    def release(self) -> None:
        """Remove the file and release the lock (closing the descriptor releases both lock
        kinds). Idempotent."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.unlink(self.path)
            except OSError:
                pass
            os.close(fd)

    def __enter__(self) -> DataDirLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()
