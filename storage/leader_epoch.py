"""``leader-epoch-checkpoint`` and the leader-epoch cache it persists.

Mirrors ``LeaderEpochCheckpointFile`` / ``CheckpointFile`` (the file) and
``LeaderEpochFileCache`` (the rules). The file is UTF-8 text with ``\\n`` line ends::

    0                      version
    3                      number of entries
    0 0                    "<epoch> <start offset>" per entry, ascending
    2 150
    5 311

A fresh log has the file present and empty (``CheckpointFile`` creates it); it is rewritten
through ``leader-epoch-checkpoint.tmp`` + fsync + rename + directory fsync on every change
(Kafka flushes truncations asynchronously; kwire writes them at once, which is never less
durable).
"""

from __future__ import annotations

import os
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from pathlib import Path

from storage.checkpoint import decode_checkpoint_lines, encode_checkpoint_lines, parse_int
from storage.fileio import atomic_write, io_errors

LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


@dataclass(frozen=True, slots=True, order=True)
class EpochEntry:
    """One line of the checkpoint: leader ``epoch`` and the first offset written in it
    (``org.apache.kafka.storage.internals.log.EpochEntry``). Orders by epoch, then offset."""

    epoch: int
    start_offset: int


def encode_checkpoint(entries: list[EpochEntry]) -> bytes:
    """The whole file for ``entries`` in the given order: version line, count line, one
    ``<epoch> <start offset>`` line each, every line ending in ``\\n`` (``CheckpointFile.write``).
    Raises nothing."""
    return encode_checkpoint_lines([(e.epoch, e.start_offset) for e in entries])


def decode_checkpoint(data: bytes, location: str = "leader-epoch-checkpoint") -> list[EpochEntry]:
    """Parse the file (``CheckpointReadBuffer.read``). An empty file, or one with only the
    version line, holds no entries. Raises InconsistentStateError when malformed."""
    return [
        EpochEntry(parse_int(epoch, location, line), parse_int(offset, location, line))
        for line in decode_checkpoint_lines(data, location, 2)
        for epoch, offset in [line]
    ]


class LeaderEpochCache:
    """Epoch -> start offset, ascending in both, persisted to ``leader-epoch-checkpoint``
    (``LeaderEpochFileCache``).

    ``path`` None keeps the cache in memory only (for tests and tools). Every change is written
    at once with :func:`storage.fileio.atomic_write` and raises KafkaStorageError when that
    fails."""

    def __init__(self, path: Path | None, entries: list[EpochEntry] | None = None) -> None:
        self.path = path
        self._entries: list[EpochEntry] = sorted(entries or [])

    @classmethod
    def load(cls, partition_dir: Path) -> LeaderEpochCache:
        """Read the checkpoint in ``partition_dir``, creating it empty when missing.

        Raises InconsistentStateError (malformed) or KafkaStorageError (I/O)."""
        path = partition_dir / LEADER_EPOCH_CHECKPOINT_FILE
        with io_errors(f"reading {path}"):
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                os.close(fd)
                data = b""
        return cls(path, decode_checkpoint(data, str(path)))

    # -- queries

    @property
    def entries(self) -> list[EpochEntry]:
        """A copy of the entries, ascending."""
        return list(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        """The highest epoch, None when empty (``LeaderEpochFileCache.latestEpoch``)."""
        return self._entries[-1].epoch if self._entries else None

    @property
    def latest_entry(self) -> EpochEntry | None:
        """The entry with the highest epoch, None when empty."""
        return self._entries[-1] if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        """The entry with the lowest epoch, None when empty."""
        return self._entries[0] if self._entries else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range holds ``offset``: the last entry starting at or before it, None
        when ``offset`` precedes every entry (``LeaderEpochFileCache.epochForOffset``)."""
        starts = [e.start_offset for e in self._entries]
        slot = bisect_right(starts, offset) - 1
        return self._entries[slot].epoch if slot >= 0 else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """``(epoch, end offset)`` for ``requested_epoch`` (``LeaderEpochFileCache.endOffsetFor``):
        the largest known epoch <= the requested one and the start offset of the next epoch (or
        the log end offset for the latest); ``(-1, -1)`` when unknown."""
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._entries[-1].epoch == requested_epoch:
            return requested_epoch, log_end_offset
        epochs = [e.epoch for e in self._entries]
        higher = bisect_right(epochs, requested_epoch)
        if higher >= len(self._entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        higher_entry = self._entries[higher]
        floor = higher - 1
        if floor < 0:
            return requested_epoch, higher_entry.start_offset
        return self._entries[floor].epoch, higher_entry.start_offset

    # -- changes (each persisted at once)

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset`` (``LeaderEpochFileCache.assign``):
        a no-op unless the epoch differs from the latest or starts earlier; entries with an
        epoch >= ``epoch`` or a start offset >= ``start_offset`` are removed first. Returns
        True when the cache changed. Raises ValueError for negative values and
        KafkaStorageError when the file cannot be written."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"Received invalid partition leader epoch entry ({epoch}, {start_offset})")
        latest = self.latest_entry
        if latest is not None and latest.epoch == epoch and start_offset >= latest.start_offset:
            return False
        while self._entries and (
            self._entries[-1].epoch >= epoch or self._entries[-1].start_offset >= start_offset
        ):
            self._entries.pop()
        self._entries.append(EpochEntry(epoch, start_offset))
        self._write()
        return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """Remove entries starting at or after ``end_offset`` (after a log truncation to
        ``end_offset``, exclusive; ``LeaderEpochFileCache.truncateFromEndAsyncFlush``). A negative
        ``end_offset`` changes nothing. Returns True when the cache changed. Raises
        KafkaStorageError."""
        if end_offset < 0 or not self._entries or self._entries[-1].start_offset < end_offset:
            return False
        starts = [e.start_offset for e in self._entries]
        del self._entries[bisect_left(starts, end_offset) :]
        self._write()
        return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """Drop entries wholly before a new log start offset; the last of them is kept with
        its start moved up to ``start_offset`` (``truncateFromStartAsyncFlush``). Entries starting
        at or before ``start_offset`` count as before it. Returns True when the cache changed.
        Raises KafkaStorageError."""
        removed = [e for e in self._entries if e.start_offset <= start_offset]
        if not removed:
            return False
        kept = [e for e in self._entries if e.start_offset > start_offset]
        self._entries = [EpochEntry(removed[-1].epoch, start_offset), *kept]
        self._write()
        return True

    def clear(self) -> None:
        """Remove every entry and write the empty file (``clearAndFlush``). Raises
        KafkaStorageError."""
        self._entries.clear()
        self._write()

    def _write(self) -> None:
        if self.path is not None:
            atomic_write(self.path, encode_checkpoint(self._entries))
