"""Walking a buffer of v2 batches (a segment's bytes, a Fetch's records): framing each batch,
finding the longest valid prefix, reading headers without building batch objects.

Mirrors ``org.apache.kafka.common.record.ByteBufferLogInputStream`` / ``FileLogInputStream``
(framing, ``nextBatchSize``) and the validation ``LogSegment.recover`` does over them. The
layout is in :mod:`storage.batch_layout`; each batch is a :class:`storage.records.RecordBatch`.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c

from storage.batch_layout import (
    ATTRIBUTES_OFFSET,
    HEADER_SIZE_UP_TO_MAGIC,
    INT32,
    INT64,
    LAST_OFFSET_DELTA_OFFSET,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_VALUE_V2,
    RECORD_BATCH_OVERHEAD,
    RECORD_OVERHEAD_V0,
    Buffer,
)
from storage.errors import CorruptRecordError
from storage.records import RecordBatch


@dataclass(slots=True)
class ScanResult:
    """What :func:`scan_batches` found.

    ``valid_bytes`` is the length of the prefix made of complete batches that passed every
    check; ``error`` says why scanning stopped early (None when the whole buffer was valid or
    ended in an incomplete batch); ``torn`` is True when the buffer ends inside a batch.
    """

    batches: list[RecordBatch]
    valid_bytes: int
    error: str | None
    torn: bool

    @property
    def next_offset(self) -> int | None:
        """The offset after the last valid batch, None when no batch was valid."""
        return self.batches[-1].next_offset if self.batches else None


def next_batch_size(buf: Buffer, pos: int) -> int | None:
    """Size of the batch starting at ``pos`` if it is wholly present, None if the buffer ends
    first (a torn tail). Raises CorruptRecordError when the size field or magic is impossible
    (``ByteBufferLogInputStream.nextBatchSize`` / ``FileLogInputStream.nextBatch``)."""
    remaining = len(buf) - pos
    if remaining < LOG_OVERHEAD:
        return None
    size = INT32.unpack_from(buf, pos + 8)[0]
    if size < RECORD_OVERHEAD_V0:
        raise CorruptRecordError(
            f"Record size {size} is less than the minimum record overhead ({RECORD_OVERHEAD_V0})"
        )
    if remaining < HEADER_SIZE_UP_TO_MAGIC:
        return None
    magic = buf[pos + MAGIC_OFFSET]
    if magic != MAGIC_VALUE_V2:
        raise CorruptRecordError(f"Invalid magic found in record: {magic}")
    if remaining < size + LOG_OVERHEAD:
        return None
    return size + LOG_OVERHEAD


def next_offset_after(buffer: Buffer) -> int | None:
    """The offset after the last whole batch of ``buffer``, from the batch headers alone (no
    batch objects, no CRC check); None when it holds no whole batch. Raises as
    :func:`next_batch_size`."""
    pos, after = 0, None
    while (size := next_batch_size(buffer, pos)) is not None:
        after = INT64.unpack_from(buffer, pos)[0] + INT32.unpack_from(buffer, pos + LAST_OFFSET_DELTA_OFFSET)[0] + 1
        pos += size
    return after


_SUMMARY_HEADER = struct.Struct(">qiibIhi")  # BaseOffset .. LastOffsetDelta


def batch_headers(buffer: Buffer, start: int = 0) -> Iterator[tuple[int, int, int, int, int, int, bool]]:
    """``(position, size, base offset, last offset, partition leader epoch, stored CRC, CRC
    matches)`` of each whole batch of ``buffer`` from ``start``, without building batch objects
    (a replica audit's walk over a broker's segments). Stops silently at an incomplete trailing
    batch, as :func:`iter_batches`; raises CorruptRecordError as :func:`next_batch_size` does,
    or for a batch shorter than the v2 header."""
    buf = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
    unpack, checksum = _SUMMARY_HEADER.unpack_from, crc32c.crc32c
    pos = start
    while (size := next_batch_size(buf, pos)) is not None:
        if size < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"Record batch is corrupt (the size {size} is smaller than the minimum allowed overhead "
                f"{RECORD_BATCH_OVERHEAD})"
            )
        base_offset, _length, epoch, _magic, crc, _attributes, delta = unpack(buf, pos)
        yield pos, size, base_offset, base_offset + delta, epoch, crc, checksum(buf[pos + ATTRIBUTES_OFFSET:pos + size]) == crc
        pos += size


def iter_batches(buffer: Buffer, start: int = 0) -> Iterator[RecordBatch]:
    """Yield the batches of ``buffer`` (a Fetch's records, a file's bytes) without checking
    CRCs, stopping silently at an incomplete trailing batch as Kafka's readers do.

    Raises CorruptRecordError on an impossible size or magic."""
    buf = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
    pos = start
    while True:
        size = next_batch_size(buf, pos)
        if size is None:
            return
        yield RecordBatch(buf[pos : pos + size])
        pos += size


def scan_batches(
    buffer: Buffer,
    *,
    start: int = 0,
    expected_offset: int | None = None,
    contiguous: bool = False,
    validate_crc: bool = True,
    max_batch_bytes: int | None = None,
) -> ScanResult:
    """Walk ``buffer`` from ``start`` and find its longest valid prefix of whole batches.

    Stops at the first batch that is torn (incomplete), has an impossible size or magic, a bad
    CRC, a negative LastOffsetDelta, or is larger than ``max_batch_bytes``; and, when
    ``expected_offset`` is given or ``contiguous`` is set, at the first batch whose BaseOffset
    is not ``expected_offset`` (first batch) or the previous batch's next offset. Never raises
    for bad bytes. Segment recovery (``LogSegment.recover``) is built on it.
    """
    buf = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
    batches: list[RecordBatch] = []
    pos = start
    expected = expected_offset
    while True:
        try:
            size = next_batch_size(buf, pos)
        except CorruptRecordError as exc:
            return ScanResult(batches, pos - start, f"at byte {pos}: {exc}", False)
        if size is None:
            return ScanResult(batches, pos - start, None, pos < len(buf))
        if max_batch_bytes is not None and size > max_batch_bytes:
            return ScanResult(
                batches, pos - start, f"at byte {pos}: batch of {size} bytes is too large", False
            )
        try:
            batch = RecordBatch(buf[pos : pos + size])
            if validate_crc:
                batch.ensure_valid()
        except CorruptRecordError as exc:
            return ScanResult(batches, pos - start, f"at byte {pos}: {exc}", False)
        if batch.last_offset_delta < 0:
            return ScanResult(
                batches,
                pos - start,
                f"at byte {pos}: negative last offset delta {batch.last_offset_delta}",
                False,
            )
        if expected is not None and batch.base_offset != expected:
            return ScanResult(
                batches,
                pos - start,
                f"at byte {pos}: base offset {batch.base_offset}, expected {expected}",
                False,
            )
        batches.append(batch)
        if contiguous or expected_offset is not None:
            expected = batch.next_offset
        pos += size
