"""Kafka wire primitives: fixed-width integers, varints, strings, bytes, arrays and tagged fields.

Fixed-width integers are big-endian. Varints follow protobuf: 7 bits per byte, low group first,
the high bit set on every byte but the last. Kafka's protocol uses *unsigned* varints for compact
lengths and tagged-field headers (``ByteUtils.writeUnsignedVarint``) and *zig-zag* varints inside
record batches (``ByteUtils.writeVarint`` / ``writeVarlong``).

Non-flexible versions::

    string   int16 length (-1 = null) + UTF-8
    bytes    int32 length (-1 = null) + raw
    array    int32 count  (-1 = null) + elements

Flexible versions (KIP-482)::

    compact string / bytes / array   uvarint (length + 1), 0 = null
    tagged fields                    uvarint count, then per field: uvarint tag, uvarint size, data

Readers take ``(buf, pos)`` and return ``(value, new_pos)``; they raise :class:`DecodeError` on a
truncated buffer or an impossible length, never IndexError or struct.error.
"""

from __future__ import annotations

import struct
from collections.abc import Collection, Sequence
from typing import Protocol, runtime_checkable

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")


class DecodeError(ValueError):
    """Bytes that do not form a valid value of the expected type."""


class EncodeError(ValueError):
    """A value that cannot be written at the requested version (Kafka's UnsupportedVersionException
    or a null in a non-nullable field)."""


# ---------------------------------------------------------------------------------------------
# unsigned and zig-zag varints


def write_uvarint(out: bytearray, value: int) -> None:
    """Append an unsigned varint (up to 64 bits; ``ByteUtils.writeUnsignedVarint``/``Varlong``).

    Raises EncodeError for a negative value."""
    if value < 0:
        raise EncodeError(f"unsigned varint cannot be negative: {value}")
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def read_uvarint(buf: bytes | bytearray | memoryview, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    """Read an unsigned varint of at most ``max_bytes`` bytes (5 for 32-bit, 10 for 64-bit);
    returns ``(value, new_pos)``. Raises DecodeError when truncated or longer than
    ``max_bytes``."""
    result = 0
    shift = 0
    end = len(buf)
    for _ in range(max_bytes):
        if pos >= end:
            raise DecodeError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
    raise DecodeError(f"varint longer than {max_bytes} bytes")


def write_varint(out: bytearray, value: int) -> None:
    """Append a zig-zag varint (a signed 32-bit value; ``ByteUtils.writeVarint``, which takes a
    Java ``int``). Raises EncodeError for a value outside [-2**31, 2**31) rather than wrapping:
    the zig-zag form of such a value needs more than 32 bits, so the test replaces the mask."""
    raw = (value << 1) ^ (value >> 31)
    if raw > 0xFFFFFFFF:
        raise EncodeError(f"varint out of 32-bit range: {value}")
    write_uvarint(out, raw)


def write_varlong(out: bytearray, value: int) -> None:
    """Append a zig-zag varlong (a signed 64-bit value; ``ByteUtils.writeVarlong``). Raises
    EncodeError for a value outside [-2**63, 2**63) rather than wrapping."""
    raw = (value << 1) ^ (value >> 63)
    if raw > 0xFFFFFFFFFFFFFFFF:
        raise EncodeError(f"varlong out of 64-bit range: {value}")
    write_uvarint(out, raw)


def read_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Read a zig-zag varint (signed 32-bit, at most 5 bytes; ``ByteUtils.readVarint``);
    returns ``(value, new_pos)``. Raises DecodeError when truncated or out of 32-bit range
    (a 5-byte varint whose last byte has bits beyond bit 31: Kafka drops those bits)."""
    raw, pos = read_uvarint(buf, pos, 5)
    if raw > 0xFFFFFFFF:
        raise DecodeError("varint out of 32-bit range")
    return (raw >> 1) ^ -(raw & 1), pos


def read_varlong(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Read a zig-zag varlong (signed 64-bit, at most 10 bytes; ``ByteUtils.readVarlong``);
    returns ``(value, new_pos)``. Raises DecodeError when truncated or out of 64-bit range."""
    raw, pos = read_uvarint(buf, pos, 10)
    if raw > 0xFFFFFFFFFFFFFFFF:
        raise DecodeError("varlong out of 64-bit range")
    return (raw >> 1) ^ -(raw & 1), pos


# ---------------------------------------------------------------------------------------------
# fixed-width reads with bounds checks


def read_struct(s: struct.Struct, buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """Unpack the single value of ``s`` (one of INT8 ... FLOAT64 above) at ``pos``; returns
    ``(value, pos + s.size)``. Raises DecodeError when fewer than ``s.size`` bytes remain."""
    end = pos + s.size
    if end > len(buf):
        raise DecodeError(f"truncated: need {s.size} bytes at {pos}, have {len(buf) - pos}")
    return s.unpack_from(buf, pos)[0], end


def take(buf: bytes | bytearray | memoryview, pos: int, n: int) -> tuple[bytes, int]:
    """``n`` raw bytes at ``pos`` as a copy (``bytes``); returns ``(data, pos + n)``.
    Raises DecodeError when ``n`` is negative or fewer than ``n`` bytes remain."""
    end = pos + n
    if n < 0 or end > len(buf):
        raise DecodeError(f"truncated: need {n} bytes at {pos}, have {len(buf) - pos}")
    return bytes(buf[pos:end]), end


def _utf8(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"string is not UTF-8: {exc}") from exc


# ---------------------------------------------------------------------------------------------
# strings and bytes


def write_string(out: bytearray, value: str) -> None:
    """Append a non-nullable STRING: int16 byte length + UTF-8. Raises EncodeError when the
    UTF-8 form is longer than 32767 bytes (Kafka's limit for every string field)."""
    raw = value.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise EncodeError(f"string of {len(raw)} bytes is longer than 32767")
    out += INT16.pack(len(raw))
    out += raw


def write_nullable_string(out: bytearray, value: str | None) -> None:
    """Append a NULLABLE_STRING: length -1 for None, else as :func:`write_string` (same
    EncodeError)."""
    if value is None:
        out += b"\xff\xff"
    else:
        write_string(out, value)


def write_compact_string(out: bytearray, value: str) -> None:
    """Append a COMPACT_STRING: uvarint (byte length + 1) + UTF-8. Raises EncodeError when the
    UTF-8 form is longer than 32767 bytes."""
    raw = value.encode("utf-8")
    if len(raw) > 0x7FFF:
        raise EncodeError(f"string of {len(raw)} bytes is longer than 32767")
    write_uvarint(out, len(raw) + 1)
    out += raw


def write_compact_nullable_string(out: bytearray, value: str | None) -> None:
    """Append a COMPACT_NULLABLE_STRING: uvarint 0 for None, else as
    :func:`write_compact_string` (same EncodeError)."""
    if value is None:
        out.append(0)
    else:
        write_compact_string(out, value)


def read_string(buf: bytes | bytearray | memoryview, pos: int) -> tuple[str, int]:
    """Read a non-nullable STRING (int16 length + UTF-8); returns ``(text, new_pos)``. Raises
    DecodeError for a negative length (null), truncation or bytes that are not UTF-8."""
    n, pos = read_struct(INT16, buf, pos)
    if n < 0:
        raise DecodeError("null where a non-nullable string is required")
    raw, pos = take(buf, pos, n)
    return _utf8(raw), pos


def read_nullable_string(buf: bytes | bytearray | memoryview, pos: int) -> tuple[str | None, int]:
    """Read a NULLABLE_STRING; returns ``(text or None, new_pos)``, None for length -1. Raises
    DecodeError for any other negative length, truncation or bytes that are not UTF-8."""
    n, pos = read_struct(INT16, buf, pos)
    if n < 0:
        if n != -1:
            raise DecodeError(f"negative string length {n}")
        return None, pos
    raw, pos = take(buf, pos, n)
    return _utf8(raw), pos


def write_bytes(out: bytearray, value: bytes) -> None:
    """Append non-nullable BYTES: int32 length + the raw bytes."""
    out += INT32.pack(len(value))
    out += value


def write_nullable_bytes(out: bytearray, value: bytes | None) -> None:
    """Append NULLABLE_BYTES: int32 length -1 for None, else as :func:`write_bytes`."""
    if value is None:
        out += b"\xff\xff\xff\xff"
    else:
        write_bytes(out, value)


def write_compact_bytes(out: bytearray, value: bytes) -> None:
    """Append COMPACT_BYTES: uvarint (length + 1) + the raw bytes."""
    write_uvarint(out, len(value) + 1)
    out += value


def write_compact_nullable_bytes(out: bytearray, value: bytes | None) -> None:
    """Append COMPACT_NULLABLE_BYTES: uvarint 0 for None, else as :func:`write_compact_bytes`."""
    if value is None:
        out.append(0)
    else:
        write_compact_bytes(out, value)


def read_bytes(buf: bytes | bytearray | memoryview, pos: int) -> tuple[bytes, int]:
    """Read non-nullable BYTES (int32 length + data) as a copy; returns ``(data, new_pos)``.
    Raises DecodeError for a negative length (null) or truncation."""
    n, pos = read_struct(INT32, buf, pos)
    if n < 0:
        raise DecodeError("null where non-nullable bytes are required")
    return take(buf, pos, n)


def read_nullable_bytes(buf: bytes | bytearray | memoryview, pos: int) -> tuple[bytes | None, int]:
    """Read NULLABLE_BYTES as a copy; returns ``(data or None, new_pos)``, None for length -1.
    Raises DecodeError for any other negative length or truncation."""
    n, pos = read_struct(INT32, buf, pos)
    if n < 0:
        if n != -1:
            raise DecodeError(f"negative bytes length {n}")
        return None, pos
    return take(buf, pos, n)


def read_compact_bytes(buf: bytes | bytearray | memoryview, pos: int) -> tuple[bytes, int]:
    """Read COMPACT_BYTES (uvarint length + 1, then data) as a copy; returns ``(data,
    new_pos)``. Raises DecodeError for a null (uvarint 0), a bad varint or truncation."""
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        raise DecodeError("null where non-nullable bytes are required")
    return take(buf, pos, n - 1)


def read_compact_nullable_bytes(
    buf: bytes | bytearray | memoryview, pos: int
) -> tuple[bytes | None, int]:
    """Read COMPACT_NULLABLE_BYTES as a copy; returns ``(data or None, new_pos)``, None for a
    uvarint 0. Raises DecodeError for a bad varint or truncation."""
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    return take(buf, pos, n - 1)


# ---------------------------------------------------------------------------------------------
# records (the ``records`` field type: Kafka's BaseRecords)
#
# Records travel by reference, as in Kafka, where a FetchResponse's records are a MemoryRecords
# slice of the receive buffer and a response's records are sent from their own buffer rather than
# copied into the message. A decoded records field is a read-only memoryview of the input when
# the input cannot change under it (``bytes``, or a read-only memoryview); a mutable input
# (``bytearray``) is copied, so that a later change to it cannot reach the message. Encoding into
# a ScatterBuffer (what ``Message.encode`` uses) keeps a large value by reference and copies it
# once, when the buffer is turned into bytes, or not at all when its parts are sent.

@runtime_checkable
class RecordsRegion(Protocol):
    """A records value that is not in memory: a slice of a file that a socket's owner sends
    from the file itself (Kafka's ``FileRecords``, written by ``transferTo``), such as
    ``storage.fileio.FileRegion``. A ScatterBuffer holds it by reference whatever its size and
    gives it back among its :meth:`~ScatterBuffer.parts`; wherever the bytes are needed
    (a copy into a buffer, :meth:`ScatterBuffer.to_bytes`) they are read with ``bytes()``,
    which raises what reading the file raises."""

    def __len__(self) -> int: ...

    def __bytes__(self) -> bytes: ...


Buffer = bytes | bytearray | memoryview
"""A value of the buffer protocol, as ``bytes.join`` and ``sendmsg`` take it."""


def as_buffer(value: Buffer | RecordsRegion) -> Buffer:
    """``value`` itself when it is a buffer, else its bytes, read now."""
    return value if isinstance(value, (bytes, bytearray, memoryview)) else bytes(value)


RECORDS_BY_REFERENCE_MIN_BYTES = 16 * 1024
"""Records values of at least this many bytes are held by reference in a ScatterBuffer; a
smaller one costs less to copy than to splice in later."""


class ScatterBuffer(bytearray):
    """An output buffer for writers that holds large records values by reference.

    Writers append to it as to any bytearray; :func:`write_records` records ``(position,
    value)`` in ``refs`` instead of copying a value of RECORDS_BY_REFERENCE_MIN_BYTES or more.
    The encoding is then either :meth:`parts`, the buffers to write to a socket in order (no
    copy of a held value, as Kafka sends a response's records from their own buffer), or
    :meth:`to_bytes` (also ``bytes(buffer)``), one ``bytes`` with each value copied in once.
    ``len(buffer)`` counts only the inline bytes; :attr:`nbytes` counts the held ones too.

    Until the first held value ``refs`` is the class's empty tuple, so that a buffer costs no
    more to make and to turn into bytes than a bytearray (no ``__slots__``: a slot would have no
    default).
    """

    refs: list[tuple[int, Buffer | RecordsRegion]] | tuple[()] = ()

    def hold(self, value: Buffer | RecordsRegion) -> None:
        """Splice ``value`` in at the current end, instead of copying it now."""
        if self.refs:
            self.refs.append((len(self), value))  # type: ignore[union-attr]
        else:
            self.refs = [(len(self), value)]

    @property
    def nbytes(self) -> int:
        """The length of the whole encoding in bytes, held values included."""
        return len(self) + sum(len(value) for _, value in self.refs)

    def parts(self) -> list[Buffer | RecordsRegion]:
        """The encoding as buffers to write in order: views of this buffer between the held
        values, and the values themselves (a :class:`RecordsRegion` among them as it is). This
        buffer cannot be resized while they live."""
        if not self.refs:
            return [self]
        view = memoryview(self)
        parts: list[Buffer | RecordsRegion] = []
        last = 0
        for at, value in self.refs:
            parts += (view[last:at], value)
            last = at
        parts.append(view[last:])
        return parts

    def to_bytes(self) -> bytes:
        """The encoding as one ``bytes``, each held value copied in once (a region read)."""
        if not self.refs:
            with memoryview(self) as view:  # bytes(self) would call this method again
                return bytes(view)
        return b"".join([as_buffer(part) for part in self.parts()])

    __bytes__ = to_bytes


def write_records(
    out: bytearray, value: Buffer | RecordsRegion | None, compact: bool
) -> None:
    """Write a records field: its length (compact: uvarint length + 1, 0 for null; else int32,
    -1 for null) and its bytes, held by reference when ``out`` is a ScatterBuffer and the value
    is large or a :class:`RecordsRegion` (read into any other buffer). A non-nullable field's
    null is refused by the caller (the generated writer)."""
    if value is None:
        if compact:
            out.append(0)
        else:
            out += b"\xff\xff\xff\xff"
        return
    n = len(value)
    if compact:
        write_uvarint(out, n + 1)
    else:
        out += INT32.pack(n)
    if type(out) is ScatterBuffer and (n >= RECORDS_BY_REFERENCE_MIN_BYTES or not isinstance(value, Buffer)):
        out.hold(value)
    else:
        out += as_buffer(value)


def read_records(
    buf: bytes | bytearray | memoryview, pos: int, compact: bool, nullable: bool
) -> tuple[bytes | memoryview | None, int]:
    """Read a records field at ``pos``: ``(value, new_pos)`` where value is a read-only
    memoryview of ``buf`` when ``buf`` is immutable (``bytes``, or a read-only memoryview whose
    owner leaves it unchanged while the message is in use), else a copy (``bytes``); None for null.
    Raises DecodeError for a null in a non-nullable field, an impossible length or truncation."""
    if compact:
        n, pos = read_uvarint(buf, pos)
        n -= 1
    else:
        n, pos = read_struct(INT32, buf, pos)
        if n < -1:
            raise DecodeError(f"negative records length {n}")
    if n < 0:
        if not nullable:
            raise DecodeError("null where non-nullable records are required")
        return None, pos
    end = pos + n
    if end > len(buf):
        raise DecodeError(f"truncated: need {n} bytes of records at {pos}, have {len(buf) - pos}")
    view = memoryview(buf)
    if view.readonly:
        return view[pos:end], end
    return bytes(view[pos:end]), end


# ---------------------------------------------------------------------------------------------
# tagged fields


def read_tagged_header(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int, int]:
    """Read one tagged field's ``(tag, size)`` header; returns ``(tag, size, pos)`` with
    ``pos`` at the field's data. Raises DecodeError for a bad varint or a size (bytes) that runs
    past the end of ``buf``."""
    tag, pos = read_uvarint(buf, pos)
    size, pos = read_uvarint(buf, pos)
    if size > len(buf) - pos:
        raise DecodeError(f"tagged field {tag} of {size} bytes runs past the end")
    return tag, size, pos


def read_unknown_tagged(
    buf: bytes | bytearray | memoryview, pos: int
) -> tuple[tuple[tuple[int, bytes], ...], int]:
    """Read a whole tagged-field section at ``pos`` (its count first) whose tags are all unknown
    to the reader; returns the ``(tag, data)`` pairs in wire order and the position after it.

    Like the ``default:`` branch of the ``read`` methods Kafka's ``MessageDataGenerator``
    generates (``Readable.readUnknownTaggedField``), every field is kept as it comes: a tag seen
    twice, or out of ascending order, is kept twice and in wire order, not refused (writing such
    a list back is refused by :func:`write_tagged`, as Kafka's ``RawTaggedFieldWriter`` does).
    Raises DecodeError as :func:`read_tagged_header` does."""
    n, pos = read_uvarint(buf, pos)
    fields = []
    for _ in range(n):
        tag, size, pos = read_tagged_header(buf, pos)
        end = pos + size
        fields.append((tag, bytes(buf[pos:end])))
        pos = end
    return tuple(fields), pos


def write_tagged(
    out: bytearray,
    known: Sequence[tuple[int, bytes]],
    unknown: Sequence[tuple[int, bytes]],
    defined: Collection[int] = (),
) -> None:
    """Write a tagged-field section: the count, then each ``(tag, data)`` in ascending tag order,
    the known fields (``known``, ascending) merged with the preserved unknown ones (``unknown``).

    ``defined`` holds every tag a field of the struct has at any version (the tags Kafka's
    generated ``write`` passes to ``RawTaggedFieldWriter.writeRawTags``). Raises EncodeError,
    as ``RawTaggedFieldWriter`` throws, when ``unknown`` is not in strictly ascending tag order
    (a duplicate tag included) or holds a tag in ``defined``: see :func:`merge_tagged`."""
    fields = merge_tagged(known, unknown, defined)
    write_uvarint(out, len(fields))
    for tag, data in fields:
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data


def merge_tagged(
    known: Sequence[tuple[int, bytes]],
    unknown: Sequence[tuple[int, bytes]],
    defined: Collection[int] = (),
) -> list[tuple[int, bytes]]:
    """Known and preserved unknown tagged fields, in ascending tag order (Kafka writes them so).

    Mirrors ``org.apache.kafka.common.protocol.types.RawTaggedFieldWriter``: the unknown
    (raw) fields must come in strictly ascending tag order, so a tag given twice is refused,
    and none may use the tag of a field the struct defines (``defined``), whether or not that
    field is written (it is left out when at its default). Kafka skips the second check when a
    defined tag directly follows the previous one (its generator calls ``writeRawTags`` only
    across a gap in the defined tags), so it can write such a tag twice; kwire refuses it always.
    Raises EncodeError naming the offending tag."""
    if not unknown:
        return list(known)
    previous = -1
    for tag, _ in unknown:
        if tag <= previous:
            raise EncodeError(
                f"invalid unknown tagged fields: tag {tag} comes after tag {previous} "
                "but is not higher than it"
            )
        if tag in defined:
            raise EncodeError(f"unknown tagged field uses tag {tag}, which a field defines")
        previous = tag
    return sorted([*known, *unknown], key=lambda item: item[0])
