"""The sparse ``.index`` and ``.timeindex`` files of a segment.

Mirrors ``org.apache.kafka.storage.internals.log.AbstractIndex``, ``OffsetIndex`` and
``TimeIndex``. Offsets are stored relative to the segment's base offset; all big-endian::

    .index      +----------------------+-----------------+
    8 bytes     | relativeOffset int32 | position int32  |   position = byte offset in .log
                +----------------------+-----------------+

    .timeindex  +-----------------+----------------------+
    12 bytes    | timestamp int64 | relativeOffset int32 |
                +-----------------+----------------------+

An index being written to is pre-sized (sparse) to ``round_down(max_index_size, entry size)``
bytes -- 10485760 and 10485756 by default (``segment.index.bytes`` = 10 MiB) -- and trimmed to
``entries * entry size`` when the segment stops being active or is closed, as Kafka's memory-
mapped indexes are. kwire keeps the entries in memory and writes each one with ``pwrite``; the
file is the durable copy. Indexes are always rebuilt from the ``.log`` when a log is opened
(Kafka re-validates the whole metadata log on every start), so reading an index file back is
only needed by tools.

Rules, from ``OffsetIndex.append`` / ``TimeIndex.maybeAppend``:

* offset-index entries must have strictly increasing offsets;
* a time-index entry is written only when its timestamp is larger than the last one's; an
  entry for the same offset and timestamp is silently skipped; a smaller offset is an error;
* the time index counts as full one entry early, keeping the last slot for the entry written
  when the segment rolls.
"""

from __future__ import annotations

import os
import struct
from bisect import bisect_right
from pathlib import Path

from storage.errors import KafkaStorageError, StorageError
from storage.fileio import fsync_fd, io_errors, write_all

DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024  # segment.index.bytes
OFFSET_ENTRY = struct.Struct(">ii")
TIME_ENTRY = struct.Struct(">qi")
NO_TIMESTAMP = -1


class InvalidOffsetError(StorageError):
    """An index entry out of order (Kafka's ``InvalidOffsetException``)."""


class CorruptIndexError(StorageError):
    """An index file whose content is impossible (``CorruptIndexException``)."""


def _round_down(number: int, factor: int) -> int:
    return factor * (number // factor)


class _Index:
    ENTRY_SIZE = 0

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        if max_index_size < self.ENTRY_SIZE:
            raise ValueError(f"Invalid max index size: {max_index_size}")
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self.max_entries = _round_down(max_index_size, self.ENTRY_SIZE) // self.ENTRY_SIZE
        self._fd: int | None = None
        self._length = 0

    # -- file handling

    def open_empty(self, *, presize: bool = True) -> None:
        """Create (or wipe) the file: zero entries, pre-sized when ``presize``."""
        with io_errors(f"opening index {self.path}"):
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            os.ftruncate(self._fd, 0)
            self._length = 0
        self._clear()
        if presize:
            self.resize(self.max_index_size)

    def resize(self, new_size: int) -> None:
        """Set the file length to ``new_size`` rounded down to whole entries; the entry count is
        unchanged (``AbstractIndex.resize``)."""
        rounded = _round_down(new_size, self.ENTRY_SIZE)
        if rounded == self._length:
            return
        with io_errors(f"resizing index {self.path}"):
            os.ftruncate(self._require_fd(), rounded)
        self._length = rounded
        self.max_entries = rounded // self.ENTRY_SIZE

    def trim_to_valid_size(self) -> None:
        """Shrink the file to exactly its entries (``AbstractIndex.trimToValidSize``). Raises
        KafkaStorageError."""
        self.resize(self.ENTRY_SIZE * self.entries)

    def reset(self) -> None:
        """Drop every entry and pre-size the file again (``AbstractIndex.reset``)."""
        self._truncate_to_entries(0)
        self.resize(self.max_index_size)

    def flush(self) -> None:
        """fsync the index file (``AbstractIndex.flush``). Raises KafkaStorageError, also when
        the index is closed."""
        with io_errors(f"fsync of index {self.path}"):
            fsync_fd(self._require_fd())

    def close(self) -> None:
        """Trim to the entries and close (``AbstractIndex.close``)."""
        if self._fd is None:
            return
        try:
            self.trim_to_valid_size()
        finally:
            fd, self._fd = self._fd, None
            with io_errors(f"closing index {self.path}"):
                os.close(fd)

    def close_handler(self) -> None:
        """Close without trimming (after an I/O failure, or before deletion)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.close(fd)
            except OSError:
                pass

    def delete(self) -> None:
        """Close and unlink the file; a missing file is not an error
        (``AbstractIndex.deleteIfExists``). Raises KafkaStorageError."""
        self.close_handler()
        with io_errors(f"deleting index {self.path}"):
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass

    def rename(self, new_path: Path) -> None:
        """Move the file to ``new_path`` (replacing any file there) and keep using it there.
        Raises KafkaStorageError."""
        with io_errors(f"renaming index {self.path}"):
            os.replace(self.path, new_path)
        self.path = new_path

    @property
    def size_in_bytes(self) -> int:
        """Bytes taken by the entries (entries × entry size), not the pre-sized file length."""
        return self.ENTRY_SIZE * self.entries

    @property
    def file_length(self) -> int:
        """The file's current length in bytes, pre-sized space included."""
        return self._length

    def is_full(self) -> bool:
        """True when no entry fits in the file's current size (``AbstractIndex.isFull``)."""
        return self.entries >= self.max_entries

    def relative_offset(self, offset: int) -> int:
        """``offset - base_offset`` as stored in an entry. Raises InvalidOffsetError when that
        is negative or above 2**31 - 1 (``AbstractIndex.relativeOffset``)."""
        relative = offset - self.base_offset
        if not 0 <= relative <= 0x7FFFFFFF:
            raise InvalidOffsetError(
                f"offset {offset} cannot be stored relative to base offset {self.base_offset}"
            )
        return relative

    def can_append_offset(self, offset: int) -> bool:
        """Whether ``offset`` fits as a relative offset: 0 <= offset - base_offset <= 2**31 - 1
        (``AbstractIndex.canAppendOffset``)."""
        return 0 <= offset - self.base_offset <= 0x7FFFFFFF

    def _require_fd(self) -> int:
        if self._fd is None:
            raise KafkaStorageError(f"index {self.path} is closed")
        return self._fd

    def _write_entry(self, slot: int, raw: bytes) -> None:
        with io_errors(f"writing index {self.path}"):
            write_all(self._require_fd(), raw, slot * self.ENTRY_SIZE)

    def _zero_from(self, entries: int) -> None:
        # Entries past the end must read as zeros again, as the memory map would show them.
        end = self._length
        start = entries * self.ENTRY_SIZE
        if start >= end:
            return
        with io_errors(f"truncating index {self.path}"):
            fd = self._require_fd()
            os.ftruncate(fd, start)
            os.ftruncate(fd, end)

    # -- implemented by subclasses
    entries: int

    def _clear(self) -> None:
        raise NotImplementedError

    def _truncate_to_entries(self, entries: int) -> None:
        raise NotImplementedError


class OffsetIndex(_Index):
    """``<base>.index``: offset -> byte position in the ``.log``, sparse (``OffsetIndex``).

    Offsets here are absolute; the file stores them relative to ``base_offset``. Construction
    touches no file (call :meth:`open_empty`) and raises ValueError when ``max_index_size``
    (bytes) is smaller than one 8-byte entry. File operations raise KafkaStorageError.
    """

    ENTRY_SIZE = OFFSET_ENTRY.size

    def __init__(
        self, path: Path, base_offset: int, max_index_size: int = DEFAULT_MAX_INDEX_SIZE
    ) -> None:
        super().__init__(path, base_offset, max_index_size)
        self._offsets: list[int] = []
        self._positions: list[int] = []

    @property
    def entries(self) -> int:  # type: ignore[override]
        """The number of entries held."""
        return len(self._offsets)

    @property
    def last_offset(self) -> int:
        """The (absolute) offset of the last entry, ``base_offset`` when empty
        (``OffsetIndex.lastOffset``)."""
        return self._offsets[-1] if self._offsets else self.base_offset

    def entry(self, slot: int) -> tuple[int, int]:
        """``(offset, position)`` of entry number ``slot`` (0-based; negative counts from the
        end). Raises IndexError for a slot out of range (``OffsetIndex.entry``)."""
        return self._offsets[slot], self._positions[slot]

    def entry_list(self) -> list[tuple[int, int]]:
        """Every ``(offset, position)`` entry, in file order."""
        return list(zip(self._offsets, self._positions, strict=True))

    def append(self, offset: int, position: int) -> None:
        """Add ``(offset, position)``; raises InvalidOffsetError unless ``offset`` is larger than
        the last entry's, and StorageError when the index is full."""
        if self.is_full():
            raise StorageError(f"Attempt to append to a full index (size = {self.entries}).")
        if self._offsets and offset <= self._offsets[-1]:
            raise InvalidOffsetError(
                f"Attempt to append an offset {offset} to position {self.entries} no larger than "
                f"the last offset appended ({self._offsets[-1]}) to {self.path}"
            )
        raw = OFFSET_ENTRY.pack(self.relative_offset(offset), position)
        self._write_entry(self.entries, raw)
        self._offsets.append(offset)
        self._positions.append(position)

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """The entry with the largest offset <= ``target_offset``, or ``(base_offset, 0)``."""
        slot = bisect_right(self._offsets, target_offset) - 1
        if slot < 0:
            return self.base_offset, 0
        return self._offsets[slot], self._positions[slot]

    def floor_position(self, position: int) -> int:
        """The largest position <= ``position`` that an entry holds (each is a batch's start in
        the ``.log``), 0 when there is none."""
        slot = bisect_right(self._positions, position) - 1
        return self._positions[slot] if slot >= 0 else 0

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset`` (``OffsetIndex.truncateTo``)."""
        self._truncate_to_entries(bisect_right(self._offsets, offset - 1))

    def _truncate_to_entries(self, entries: int) -> None:
        if entries < self.entries:
            del self._offsets[entries:]
            del self._positions[entries:]
            self._zero_from(entries)

    def _clear(self) -> None:
        self._offsets.clear()
        self._positions.clear()


class TimeIndex(_Index):
    """``<base>.timeindex``: timestamp (ms) -> offset, sparse, timestamps strictly increasing
    (``TimeIndex``).

    Construction touches no file (call :meth:`open_empty`) and raises ValueError when
    ``max_index_size`` (bytes) is smaller than one 12-byte entry. File operations raise
    KafkaStorageError.
    """

    ENTRY_SIZE = TIME_ENTRY.size

    def __init__(
        self, path: Path, base_offset: int, max_index_size: int = DEFAULT_MAX_INDEX_SIZE
    ) -> None:
        super().__init__(path, base_offset, max_index_size)
        self._timestamps: list[int] = []
        self._offsets: list[int] = []

    @property
    def entries(self) -> int:  # type: ignore[override]
        """The number of entries held."""
        return len(self._offsets)

    @property
    def last_entry(self) -> tuple[int, int]:
        """``(timestamp, offset)`` of the last entry, ``(-1, base_offset)`` when empty."""
        if not self._offsets:
            return NO_TIMESTAMP, self.base_offset
        return self._timestamps[-1], self._offsets[-1]

    def entry_list(self) -> list[tuple[int, int]]:
        """Every ``(timestamp, offset)`` entry, in file order."""
        return list(zip(self._timestamps, self._offsets, strict=True))

    def is_full(self) -> bool:
        """True one entry early, keeping the last slot for the entry written when the segment
        becomes inactive (``TimeIndex.isFull``)."""
        return self.entries >= self.max_entries - 1

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Append ``(timestamp, offset)`` when ``timestamp`` is larger than the last entry's
        (``TimeIndex.maybeAppend``). Raises InvalidOffsetError for an offset smaller than the
        last entry's and StorageError for a smaller timestamp or a full index."""
        if not skip_full_check and self.is_full():
            raise StorageError(f"Attempt to append to a full time index (size = {self.entries}).")
        last_timestamp, last_offset = self.last_entry
        if self._offsets and offset < last_offset:
            raise InvalidOffsetError(
                f"Attempt to append an offset ({offset}) to slot {self.entries} no larger than "
                f"the last offset appended ({last_offset}) to {self.path}"
            )
        if self._offsets and timestamp < last_timestamp:
            raise StorageError(
                f"Attempt to append a timestamp ({timestamp}) to slot {self.entries} no larger "
                f"than the last timestamp appended ({last_timestamp}) to {self.path}"
            )
        if timestamp > last_timestamp:
            if self.entries >= self._length // self.ENTRY_SIZE:
                # the reserved last slot (or a trimmed file): grow by one entry
                self.resize(self._length + self.ENTRY_SIZE)
            raw = TIME_ENTRY.pack(timestamp, self.relative_offset(offset))
            self._write_entry(self.entries, raw)
            self._timestamps.append(timestamp)
            self._offsets.append(offset)

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """The entry with the largest timestamp <= ``target_timestamp``, or ``(-1, base)``."""
        slot = bisect_right(self._timestamps, target_timestamp) - 1
        if slot < 0:
            return NO_TIMESTAMP, self.base_offset
        return self._timestamps[slot], self._offsets[slot]

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset`` (``TimeIndex.truncateTo``)."""
        self._truncate_to_entries(bisect_right(self._offsets, offset - 1))

    def _truncate_to_entries(self, entries: int) -> None:
        if entries < self.entries:
            del self._timestamps[entries:]
            del self._offsets[entries:]
            self._zero_from(entries)

    def _clear(self) -> None:
        self._timestamps.clear()
        self._offsets.clear()


def read_offset_index(data: bytes, base_offset: int) -> list[tuple[int, int]]:
    """Decode ``.index`` bytes into ``(offset, position)`` pairs, stopping at the first slot
    after the first whose relative offset is 0 (the unwritten, pre-sized part; the rule
    DumpLogSegments uses). Raises
    CorruptIndexError when the length is not a multiple of 8."""
    if len(data) % OFFSET_ENTRY.size:
        raise CorruptIndexError(f"offset index of {len(data)} bytes is not a multiple of 8")
    out: list[tuple[int, int]] = []
    for slot in range(len(data) // OFFSET_ENTRY.size):
        relative, position = OFFSET_ENTRY.unpack_from(data, slot * OFFSET_ENTRY.size)
        if slot > 0 and relative == 0:
            break
        out.append((base_offset + relative, position))
    return out


def read_time_index(data: bytes, base_offset: int) -> list[tuple[int, int]]:
    """Decode ``.timeindex`` bytes into ``(timestamp, offset)`` pairs, stopping at the first slot
    after the first whose relative offset is 0 (as DumpLogSegments does). Raises CorruptIndexError when the length is not a multiple of 12."""
    if len(data) % TIME_ENTRY.size:
        raise CorruptIndexError(f"time index of {len(data)} bytes is not a multiple of 12")
    out: list[tuple[int, int]] = []
    for slot in range(len(data) // TIME_ENTRY.size):
        timestamp, relative = TIME_ENTRY.unpack_from(data, slot * TIME_ENTRY.size)
        if slot > 0 and relative == 0:
            break
        out.append((timestamp, base_offset + relative))
    return out
