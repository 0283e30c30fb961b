"""Record batch v2 (magic 2): a zero-copy view over a batch's bytes.

Mirrors ``org.apache.kafka.common.record.DefaultRecordBatch`` (header, CRC, iteration). The
header layout and its constants are in :mod:`storage.batch_layout`, one record's encoding in
:mod:`storage.record_codec`; batches are built by :mod:`storage.batch_builder` and found in a
buffer (a segment, a Fetch's records) by :mod:`storage.batch_scan`.

A :class:`RecordBatch` parses only the 61-byte header (one precompiled ``struct`` unpack) and
keeps a memoryview of the whole batch, so a batch read from a segment can be sent in a Fetch
response unchanged. Records are decoded on demand.

The loops every committed record passes through, :meth:`RecordBatch.iter_values`,
:meth:`RecordBatch.iter_selected_values` and :meth:`RecordBatch.validate_records`, run
compiled where :data:`storage.record_loops.COMPILED` (see :mod:`storage.record_loops`); the
Python loops stay the reference and name the error for a record the compiled ones refuse.
"""

from __future__ import annotations

from collections.abc import Iterator

import crc32c

from storage import record_loops
from storage.batch_layout import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER,
    COMPRESSION_CODEC_MASK,
    CONTROL_FLAG_MASK,
    DELETE_HORIZON_FLAG_MASK,
    LOG_OVERHEAD,
    MAGIC_VALUE_V2,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    RECORD_BATCH_OVERHEAD,
    RECORDS_OFFSET,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
    Buffer,
    TimestampType,
    increment_sequence,
)
from storage.compression import CompressionType, decompress
from storage.errors import CorruptRecordError, InvalidRecordError
from storage.record_codec import Record, read_record


class RecordBatch:
    """A v2 record batch over exactly the batch's bytes (no copy).

    Construction checks only what is needed to frame the batch: at least 61 bytes, magic 2, and
    ``Length + 12 == len(buffer)``; it raises :class:`CorruptRecordError` otherwise. The CRC is
    checked by :meth:`ensure_valid`, record structure by :meth:`records`.
    """

    __slots__ = (
        "_buf",
        "base_offset",
        "batch_length",
        "partition_leader_epoch",
        "magic",
        "crc",
        "attributes",
        "last_offset_delta",
        "base_timestamp",
        "max_timestamp",
        "producer_id",
        "producer_epoch",
        "base_sequence",
        "records_count",
    )

    def __init__(self, buffer: Buffer) -> None:
        buf = buffer if isinstance(buffer, memoryview) else memoryview(buffer)
        if len(buf) < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordError(
                f"Record batch is corrupt (the size {len(buf)} is smaller than the minimum "
                f"allowed overhead {RECORD_BATCH_OVERHEAD})"
            )
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.records_count,
        ) = BATCH_HEADER.unpack_from(buf, 0)
        if self.magic != MAGIC_VALUE_V2:
            raise CorruptRecordError(f"unsupported record batch magic {self.magic}")
        if self.batch_length + LOG_OVERHEAD != len(buf):
            raise CorruptRecordError(
                f"batch length field {self.batch_length} does not match its {len(buf)} bytes"
            )
        self._buf = buf

    # -- sizes and offsets

    @property
    def buffer(self) -> memoryview:
        """The batch's bytes, as stored on disk and sent on the wire."""
        return self._buf

    def to_bytes(self) -> bytes:
        """A copy of the whole batch."""
        return bytes(self._buf)

    @property
    def size_in_bytes(self) -> int:
        """The whole batch in bytes: Length + 12 (``sizeInBytes``)."""
        return len(self._buf)

    @property
    def last_offset(self) -> int:
        """Offset of the batch's last record, inclusive: BaseOffset + LastOffsetDelta."""
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        """The offset after the batch: :attr:`last_offset` + 1 (``nextOffset``)."""
        return self.last_offset + 1

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record, wrapping past INT32_MAX; -1 when BaseSequence is -1
        (``DefaultRecordBatch.lastSequence``)."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    # -- attributes

    @property
    def compression(self) -> CompressionType:
        """Attribute bits 0-2. Raises CompressionError for ids 5-7."""
        return CompressionType.for_id(self.attributes & COMPRESSION_CODEC_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        """Attribute bit 3: LOG_APPEND_TIME when set, else CREATE_TIME."""
        return (
            TimestampType.LOG_APPEND_TIME
            if self.attributes & TIMESTAMP_TYPE_MASK
            else TimestampType.CREATE_TIME
        )

    @property
    def is_transactional(self) -> bool:
        """Attribute bit 4."""
        return bool(self.attributes & TRANSACTIONAL_FLAG_MASK)

    @property
    def is_control(self) -> bool:
        """Attribute bit 5: the batch holds control records (see :mod:`storage.control`)."""
        return bool(self.attributes & CONTROL_FLAG_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        """Attribute bit 6: BaseTimestamp holds the delete horizon (ms) set by log compaction."""
        return bool(self.attributes & DELETE_HORIZON_FLAG_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        """The delete horizon (stored in BaseTimestamp) when bit 6 is set, else None."""
        return self.base_timestamp if self.has_delete_horizon else None

    @property
    def has_producer_id(self) -> bool:
        """True when ProducerId is not -1 (``hasProducerId``); KRaft batches never have one."""
        return self.producer_id > NO_PRODUCER_ID

    # -- integrity

    def compute_crc(self) -> int:
        """CRC-32C (unsigned 32-bit) of bytes [21, end of batch), Attributes onwards
        (``DefaultRecordBatch.computeChecksum``)."""
        return crc32c.crc32c(self._buf[ATTRIBUTES_OFFSET:])

    def is_valid(self) -> bool:
        """True when the stored CRC matches :meth:`compute_crc` (``isValid``); never raises."""
        return self.compute_crc() == self.crc

    def ensure_valid(self) -> None:
        """Raise CorruptRecordError unless the stored CRC matches (``ensureValid``)."""
        computed = self.compute_crc()
        if computed != self.crc:
            raise CorruptRecordError(
                f"Record is corrupt (stored crc = {self.crc}, computed crc = {computed})"
            )

    # -- records

    def records_section(self) -> bytes:
        """The uncompressed records bytes. Raises CompressionError (a DecodeError)."""
        data = self._buf[RECORDS_OFFSET:]
        codec = self.attributes & COMPRESSION_CODEC_MASK
        if codec == 0:
            return bytes(data)
        return decompress(CompressionType.for_id(codec), data)

    def records(self) -> list[Record]:
        """Decode every record. Raises InvalidRecordError (or CompressionError) when the records
        do not match the header, as ``DefaultRecordBatch``'s iterators do."""
        return list(self.iter_records())

    def iter_records(self) -> Iterator[Record]:
        """Decode the records one at a time, as :meth:`records` does; the errors it names are
        raised while iterating, after the records before the bad one were yielded."""
        if self.records_count < 0:
            raise InvalidRecordError(f"Found invalid record count {self.records_count} in magic v2 batch")
        data = self.records_section()
        log_append_time = (
            self.max_timestamp if self.attributes & TIMESTAMP_TYPE_MASK else None
        )
        pos = 0
        for _ in range(self.records_count):
            record, pos = read_record(
                data, pos, self.base_offset, self.base_timestamp, self.base_sequence, log_append_time
            )
            yield record
        if pos != len(data):
            raise InvalidRecordError("Incorrect declared batch size, records still remaining in file")

    def validate_records(self) -> None:
        """Raise InvalidRecordError (or CompressionError) unless the records section holds
        ``records_count`` records that :func:`read_record` accepts, at offsets from the base to
        the last offset, and nothing after them: the compiled loop (``_crecords.check``) when it
        is built, the Python reader naming the error when that loop refuses (or is not built)."""
        if record_loops.COMPILED and self.records_count >= 0:
            try:
                if record_loops.check(self.records_section(), self.records_count, self.last_offset - self.base_offset):
                    return
            except ValueError:
                pass  # the Python reader raises Kafka's error for the record it stops at
        for record in self.iter_records():
            if not self.base_offset <= record.offset <= self.last_offset:
                raise InvalidRecordError(f"record offset {record.offset} outside the batch")

    def iter_values(self) -> Iterator[bytes | None]:
        """Each record's value (None for a null value), without building :class:`Record`
        objects: for readers that only need the values of batches already validated (e.g. a
        state machine scanning committed data). Raises InvalidRecordError (or CompressionError)
        for records that do not parse."""
        if record_loops.COMPILED:
            try:
                found = record_loops.values(self._section_for_reading(), self.records_count)
                if found is not None:
                    return iter(found)
            except ValueError:
                pass  # the Python reader raises Kafka's error for the record it stops at
        return self._iter_values_python()

    def _section_for_reading(self) -> Buffer:
        """The records section, decompressed, without a copy when it is not compressed."""
        if self.attributes & COMPRESSION_CODEC_MASK == 0:
            return self._buf[RECORDS_OFFSET:]
        return self.records_section()

    def iter_selected_values(self, wanted: bytes) -> Iterator[tuple[int, bytes]]:
        """``(index, value)`` of each record whose value is at least two bytes long and whose
        second byte ``b`` -- a metadata record's type id, after its frame version -- has
        ``wanted[b]`` non-zero (``wanted``: 256 bytes), in order; the other values are not
        copied out of the batch (a state machine skipping the records it does not replay, e.g.
        NoOpRecords). Raises as :meth:`iter_values`."""
        if len(wanted) != 256:
            raise ValueError(f"wanted must be 256 bytes, not {len(wanted)}")
        if record_loops.COMPILED:
            try:
                selected = record_loops.selected_values(self._section_for_reading(), self.records_count, wanted)
                if selected is not None:
                    return iter(selected)
            except ValueError:
                pass  # the Python reader raises Kafka's error for the record it stops at
        return (
            (index, value) for index, value in enumerate(self._iter_values_python())
            if value is not None and len(value) >= 2 and wanted[value[1]]
        )

    def _iter_values_python(self) -> Iterator[bytes | None]:
        """:meth:`iter_values` in Python (the reference)."""
        yield from record_loops.walk_values(self.records_section(), self.records_count)

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"count={self.records_count}, epoch={self.partition_leader_epoch}, "
            f"size={self.size_in_bytes}, control={self.is_control}, "
            f"compression={self.compression.codec_name})"
        )
