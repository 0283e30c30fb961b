"""Record batch v2 (magic 2): a zero-copy view over batch bytes, records, a builder, and scanning.

Mirrors ``org.apache.kafka.common.record.DefaultRecordBatch`` (header, CRC, iteration),
``DefaultRecord`` (records), ``MemoryRecordsBuilder`` (building) and ``FileLogInputStream`` /
``ByteBufferLogInputStream`` (walking a buffer of batches). All integers big-endian::

     0  BaseOffset            int64
     8  Length                int32   bytes after this field (batch size - 12)
    12  PartitionLeaderEpoch  int32   -- not covered by the CRC
    16  Magic                 int8    = 2
    17  CRC                   uint32  CRC-32C of bytes [21, end of batch)
    21  Attributes            int16   bits 0-2 compression, 3 timestamp type (1 = LogAppendTime),
                                      4 transactional, 5 control, 6 delete horizon set
    23  LastOffsetDelta       int32
    27  BaseTimestamp         int64   (the delete horizon when bit 6 is set)
    35  MaxTimestamp          int64
    43  ProducerId            int64
    51  ProducerEpoch         int16
    53  BaseSequence          int32
    57  RecordsCount          int32
    61  Records               (compressed as one stream when bits 0-2 != 0)

Each record (zig-zag varints, ``ByteUtils.writeVarint``/``writeVarlong``)::

    Length varint (bytes after it) | Attributes int8 | TimestampDelta varlong | OffsetDelta varint
    | KeyLength varint (-1 = null) | Key | ValueLength varint (-1 = null) | Value
    | HeadersCount varint | { KeyLength varint | Key utf-8 | ValueLength varint | Value } ...

A :class:`RecordBatch` parses only the 61-byte header (one precompiled ``struct`` unpack) and
keeps a memoryview of the whole batch, so a batch read from a segment can be sent in a Fetch
response unchanged. Records are decoded on demand.

The two loops every committed record passes through, :meth:`RecordBatch.iter_values` and
:func:`encode_keyless_records`, have a compiled counterpart (``storage/_crecords.c``, built by
``pip install`` when a C compiler is there). :data:`COMPILED` says whether it runs;
``KWIRE_PURE_PYTHON=1`` in the environment chooses the Python loops, which stay the reference:
the compiled reader hands any record it does not accept to the Python one, so both raise the
same errors.
"""

from __future__ import annotations

import enum
import os
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import crc32c

from kwire.wire import DecodeError, read_varint, read_varlong, write_varint, write_varlong
from storage.compression import CompressionType, compress, decompress
from storage.errors import CorruptRecordError, InvalidRecordError

try:
    if os.environ.get("KWIRE_PURE_PYTHON"):
        raise ImportError("KWIRE_PURE_PYTHON is set")
    from storage import _crecords
except ImportError:
    _crecords = None  # type: ignore[assignment]

COMPILED = _crecords is not None
"""Whether the compiled record loops run (module docstring)."""

Buffer = bytes | bytearray | memoryview

# DefaultRecordBatch / Records constants
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
OFFSET_AND_LENGTH = struct.Struct(">qi")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")
LOG_OVERHEAD = 12  # BaseOffset + Length
HEADER_SIZE_UP_TO_MAGIC = 17
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
RECORDS_OFFSET = 61
RECORD_BATCH_OVERHEAD = 61
RECORD_OVERHEAD_V0 = 14  # LegacyRecord.RECORD_OVERHEAD_V0: the smallest size any magic allows
MAGIC_VALUE_V2 = 2
assert BATCH_HEADER.size == RECORD_BATCH_OVERHEAD

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
INT32_MAX = 0x7FFFFFFF


class TimestampType(enum.IntEnum):
    """Attribute bit 3. ``label`` is what Kafka prints (``TimestampType.name``)."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    @property
    def label(self) -> str:
        """``CreateTime`` or ``LogAppendTime``, as DumpLogSegments prints it."""
        return "CreateTime" if self is TimestampType.CREATE_TIME else "LogAppendTime"


def increment_sequence(sequence: int, increment: int) -> int:
    """``DefaultRecordBatch.incrementSequence``: sequences wrap from INT32_MAX to 0."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


@dataclass(frozen=True, slots=True)
class Header:
    """A record header. Keys are UTF-8 (undecodable bytes kept as surrogate escapes)."""

    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record of a batch (``DefaultRecord``).

    ``offset`` is absolute (base offset + delta); ``timestamp`` is in ms (the batch's
    MaxTimestamp for a LogAppendTime batch, else BaseTimestamp + ``timestamp_delta``);
    ``sequence`` is -1 when the batch has no base sequence; ``attributes`` is the unused int8.
    """

    offset: int
    timestamp: int
    timestamp_delta: int
    sequence: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    attributes: int
    size_in_bytes: int
    """Bytes of the record including its leading Length varint."""

    @property
    def key_size(self) -> int:
        """Key length in bytes, -1 for a null key (``DefaultRecord.keySize``)."""
        return -1 if self.key is None else len(self.key)

    @property
    def value_size(self) -> int:
        """Value length in bytes, -1 for a null value (``DefaultRecord.valueSize``)."""
        return -1 if self.value is None else len(self.value)


# ---------------------------------------------------------------------------------------------
# the batch view


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
        if _crecords is not None and self.records_count >= 0:
            try:
                _crecords.check(self.records_section(), self.records_count, self.last_offset - self.base_offset)
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
        if _crecords is not None:
            try:
                return iter(_crecords.values(self._section_for_reading(), self.records_count))
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
        if _crecords is not None:
            try:
                return iter(_crecords.selected_values(self._section_for_reading(), self.records_count, wanted))
            except ValueError:
                pass  # the Python reader raises Kafka's error for the record it stops at
        return (
            (index, value) for index, value in enumerate(self._iter_values_python())
            if value is not None and len(value) >= 2 and wanted[value[1]]
        )

    def _iter_values_python(self) -> Iterator[bytes | None]:
        """:meth:`iter_values` in Python (the reference)."""
        data = self.records_section()
        end_of_data = len(data)
        pos = 0
        # Every committed record passes through here, so the varints that are one or two bytes
        # long in practice (sizes and offset deltas up to 8 KiB, timestamp deltas up to 63, a
        # null key) are decoded inline; longer ones take the general readers. Zig-zag:
        # (raw >> 1) ^ -(raw & 1).
        try:
            for _ in range(self.records_count):
                b = data[pos]
                if b < 0x80:
                    body_size, pos = (b >> 1) ^ -(b & 1), pos + 1
                elif data[pos + 1] < 0x80:
                    raw = (b & 0x7F) | (data[pos + 1] << 7)
                    body_size, pos = (raw >> 1) ^ -(raw & 1), pos + 2
                else:
                    body_size, pos = read_varint(data, pos)
                end = pos + body_size
                if body_size < 0 or end > end_of_data:
                    raise InvalidRecordError(f"Invalid record size {body_size}")
                pos += 1  # attributes
                if data[pos] < 0x80:
                    pos += 1  # timestamp delta
                else:
                    _, pos = read_varlong(data, pos)
                if data[pos] < 0x80:
                    pos += 1  # offset delta
                elif data[pos + 1] < 0x80:
                    pos += 2
                else:
                    _, pos = read_varint(data, pos)
                b = data[pos]
                if b < 0x80:
                    key_size, pos = (b >> 1) ^ -(b & 1), pos + 1
                else:
                    key_size, pos = read_varint(data, pos)
                if key_size > 0:
                    pos += key_size
                b = data[pos]
                if b < 0x80:
                    value_size, pos = (b >> 1) ^ -(b & 1), pos + 1
                elif data[pos + 1] < 0x80:
                    raw = (b & 0x7F) | (data[pos + 1] << 7)
                    value_size, pos = (raw >> 1) ^ -(raw & 1), pos + 2
                else:
                    value_size, pos = read_varint(data, pos)
                if pos > end:  # the fields before the value ran past the record's length
                    raise InvalidRecordError(f"Invalid record size: {body_size} bytes cannot hold the record's fields")
                if value_size < 0:
                    yield None
                elif pos + value_size > end:
                    raise InvalidRecordError("value runs past the record")
                else:
                    yield data[pos : pos + value_size]
                pos = end
        except DecodeError as exc:
            raise InvalidRecordError(f"Invalid record: {exc}") from exc
        except IndexError as exc:  # a varint or field cut off by the end of the records
            raise InvalidRecordError("Invalid record: truncated") from exc

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"count={self.records_count}, epoch={self.partition_leader_epoch}, "
            f"size={self.size_in_bytes}, control={self.is_control}, "
            f"compression={self.compression.codec_name})"
        )


def read_record(
    data: Buffer,
    pos: int,
    base_offset: int,
    base_timestamp: int,
    base_sequence: int,
    log_append_time: int | None,
) -> tuple[Record, int]:
    """Decode one record at ``pos``; returns ``(record, end position)`` (``DefaultRecord.readFrom``).

    Raises InvalidRecordError."""
    try:
        body_size, pos = read_varint(data, pos)
    except DecodeError as exc:
        raise InvalidRecordError("Incorrect declared batch size, premature EOF reached") from exc
    start = pos
    end = start + body_size
    if body_size < 0 or end > len(data):
        raise InvalidRecordError(
            f"Invalid record size: expected {body_size} bytes in record payload, but instead the "
            f"buffer has only {len(data) - start} remaining bytes."
        )
    try:
        attributes = data[pos]
        pos += 1
        timestamp_delta, pos = read_varlong(data, pos)
        offset_delta, pos = read_varint(data, pos)
        key_size, pos = read_varint(data, pos)
        key: bytes | None = None
        if key_size >= 0:
            if pos + key_size > end:
                raise DecodeError("key runs past the record")
            key = bytes(data[pos : pos + key_size])
            pos += key_size
        value_size, pos = read_varint(data, pos)
        value: bytes | None = None
        if value_size >= 0:
            if pos + value_size > end:
                raise DecodeError("value runs past the record")
            value = bytes(data[pos : pos + value_size])
            pos += value_size
        header_count, pos = read_varint(data, pos)
        if header_count < 0:
            raise InvalidRecordError(f"Found invalid number of record headers {header_count}")
        if header_count > end - pos:
            raise InvalidRecordError(
                f"Found invalid number of record headers. {header_count} is larger than the "
                "remaining size of the buffer"
            )
        headers: tuple[Header, ...] = ()
        if header_count:
            items = []
            for _ in range(header_count):
                hkey_size, pos = read_varint(data, pos)
                if hkey_size < 0:
                    raise InvalidRecordError(f"Invalid negative header key size {hkey_size}")
                if pos + hkey_size > end:
                    raise DecodeError("header key runs past the record")
                hkey = bytes(data[pos : pos + hkey_size]).decode("utf-8", "surrogateescape")
                pos += hkey_size
                hvalue_size, pos = read_varint(data, pos)
                hvalue: bytes | None = None
                if hvalue_size >= 0:
                    if pos + hvalue_size > end:
                        raise DecodeError("header value runs past the record")
                    hvalue = bytes(data[pos : pos + hvalue_size])
                    pos += hvalue_size
                items.append(Header(hkey, hvalue))
            headers = tuple(items)
    except InvalidRecordError:
        raise
    except (DecodeError, IndexError) as exc:
        raise InvalidRecordError(f"Found invalid record structure: {exc}") from exc
    if pos != end:
        raise InvalidRecordError(
            f"Invalid record size: expected to read {body_size} bytes in record payload, but "
            f"instead read {pos - start}"
        )
    record = Record(
        offset=base_offset + offset_delta,
        timestamp=log_append_time if log_append_time is not None else base_timestamp + timestamp_delta,
        timestamp_delta=timestamp_delta,
        sequence=(
            increment_sequence(base_sequence, offset_delta) if base_sequence >= 0 else NO_SEQUENCE
        ),
        key=key,
        value=value,
        headers=headers,
        attributes=attributes,
        size_in_bytes=end - start + _varint_size(body_size),
    )
    return record, end


def _varint_size(value: int) -> int:
    raw = ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF
    size = 1
    while raw >= 0x80:
        raw >>= 7
        size += 1
    return size


# ---------------------------------------------------------------------------------------------
# building


@dataclass(frozen=True, slots=True)
class SimpleRecord:
    """A record to build (``SimpleRecord``): its offset comes from its position in the batch."""

    value: bytes | None
    key: bytes | None = None
    timestamp: int = NO_TIMESTAMP
    headers: tuple[Header, ...] = ()


def _zigzag_varint(value: int) -> bytes:
    out = bytearray()
    write_varint(out, value)
    return bytes(out)


_SMALL = 1 << 13
_SMALL_VARINTS = tuple(_zigzag_varint(value) for value in range(_SMALL))
"""The zig-zag varint of every int in [0, 8192): one or two bytes each."""


def encode_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header] = (),
) -> None:
    """Append one record (``DefaultRecord.writeTo``) to ``out``: ``offset_delta`` and
    ``timestamp_delta`` (ms) are relative to the batch's BaseOffset and BaseTimestamp; a None
    key, value or header value is written as length -1. Header keys are encoded UTF-8 with
    surrogate escapes, so keys read by :func:`read_record` round-trip."""
    if (
        not headers and key is None and value is not None
        and 0 <= timestamp_delta < _SMALL and 0 <= offset_delta < _SMALL and len(value) < _SMALL
    ):
        # the common record (a value, no key, no headers, small deltas) from the varint table
        head = b"\x00" + _SMALL_VARINTS[timestamp_delta] + _SMALL_VARINTS[offset_delta] + b"\x01" + _SMALL_VARINTS[len(value)]
        size = len(head) + len(value) + 1
        if size < _SMALL:
            out += _SMALL_VARINTS[size]
        else:
            write_varint(out, size)
        out += head
        out += value
        out.append(0)  # no headers
        return
    body = bytearray(b"\x00")  # attributes: unused, always 0
    write_varlong(body, timestamp_delta)
    write_varint(body, offset_delta)
    if key is None:
        body.append(1)  # zig-zag -1
    else:
        write_varint(body, len(key))
        body += key
    if value is None:
        body.append(1)
    else:
        write_varint(body, len(value))
        body += value
    write_varint(body, len(headers))
    for header in headers:
        raw_key = header.key.encode("utf-8", "surrogateescape")
        write_varint(body, len(raw_key))
        body += raw_key
        if header.value is None:
            body.append(1)
        else:
            write_varint(body, len(header.value))
            body += header.value
    write_varint(out, len(body))
    out += body


def build_batch(
    records: Sequence[SimpleRecord],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    compression: CompressionType = CompressionType.NONE,
    compression_level: int | None = None,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    log_append_time: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """Build one v2 batch holding ``records`` at offsets ``base_offset, base_offset + 1, ...``
    (``MemoryRecordsBuilder``).

    BaseTimestamp is the first record's timestamp (or ``delete_horizon_ms``, which also sets
    attribute bit 6); MaxTimestamp is the largest record timestamp, or ``log_append_time`` for
    LOG_APPEND_TIME batches. Raises ValueError for an empty batch, a negative timestamp other
    than -1, or LOG_APPEND_TIME without ``log_append_time``.
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    if timestamp_type == TimestampType.LOG_APPEND_TIME and log_append_time is None:
        raise ValueError("LOG_APPEND_TIME batches need log_append_time")
    for record in records:
        if record.timestamp < 0 and record.timestamp != NO_TIMESTAMP:
            raise ValueError(f"Invalid negative timestamp {record.timestamp}")
    base_timestamp = records[0].timestamp if delete_horizon_ms is None else delete_horizon_ms
    max_timestamp = NO_TIMESTAMP
    body = bytearray()
    for delta, record in enumerate(records):
        if record.timestamp > max_timestamp:
            max_timestamp = record.timestamp
        encode_record(
            body, delta, record.timestamp - base_timestamp, record.key, record.value, record.headers
        )
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        assert log_append_time is not None
        max_timestamp = log_append_time
    return assemble_batch(
        body,
        record_count=len(records),
        base_offset=base_offset,
        last_offset_delta=len(records) - 1,
        partition_leader_epoch=partition_leader_epoch,
        compression=compression,
        compression_level=compression_level,
        timestamp_type=timestamp_type,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=is_transactional,
        is_control=is_control,
        has_delete_horizon=delete_horizon_ms is not None,
    )


def encode_keyless_records(values: Sequence[bytes]) -> bytes:
    """The records of a KRaft data batch: one keyless record per value at offset deltas 0, 1,
    ..., timestamp delta 0, no headers; the bytes :func:`encode_record` writes for each, in
    order. Compiled where :data:`COMPILED`."""
    if _crecords is not None:
        try:
            return _crecords.keyless_records(values)
        except TypeError:
            pass  # a value that is not bytes (a bytearray, a memoryview): the Python loop takes it
    body = bytearray()
    for delta, value in enumerate(values):
        encode_record(body, delta, 0, None, value)
    return bytes(body)


def assemble_batch(
    records_body: Buffer,
    *,
    record_count: int,
    base_offset: int,
    last_offset_delta: int,
    partition_leader_epoch: int,
    base_timestamp: int,
    max_timestamp: int,
    compression: CompressionType = CompressionType.NONE,
    compression_level: int | None = None,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    has_delete_horizon: bool = False,
) -> bytes:
    """Compress already-encoded records, write the 61-byte header and its CRC
    (``DefaultRecordBatch.writeHeader``); returns the whole batch as bytes.

    ``records_body`` is ``record_count`` records as :func:`encode_record` writes them; the
    header fields are taken as given, unchecked. Raises ValueError as
    :func:`storage.compression.compress` does."""
    payload = compress(compression, records_body, compression_level)
    attributes = int(compression) | (int(timestamp_type) << 3)
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attributes |= CONTROL_FLAG_MASK
    if has_delete_horizon:
        attributes |= DELETE_HORIZON_FLAG_MASK
    out = bytearray(RECORD_BATCH_OVERHEAD + len(payload))
    BATCH_HEADER.pack_into(
        out,
        0,
        base_offset,
        len(out) - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC_VALUE_V2,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        record_count,
    )
    out[RECORDS_OFFSET:] = payload
    _UINT32.pack_into(out, CRC_OFFSET, crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def set_base_offset(batch: bytearray | memoryview, base_offset: int) -> None:
    """Overwrite BaseOffset in place (outside the CRC, as ``DefaultRecordBatch.setLastOffset``
    does for the leader's offset assignment)."""
    _INT64.pack_into(batch, 0, base_offset)


def set_partition_leader_epoch(batch: bytearray | memoryview, epoch: int) -> None:
    """Overwrite PartitionLeaderEpoch in place (outside the CRC,
    ``DefaultRecordBatch.setPartitionLeaderEpoch``)."""
    _INT32.pack_into(batch, PARTITION_LEADER_EPOCH_OFFSET, epoch)


# ---------------------------------------------------------------------------------------------
# walking a buffer of batches


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
    size = _INT32.unpack_from(buf, pos + 8)[0]
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
        after = _INT64.unpack_from(buffer, pos)[0] + _INT32.unpack_from(buffer, pos + LAST_OFFSET_DELTA_OFFSET)[0] + 1
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
