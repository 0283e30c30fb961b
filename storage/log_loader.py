"""Recovering the segments of the metadata log when it is opened.

Mirrors ``kafka.log.LogLoader`` for the metadata log, which Kafka always recovers from offset 0
(recovery point 0, unclean shutdown assumed): temporary files are removed
(``removeTempFilesAndCollectSwapFiles``), every segment is recovered in turn
(:meth:`storage.segment.LogSegment.recover`: each batch CRC-checked, indexes rebuilt), and the
first torn or corrupt tail is cut off with every later segment deleted (``recoverLog``). A gap
between two segments is damage too: the segments from the gap on are deleted.
:class:`storage.log.MetadataLog` runs this when it opens.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from storage.fileio import io_errors
from storage.leader_epoch import LEADER_EPOCH_CHECKPOINT_FILE, LeaderEpochCache
from storage.partition_metadata import PARTITION_METADATA_FILE
from storage.segment import (
    CLEANED_FILE_SUFFIX,
    DELETED_FILE_SUFFIX,
    INDEX_FILE_SUFFIX,
    LOG_FILE_SUFFIX,
    SWAP_FILE_SUFFIX,
    TIME_INDEX_FILE_SUFFIX,
    TXN_INDEX_FILE_SUFFIX,
    BatchInfo,
    LogConfig,
    LogSegment,
    offset_from_file_name,
)

# The metadata log's lines keep the one logger name operators filter on, whichever module of
# the log writes them.
logger = logging.getLogger("storage.log")


@dataclass(frozen=True, slots=True)
class OpenReport:
    """What recovery found when the log was opened: ``segments`` kept, valid ``batches``,
    ``truncated_bytes`` cut off a torn or corrupt tail, base offsets of ``deleted_segments``
    (those after a torn or corrupt segment, or from a gap between segments on), and ``error``
    describing the damage (None for a clean log)."""

    segments: int
    batches: int
    truncated_bytes: int
    deleted_segments: list[int]
    error: str | None


def remove_temp_files(directory: Path) -> None:
    """Delete the leftovers of interrupted work in a partition directory: ``.deleted``,
    ``.cleaned`` and ``.swap`` files (``LogLoader.removeTempFilesAndCollectSwapFiles``), the
    ``.tmp`` of ``leader-epoch-checkpoint`` and ``partition.metadata``, and index files whose
    ``.log`` is gone. Snapshots marked ``.checkpoint.deleted`` are left to snapshot recovery.
    Raises KafkaStorageError."""
    names = set(os.listdir(directory))
    doomed = [
        n
        for n in names
        if n.endswith((DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX))
        or n in (LEADER_EPOCH_CHECKPOINT_FILE + ".tmp", PARTITION_METADATA_FILE + ".tmp")
    ]
    for name in names:
        if name.endswith((INDEX_FILE_SUFFIX, TIME_INDEX_FILE_SUFFIX, TXN_INDEX_FILE_SUFFIX)):
            stem = name.rsplit(".", 1)[0]
            if offset_from_file_name(name) is not None and stem + LOG_FILE_SUFFIX not in names:
                doomed.append(name)
    for name in doomed:
        if name.endswith(".checkpoint.deleted"):
            continue  # snapshot clean-up handles these
        with io_errors(f"deleting {name}"), contextlib.suppress(FileNotFoundError):
            os.unlink(directory / name)


def recover_segments(
    directory: Path,
    config: LogConfig,
    now_ms: int,
    cache: LeaderEpochCache,
    segments: list[LogSegment],
    log_start_offset: int,
) -> OpenReport:
    """Recover the ``.log`` segments of ``directory`` in base offset order, appending each one
    kept to ``segments`` (so a caller can close them should a later one fail); every batch with
    a leader epoch above the latest in ``cache`` starts that epoch there. Stops at the first
    segment that does not start where the previous one ended, or that had a torn or corrupt
    tail cut off, and deletes every segment after it, logging a warning. Appends an empty
    segment at ``log_start_offset`` when none is left. ``now_ms`` is wall-clock ms (segment
    roll times). Returns what it found; raises KafkaStorageError (and InconsistentStateError
    from the epoch cache)."""
    bases = sorted(
        offset
        for name in os.listdir(directory)
        if name.endswith(LOG_FILE_SUFFIX) and (offset := offset_from_file_name(name)) is not None
    )

    def on_batch(info: BatchInfo) -> None:
        latest = cache.latest_epoch
        if info.partition_leader_epoch >= 0 and (latest is None or info.partition_leader_epoch > latest):
            cache.assign(info.partition_leader_epoch, info.base_offset)

    expected: int | None = None
    truncated_bytes = 0
    batches = 0
    doomed: list[int] = []
    error: str | None = None
    for i, base_offset in enumerate(bases):
        if expected is not None and base_offset != expected:
            error = f"segment {base_offset} does not start where the previous one ends ({expected})"
            doomed = bases[i:]
            break
        segment = LogSegment.load(directory, base_offset, config, now_ms)
        segments.append(segment)
        result = segment.recover(expected, on_batch)
        batches += result.batches
        truncated_bytes += result.truncated_bytes
        expected = segment.next_offset
        if result.truncated_bytes or result.error is not None:
            error = result.error or f"torn tail of {result.truncated_bytes} bytes in segment {base_offset}"
            doomed = bases[i + 1 :]
            break
    if error is not None:
        # Everything after a damaged segment goes, as LogLoader.recoverLog does.
        logger.warning("metadata log recovery in %s: %s; deleting segments %s", directory, error, doomed)
        for later in doomed:
            LogSegment(directory, later, config, now_ms).delete()
    if not segments:
        segments.append(LogSegment.create(directory, log_start_offset, config, now_ms))
    return OpenReport(len(segments), batches, truncated_bytes, doomed, error)
