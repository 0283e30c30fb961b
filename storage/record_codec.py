"""One record of a v2 batch: decoding it and encoding it.

Mirrors ``org.apache.kafka.common.record.DefaultRecord`` (``readFrom``, ``writeTo``) and
``SimpleRecord`` (a record to build); the layout is in :mod:`storage.batch_layout`. Whole
batches are read by :class:`storage.records.RecordBatch` and built by
:mod:`storage.batch_builder`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kwire.wire import DecodeError, read_varint, read_varlong, write_varint, write_varlong
from storage.batch_layout import NO_SEQUENCE, NO_TIMESTAMP, Buffer, increment_sequence
from storage.errors import InvalidRecordError


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
