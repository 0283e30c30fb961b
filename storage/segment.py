"""One log segment: ``<base>.log`` with its ``<base>.index`` and ``<base>.timeindex``.

Mirrors ``org.apache.kafka.storage.internals.log.LogSegment`` and ``FileRecords``. File names
are the segment's base offset as 20 zero-padded digits (``LogFileUtils``)::

    00000000000000000000.log        whole record batches, back to back, exactly as received
    00000000000000000000.index      sparse offset -> position (storage.index)
    00000000000000000000.timeindex  sparse timestamp -> offset

Index rules (``LogSegment.append`` / ``recover``): one offset-index entry, ``(last offset of the
appended set, position where the set starts)``, whenever more than ``index.interval.bytes``
(4096) bytes were appended since the previous entry, together with a time-index entry
``(max timestamp so far, last offset of the batch holding it)`` when that timestamp is new; a
final time-index entry when the segment becomes inactive or is closed.

A segment never holds a partial batch except transiently at its tail after a crash, which
:meth:`LogSegment.recover` removes.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from storage.batch_layout import LOG_OVERHEAD, NO_TIMESTAMP, OFFSET_AND_LENGTH
from storage.batch_scan import scan_batches
from storage.errors import KafkaStorageError
from storage.fileio import fsync_fd, io_errors, write_all
from storage.index import DEFAULT_MAX_INDEX_SIZE, OffsetIndex, TimeIndex
from storage.records import RecordBatch

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
DELETED_FILE_SUFFIX = ".deleted"
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"

_READ_CHUNK = 8 * 1024 * 1024
_HEADER_THROUGH_LAST_OFFSET_DELTA = 27  # bytes [0, 27): BaseOffset .. LastOffsetDelta


def filename_prefix(offset: int) -> str:
    """``LogFileUtils.filenamePrefixFromOffset``: 20 digits, zero padded."""
    return f"{offset:020d}"


def offset_from_file_name(name: str) -> int | None:
    """The base offset in a segment or index file name, None if the name is not one."""
    stem = name.split(".", 1)[0]
    if len(stem) == 20 and stem.isdigit():
        return int(stem)
    return None


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The metadata log's settings (``KafkaMetadataLog.apply`` / ``MetadataLogConfig``)."""

    segment_bytes: int = 1024 * 1024 * 1024
    """``metadata.log.segment.bytes``."""
    segment_ms: int = 7 * 24 * 60 * 60 * 1000
    """``metadata.log.segment.ms``."""
    index_interval_bytes: int = 4096
    """``index.interval.bytes``: bytes appended between two offset-index entries."""
    max_index_size: int = DEFAULT_MAX_INDEX_SIZE
    """``segment.index.bytes``: the pre-sized length of each index file, in bytes."""
    max_batch_bytes: int = 8 * 1024 * 1024
    """``max.message.bytes`` of the metadata log = ``KafkaRaftClient.MAX_BATCH_SIZE_BYTES``."""


@dataclass(frozen=True, slots=True)
class BatchInfo:
    """The header facts of one batch in a segment, as recovery reports them.

    ``position`` is the batch's byte offset in the ``.log``; ``base_offset`` and ``last_offset``
    are inclusive; ``max_timestamp`` is in ms (-1 when none); ``size_in_bytes`` is the whole
    batch, its 12-byte log overhead included.
    """

    position: int
    base_offset: int
    last_offset: int
    partition_leader_epoch: int
    max_timestamp: int
    size_in_bytes: int


@dataclass(frozen=True, slots=True)
class RecoveryResult:
    """What :meth:`LogSegment.recover` kept (Kafka's ``LogSegment.recover`` returns only the
    truncated byte count).

    ``valid_bytes``: length of the ``.log`` after recovery; ``truncated_bytes``: bytes cut off
    its tail; ``next_offset``: the offset after the last valid batch (``expected_offset``, or
    the base offset, when none); ``batches``: valid batches kept; ``error``: why scanning
    stopped before the end, None for a clean end or a torn tail.
    """

    valid_bytes: int
    truncated_bytes: int
    next_offset: int
    batches: int
    error: str | None


class LogSegment:
    """An open segment (``org.apache.kafka.storage.internals.log.LogSegment``). Create with
    :meth:`create` or :meth:`load`; every I/O failure raises KafkaStorageError.

    Public state: ``size`` (bytes in the ``.log``), ``next_offset`` (the offset after the last
    batch), ``created_ms`` (ms), ``max_timestamp_so_far`` (ms, -1 when none) with
    ``offset_of_max_timestamp_so_far``, ``rolling_based_timestamp`` (the first batch's max
    timestamp, ms) and ``first_batch_leader_epoch``.
    """

    def __init__(
        self, directory: Path, base_offset: int, config: LogConfig, created_ms: int
    ) -> None:
        self.dir = directory
        self.base_offset = base_offset
        self.config = config
        prefix = filename_prefix(base_offset)
        self.log_path = directory / (prefix + LOG_FILE_SUFFIX)
        self.offset_index = OffsetIndex(
            directory / (prefix + INDEX_FILE_SUFFIX), base_offset, config.max_index_size
        )
        self.time_index = TimeIndex(
            directory / (prefix + TIME_INDEX_FILE_SUFFIX), base_offset, config.max_index_size
        )
        self._fd: int | None = None
        self.size = 0
        self.next_offset = base_offset
        self.created_ms = created_ms
        self.rolling_based_timestamp: int | None = None
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = base_offset
        self._has_max_timestamp = False
        self._bytes_since_last_index_entry = 0
        self.first_batch_leader_epoch: int | None = None

    # -- opening

    @classmethod
    def create(
        cls, directory: Path, base_offset: int, config: LogConfig, now_ms: int
    ) -> LogSegment:
        """A new, empty segment; files left over under the same name are replaced
        (``LocalLog.roll``). The caller fsyncs the directory."""
        segment = cls(directory, base_offset, config, now_ms)
        with io_errors(f"creating segment {segment.log_path}"):
            for path in (segment.log_path, segment.offset_index.path, segment.time_index.path):
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass
            segment._fd = os.open(segment.log_path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        segment.offset_index.open_empty()
        segment.time_index.open_empty()
        return segment

    @classmethod
    def load(cls, directory: Path, base_offset: int, config: LogConfig, now_ms: int) -> LogSegment:
        """Open an existing ``.log``; its indexes start empty until :meth:`recover` rebuilds
        them (Kafka recovers every metadata-log segment on every start)."""
        segment = cls(directory, base_offset, config, now_ms)
        with io_errors(f"opening segment {segment.log_path}"):
            segment._fd = os.open(segment.log_path, os.O_RDWR)
            segment.size = os.fstat(segment._fd).st_size
        segment.offset_index.open_empty()
        segment.time_index.open_empty()
        return segment

    @property
    def fd(self) -> int:
        """The open ``.log`` file descriptor. Raises KafkaStorageError when the segment is
        closed."""
        if self._fd is None:
            raise KafkaStorageError(f"segment {self.log_path} is closed")
        return self._fd

    # -- recovery

    def recover(
        self,
        expected_offset: int | None,
        on_batch: Callable[[BatchInfo], None] | None = None,
    ) -> RecoveryResult:
        """Validate every batch and rebuild both indexes; truncate the file after the last
        valid batch (``LogSegment.recover``).

        A batch is valid when it is whole, has a sane size, magic 2 and a matching CRC32C, and
        its offsets follow on: the first batch starts at ``expected_offset`` (or, when None, at
        or after the base offset) and every later one at the previous batch's next offset.
        ``on_batch`` sees every valid batch in order (the log feeds its leader-epoch cache from
        it). Returns what was kept and, in ``error``, why scanning stopped early (None for a
        clean end or a torn tail)."""
        self.offset_index.reset()
        self.time_index.reset()
        self.max_timestamp_so_far = NO_TIMESTAMP
        self.offset_of_max_timestamp_so_far = self.base_offset
        self.rolling_based_timestamp = None
        self.first_batch_leader_epoch = None
        file_size = self.size
        valid = 0
        last_index_entry = 0
        count = 0
        next_offset = self.base_offset if expected_offset is None else expected_offset
        expected = expected_offset
        error: str | None = None
        need = 0
        while valid < file_size and error is None:
            want = min(max(_READ_CHUNK, need), file_size - valid)
            with io_errors(f"reading {self.log_path}"):
                chunk = os.pread(self.fd, want, valid)
            result = scan_batches(chunk, expected_offset=expected, contiguous=True)
            for batch in result.batches:
                if count == 0 and batch.base_offset < self.base_offset:
                    error = (
                        f"at byte {valid}: batch offset {batch.base_offset} is below the "
                        f"segment base offset {self.base_offset}"
                    )
                    break
                if batch.last_offset - self.base_offset > 0x7FFFFFFF:
                    error = f"at byte {valid}: offset {batch.last_offset} overflows the segment"
                    break
                if batch.max_timestamp > self.max_timestamp_so_far:
                    self.max_timestamp_so_far = batch.max_timestamp
                    self.offset_of_max_timestamp_so_far = batch.last_offset
                if valid - last_index_entry > self.config.index_interval_bytes:
                    self.offset_index.append(batch.last_offset, valid)
                    self.time_index.maybe_append(
                        self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far
                    )
                    last_index_entry = valid
                if count == 0:
                    self.rolling_based_timestamp = batch.max_timestamp
                    self.first_batch_leader_epoch = batch.partition_leader_epoch
                if on_batch is not None:
                    on_batch(
                        BatchInfo(
                            valid,
                            batch.base_offset,
                            batch.last_offset,
                            batch.partition_leader_epoch,
                            batch.max_timestamp,
                            batch.size_in_bytes,
                        )
                    )
                valid += batch.size_in_bytes
                count += 1
                next_offset = expected = batch.next_offset
            if error is not None:
                break
            if result.error is not None:
                # scan positions are relative to the chunk, which started where `valid` did
                error = f"at byte {valid}: {result.error.split(': ', 1)[-1]}"
                break
            if not result.torn:
                continue  # the chunk held whole batches only
            if valid - result.valid_bytes + len(chunk) >= file_size:
                break  # a torn tail at the end of the file
            # The chunk ended inside a batch; read that batch whole next time.
            with io_errors(f"reading {self.log_path}"):
                head = os.pread(self.fd, LOG_OVERHEAD, valid)
            need = OFFSET_AND_LENGTH.unpack(head)[1] + LOG_OVERHEAD
            if valid + need > file_size:
                break  # torn
        truncated = file_size - valid
        if truncated:
            self._truncate_file(valid)
        self.next_offset = next_offset
        self._bytes_since_last_index_entry = 0
        self.offset_index.trim_to_valid_size()
        self.time_index.maybe_append(
            self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, skip_full_check=True
        )
        self.time_index.trim_to_valid_size()
        return RecoveryResult(valid, truncated, next_offset, count, error)

    def resize_indexes(self, size: int) -> None:
        """Give the active segment's indexes room again after recovery trimmed them."""
        self.offset_index.resize(size)
        self.time_index.resize(size)

    # -- appending

    def append(self, data: bytes | bytearray | memoryview, batches: list[RecordBatch]) -> None:
        """Append one set of already validated batches (``data`` is exactly their bytes) at
        the end of the file, adding index entries per the interval rule (``LogSegment.append``).

        Raises ValueError when the last offset cannot be stored relative to the base offset
        (nothing written), and KafkaStorageError; after that the segment's in-memory state is
        unchanged but the file may hold a partial write, which recovery removes."""
        if not batches:
            return
        largest_timestamp = NO_TIMESTAMP
        offset_of_largest = batches[0].last_offset
        for batch in batches:
            if batch.max_timestamp > largest_timestamp:
                largest_timestamp = batch.max_timestamp
                offset_of_largest = batch.last_offset
        largest_offset = batches[-1].last_offset
        if not self.offset_index.can_append_offset(largest_offset):
            raise ValueError(
                f"offset {largest_offset} cannot be stored in segment {self.base_offset}"
            )
        position = self.size
        with io_errors(f"appending to {self.log_path}"):
            write_all(self.fd, data, position)
        if position == 0:
            self.rolling_based_timestamp = largest_timestamp
            self.first_batch_leader_epoch = batches[0].partition_leader_epoch
        self.size = position + len(data)
        self.next_offset = batches[-1].next_offset
        if largest_timestamp > self.max_timestamp_so_far:
            self.max_timestamp_so_far = largest_timestamp
            self.offset_of_max_timestamp_so_far = offset_of_largest
        if self._bytes_since_last_index_entry > self.config.index_interval_bytes:
            self.offset_index.append(largest_offset, position)
            self.time_index.maybe_append(
                self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far
            )
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += len(data)

    def time_waited_for_roll(self, now_ms: int, max_timestamp_in_messages: int) -> int:
        """ms this segment has aged, for ``segment.ms``: ``max_timestamp_in_messages`` (ms) minus
        the first batch's max timestamp when that is known and >= 0, else ``now_ms`` minus
        ``created_ms`` (``LogSegment.timeWaitedForRoll``)."""
        ts = self.rolling_based_timestamp
        if ts is not None and ts >= 0:
            return max_timestamp_in_messages - ts
        return now_ms - self.created_ms

    def should_roll(
        self, messages_size: int, max_timestamp_in_messages: int, max_offset_in_messages: int, now_ms: int
    ) -> bool:
        """``LogSegment.shouldRoll`` (no roll jitter). An empty segment never rolls."""
        if self.size == 0:
            return False
        reached_roll_ms = (
            self.time_waited_for_roll(now_ms, max_timestamp_in_messages) > self.config.segment_ms
        )
        return (
            self.size > self.config.segment_bytes - messages_size
            or reached_roll_ms
            or self.offset_index.is_full()
            or self.time_index.is_full()
            or not self.offset_index.can_append_offset(max_offset_in_messages)
        )

    # -- reading

    def _header_at(self, position: int) -> tuple[int, int, int] | None:
        """``(base offset, last offset, size)`` of the batch at ``position``, None at the end."""
        if position + _HEADER_THROUGH_LAST_OFFSET_DELTA > self.size:
            return None
        with io_errors(f"reading {self.log_path}"):
            head = os.pread(self.fd, _HEADER_THROUGH_LAST_OFFSET_DELTA, position)
        if len(head) < _HEADER_THROUGH_LAST_OFFSET_DELTA:
            return None
        base_offset, length = OFFSET_AND_LENGTH.unpack_from(head, 0)
        last_offset_delta = int.from_bytes(head[23:27], "big", signed=True)
        return base_offset, base_offset + last_offset_delta, length + LOG_OVERHEAD

    def translate_offset(self, offset: int, starting_position: int = 0) -> tuple[int, int] | None:
        """``(position, size)`` of the first batch whose last offset is >= ``offset``, None if
        there is none (``LogSegment.translateOffset``)."""
        position = max(self.offset_index.lookup(offset)[1], starting_position)
        while True:
            header = self._header_at(position)
            if header is None:
                return None
            _, last_offset, size = header
            if last_offset >= offset:
                return position, size
            position += size

    def read(
        self, start_offset: int, max_bytes: int, max_position: int | None = None, *, at_least_one: bool = True
    ) -> tuple[int, bytes] | None:
        """Whole batches from the one holding ``start_offset``: at most ``max_bytes`` but at
        least one batch (unless ``at_least_one`` is False and that batch alone is larger), none
        at or after ``max_position``. Returns ``(position, bytes)``, or None when no batch holds
        an offset >= ``start_offset``."""
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        position, first_size = found
        end = self.size if max_position is None else min(max_position, self.size)
        if position + first_size > end or (first_size > max_bytes and not at_least_one):
            return position, b""
        want = min(max(max_bytes, first_size), end - position)
        with io_errors(f"reading {self.log_path}"):
            data = os.pread(self.fd, want, position)
        cut = 0
        while cut + LOG_OVERHEAD <= len(data):
            size = OFFSET_AND_LENGTH.unpack_from(data, cut)[1] + LOG_OVERHEAD
            if cut + size > len(data):
                break
            cut += size
        return position, data[:cut] if cut < len(data) else data

    def locate(self, start_offset: int, max_bytes: int, max_position: int | None = None) -> tuple[int, int] | None:
        """Where :meth:`read` (``at_least_one``) would read, without reading it: ``(position,
        length)`` of the whole batches from the one holding ``start_offset``, at most
        ``max_bytes`` but at least one batch, none at or after ``max_position``; the length is
        0 when that first batch passes ``max_position``. None when no batch holds an offset >=
        ``start_offset``. The end is found from the offset index's batch positions and the
        headers after the last one that fits (one small read each), never from the data."""
        found = self.translate_offset(start_offset)
        if found is None:
            return None
        position, first_size = found
        end = self.size if max_position is None else min(max_position, self.size)
        if position + first_size > end:
            return position, 0
        limit = position + max(max_bytes, first_size)
        if end <= limit:
            return position, end - position
        cut = max(position + first_size, self.offset_index.floor_position(limit))
        while (header := self._header_at(cut)) is not None and cut + header[2] <= limit:
            cut += header[2]
        return position, cut - position

    def read_at(self, position: int, length: int) -> bytes:
        """``length`` bytes of the ``.log`` from byte ``position`` (a :meth:`locate` result)."""
        with io_errors(f"reading {self.log_path}"):
            return os.pread(self.fd, length, position)

    def read_all(self) -> bytes:
        """The whole ``.log`` file."""
        with io_errors(f"reading {self.log_path}"):
            return os.pread(self.fd, self.size, 0) if self.size else b""

    # -- truncation, flushing, closing

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset`` -- a batch holding ``offset``
        goes entirely -- and the index entries at or past ``offset``; returns the bytes removed
        (``LogSegment.truncateTo``)."""
        mapping = self.translate_offset(offset)
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.resize_indexes(self.config.max_index_size)
        removed = 0
        if mapping is not None:
            removed = self.size - mapping[0]
            self._truncate_file(mapping[0])
        self._bytes_since_last_index_entry = 0
        self._reload_tail_state()
        return removed

    def _reload_tail_state(self) -> None:
        # Recompute next offset and max timestamp from the last time-index entry onwards
        # (``LogSegment.readLargestTimestamp`` / ``readNextOffset``).
        if self.size == 0:
            self.next_offset = self.base_offset
            self.rolling_based_timestamp = None
            self.first_batch_leader_epoch = None
            self.max_timestamp_so_far = NO_TIMESTAMP
            self.offset_of_max_timestamp_so_far = self.base_offset
            return
        max_ts, max_ts_offset = self.time_index.last_entry
        if not self.time_index.entries:
            max_ts = NO_TIMESTAMP
        position = self.offset_index.lookup(max_ts_offset)[1] if self.time_index.entries else 0
        last_next = self.base_offset
        with io_errors(f"reading {self.log_path}"):
            data = os.pread(self.fd, self.size - position, position)
        for batch in scan_batches(data, validate_crc=False).batches:
            if batch.max_timestamp > max_ts:
                max_ts, max_ts_offset = batch.max_timestamp, batch.last_offset
            last_next = batch.next_offset
        self.max_timestamp_so_far = max_ts
        self.offset_of_max_timestamp_so_far = max_ts_offset
        self.next_offset = last_next

    def _truncate_file(self, size: int) -> None:
        with io_errors(f"truncating {self.log_path}"):
            os.ftruncate(self.fd, size)
        self.size = size

    def flush(self, *, indexes: bool = False) -> None:
        """fsync the ``.log`` (``LogSegment.flush``); with ``indexes`` also both index files.

        The indexes are rebuilt from the ``.log`` every time the log is opened, so their
        durability never matters for correctness; the hot path skips their fsyncs."""
        with io_errors(f"fsync of {self.log_path}"):
            fsync_fd(self.fd)
        if indexes:
            self.offset_index.flush()
            self.time_index.flush()

    def on_become_inactive(self) -> None:
        """Write the final time-index entry and trim both indexes (``onBecomeInactiveSegment``)."""
        self.time_index.maybe_append(
            self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, skip_full_check=True
        )
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    def close(self) -> None:
        """Final time-index entry, trimmed indexes, file closed (``LogSegment.close``)."""
        if self._fd is None:
            return
        try:
            self.time_index.maybe_append(
                self.max_timestamp_so_far, self.offset_of_max_timestamp_so_far, skip_full_check=True
            )
            self.offset_index.close()
            self.time_index.close()
        finally:
            fd, self._fd = self._fd, None
            with io_errors(f"closing {self.log_path}"):
                os.close(fd)

    def close_handlers(self) -> None:
        """Close every descriptor without touching the files (after a failure)."""
        self.offset_index.close_handler()
        self.time_index.close_handler()
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.close(fd)
            except OSError:
                pass

    def delete(self) -> None:
        """Remove the segment's files (the ``.log`` first, so a crash leaves at worst orphan
        indexes, which loading removes)."""
        self.close_handlers()
        with io_errors(f"deleting {self.log_path}"):
            for path in (self.log_path, self.offset_index.path, self.time_index.path):
                try:
                    os.unlink(path)
                except FileNotFoundError:
                    pass

    def __repr__(self) -> str:
        return (
            f"LogSegment(base_offset={self.base_offset}, size={self.size}, "
            f"next_offset={self.next_offset})"
        )
