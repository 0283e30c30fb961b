"""The per-record loops every committed record passes through: compiled when built, Python as
the reference.

Reading a batch's values (:meth:`storage.records.RecordBatch.iter_values` and
``iter_selected_values``), checking its records (``validate_records``) and writing a data
batch's records (:func:`storage.batch_builder.encode_keyless_records`) have a compiled
counterpart, ``storage/_crecords.c``, built by ``pip install`` when a C compiler is there.
:data:`COMPILED` says whether it runs; ``KWIRE_PURE_PYTHON=1`` in the environment chooses the
Python loops, which stay the reference: each function here returns None (or False) when the
compiled loop is not built and raises ValueError when it refuses its input; the caller then
runs the Python loop, which raises Kafka's error for the record it stops at -- so both paths
raise the same errors.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence

from kwire.wire import DecodeError, read_varint, read_varlong
from storage.batch_layout import Buffer
from storage.errors import InvalidRecordError

try:
    if os.environ.get("KWIRE_PURE_PYTHON"):
        raise ImportError("KWIRE_PURE_PYTHON is set")
    from storage import _crecords
except ImportError:
    _crecords = None  # type: ignore[assignment]

COMPILED = _crecords is not None
"""Whether the compiled record loops run (module docstring)."""


def check(section: Buffer, count: int, max_offset_delta: int) -> bool:
    """Check by the compiled loop (``_crecords.check``) that ``section`` holds ``count``
    records with offset deltas in ``[0, max_offset_delta]`` and nothing after them. Returns
    False when the loop is not built, True when it accepted them; raises ValueError when it
    refuses them (the Python reader then names Kafka's error)."""
    if _crecords is None:
        return False
    _crecords.check(section, count, max_offset_delta)
    return True


def values(section: Buffer, count: int) -> list[bytes | None] | None:
    """The value of each of ``count`` records in ``section`` (None for a null value) by the
    compiled loop; None when it is not built. Raises ValueError when it refuses them."""
    if _crecords is None:
        return None
    return _crecords.values(section, count)


def selected_values(section: Buffer, count: int, wanted: bytes) -> list[tuple[int, bytes]] | None:
    """``(index, value)`` of the records whose value's second byte ``b`` has ``wanted[b]``
    non-zero (``wanted``: 256 bytes) by the compiled loop; None when it is not built. Raises
    ValueError when it refuses them."""
    if _crecords is None:
        return None
    return _crecords.selected_values(section, count, wanted)


def keyless_records(record_values: Sequence[bytes]) -> bytes | None:
    """One keyless record per value, the bytes
    :func:`storage.batch_builder.encode_keyless_records` writes, by the compiled loop; None
    when it is not built. Raises TypeError for a value that is not ``bytes`` (a bytearray, a
    memoryview: the Python loop takes it)."""
    if _crecords is None:
        return None
    return _crecords.keyless_records(record_values)


def walk_values(data: bytes, count: int) -> Iterator[bytes | None]:
    """The value of each of ``count`` records in ``data`` (a batch's uncompressed records
    section), None for a null value, in Python (the reference the compiled loops mirror).
    Raises InvalidRecordError, while iterating, at the first record that does not parse."""
    end_of_data = len(data)
    pos = 0
    # Every committed record passes through here, so the varints that are one or two bytes
    # long in practice (sizes and offset deltas up to 8 KiB, timestamp deltas up to 63, a
    # null key) are decoded inline; longer ones take the general readers. Zig-zag:
    # (raw >> 1) ^ -(raw & 1).
    try:
        for _ in range(count):
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
