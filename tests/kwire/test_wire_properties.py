"""Property tests of kwire's strings, bytes, records fields and tagged-field sections.

The invariants are Kafka's protocol types (``org.apache.kafka.common.protocol.types.Type``,
KIP-482): every value round-trips, the length prefix is exactly what the type says (int16 or
int32, or uvarint length + 1 with 0 for null), a truncated buffer is a DecodeError and never an
IndexError or struct.error, and a tagged-field section lists its fields in ascending tag order
with unknown fields kept byte for byte.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kwire.wire import (
    RECORDS_BY_REFERENCE_MIN_BYTES,
    DecodeError,
    EncodeError,
    ScatterBuffer,
    read_bytes,
    read_compact_bytes,
    read_compact_nullable_bytes,
    read_nullable_bytes,
    read_nullable_string,
    read_records,
    read_string,
    read_unknown_tagged,
    read_uvarint,
    write_bytes,
    write_compact_bytes,
    write_compact_nullable_bytes,
    write_compact_nullable_string,
    write_compact_string,
    write_nullable_bytes,
    write_nullable_string,
    write_records,
    write_string,
    write_tagged,
    write_uvarint,
)
from tests.properties import examples


def uvarint_size(value: int) -> int:
    return max(1, -(-value.bit_length() // 7))


texts = st.text(max_size=40)  # any code point, surrogates excluded: UTF-8 of 1 to 4 bytes each
blobs = st.binary(max_size=300)


def read_compact_string(buf: bytes, pos: int) -> tuple[str | None, int]:
    """A compact nullable string read as the generated codecs read it (uvarint length + 1)."""
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    return buf[pos : pos + n - 1].decode(), pos + n - 1


# ---------------------------------------------------------------------------------------------
# strings


@settings(deadline=None, max_examples=examples(120))
@given(text=texts, suffix=st.binary(max_size=4))
def test_string_round_trip_and_exact_length(text: str, suffix: bytes) -> None:
    raw = text.encode()
    out = bytearray()
    write_string(out, text)
    assert bytes(out[:2]) == len(raw).to_bytes(2, "big")
    assert len(out) == 2 + len(raw)
    assert read_string(bytes(out) + suffix, 0) == (text, len(out))
    assert read_nullable_string(bytes(out) + suffix, 0) == (text, len(out))


@settings(deadline=None, max_examples=examples(80))
@given(text=st.none() | texts)
def test_nullable_string_round_trip(text: str | None) -> None:
    out = bytearray()
    write_nullable_string(out, text)
    if text is None:
        assert bytes(out) == b"\xff\xff"
    assert read_nullable_string(bytes(out), 0) == (text, len(out))


@settings(deadline=None, max_examples=examples(120))
@given(text=st.none() | texts)
def test_compact_string_length_is_uvarint_of_length_plus_one(text: str | None) -> None:
    out = bytearray()
    write_compact_nullable_string(out, text)
    if text is None:
        assert bytes(out) == b"\x00"
    else:
        raw = text.encode()
        assert len(out) == uvarint_size(len(raw) + 1) + len(raw)
        assert read_uvarint(out, 0) == (len(raw) + 1, uvarint_size(len(raw) + 1))
        plain = bytearray()
        write_compact_string(plain, text)
        assert plain == out
    assert read_compact_string(bytes(out), 0) == (text, len(out))


@pytest.mark.parametrize("writer", [write_string, write_nullable_string, write_compact_string,
                                    write_compact_nullable_string])
@given(n=st.integers(32760, 32780), wide=st.booleans())
@settings(deadline=None, max_examples=examples(15))
def test_string_limit_is_32767_utf8_bytes(writer, n: int, wide: bool) -> None:  # type: ignore[no-untyped-def]
    # the limit counts UTF-8 bytes, not characters: "é" is two bytes
    text = "é" * (n // 2) + "x" * (n % 2) if wide else "x" * n
    size = len(text.encode())
    out = bytearray()
    if size <= 32767:
        writer(out, text)
        assert len(out) > size
    else:
        with pytest.raises(EncodeError):
            writer(out, text)


@settings(deadline=None, max_examples=examples(100))
@given(text=texts, data=st.data())
def test_truncated_string_is_a_decode_error(text: str, data: st.DataObject) -> None:
    out = bytearray()
    write_string(out, text)
    cut = data.draw(st.integers(0, len(out) - 1))
    with pytest.raises(DecodeError):
        read_string(bytes(out[:cut]), 0)
    with pytest.raises(DecodeError):
        read_nullable_string(bytes(out[:cut]), 0)


@settings(deadline=None)
@given(n=st.integers(-(2**15), -2))
def test_negative_string_length_other_than_minus_one_is_refused(n: int) -> None:
    raw = n.to_bytes(2, "big", signed=True) + b"abc"
    with pytest.raises(DecodeError):
        read_nullable_string(raw, 0)
    with pytest.raises(DecodeError):
        read_string(raw, 0)


@settings(deadline=None)
@given(raw=st.binary(min_size=1, max_size=30))
def test_string_reader_refuses_bytes_that_are_not_utf8(raw: bytes) -> None:
    buf = len(raw).to_bytes(2, "big") + raw
    try:
        expected = raw.decode()
    except UnicodeDecodeError:
        with pytest.raises(DecodeError):
            read_string(buf, 0)
    else:
        assert read_string(buf, 0) == (expected, len(buf))


# ---------------------------------------------------------------------------------------------
# bytes


@settings(deadline=None, max_examples=examples(120))
@given(value=st.none() | blobs, compact=st.booleans(), prefix=st.binary(max_size=3))
def test_bytes_round_trip_and_exact_length(value: bytes | None, compact: bool, prefix: bytes) -> None:
    out = bytearray(prefix)
    if compact:
        write_compact_nullable_bytes(out, value)
        want_len = 1 if value is None else uvarint_size(len(value) + 1) + len(value)
        got = read_compact_nullable_bytes(bytes(out), len(prefix))
    else:
        write_nullable_bytes(out, value)
        want_len = 4 + (0 if value is None else len(value))
        got = read_nullable_bytes(bytes(out), len(prefix))
    assert len(out) - len(prefix) == want_len
    assert got == (value, len(out))
    if value is not None:
        plain = bytearray(prefix)
        (write_compact_bytes if compact else write_bytes)(plain, value)
        assert plain == out
        reader = read_compact_bytes if compact else read_bytes
        assert reader(bytes(out), len(prefix)) == (value, len(out))


@settings(deadline=None)
@given(compact=st.booleans())
def test_non_nullable_bytes_refuse_null(compact: bool) -> None:
    out = bytearray()
    (write_compact_nullable_bytes if compact else write_nullable_bytes)(out, None)
    with pytest.raises(DecodeError):
        (read_compact_bytes if compact else read_bytes)(bytes(out), 0)


@settings(deadline=None, max_examples=examples(100))
@given(value=blobs, compact=st.booleans(), data=st.data())
def test_truncated_bytes_are_a_decode_error(value: bytes, compact: bool, data: st.DataObject) -> None:
    out = bytearray()
    (write_compact_bytes if compact else write_bytes)(out, value)
    cut = data.draw(st.integers(0, len(out) - 1))
    reader = read_compact_nullable_bytes if compact else read_nullable_bytes
    with pytest.raises(DecodeError):
        reader(bytes(out[:cut]), 0)


@settings(deadline=None)
@given(n=st.integers(-(2**31), -2))
def test_negative_bytes_length_other_than_minus_one_is_refused(n: int) -> None:
    with pytest.raises(DecodeError):
        read_nullable_bytes(n.to_bytes(4, "big", signed=True) + b"x" * 8, 0)


# ---------------------------------------------------------------------------------------------
# records fields


@settings(deadline=None, max_examples=examples(60))
@given(
    value=st.none() | st.binary(max_size=64) | st.integers(0, 3).map(
        lambda k: bytes([k]) * (RECORDS_BY_REFERENCE_MIN_BYTES - 1 + k)),
    compact=st.booleans(),
    head=st.binary(max_size=5),
    tail=st.binary(max_size=5),
)
def test_records_field_scatter_and_plain_encodings_agree(
    value: bytes | None, compact: bool, head: bytes, tail: bytes
) -> None:
    plain = bytearray(head)
    write_records(plain, value, compact)
    plain += tail
    scatter = ScatterBuffer(head)
    write_records(scatter, value, compact)
    scatter += tail
    # a value is held by reference exactly when it is at least the threshold
    held = value is not None and len(value) >= RECORDS_BY_REFERENCE_MIN_BYTES
    assert len(scatter.refs) == (1 if held else 0)
    assert scatter.nbytes == len(plain)
    assert bytes(scatter) == scatter.to_bytes() == bytes(plain)
    assert b"".join(bytes(p) for p in scatter.parts()) == bytes(plain)
    # read back: a view of immutable input, a copy of mutable input
    got, pos = read_records(bytes(plain), len(head), compact, nullable=True)
    assert pos == len(plain) - len(tail)
    assert (None if got is None else bytes(got)) == value
    if value is not None:
        assert isinstance(got, memoryview) and got.readonly
        copy, _ = read_records(plain, len(head), compact, nullable=True)
        assert type(copy) is bytes
        plain[len(plain) - len(tail) - 1 :] = b""  # changing the input cannot reach the copy
        assert copy == value


@settings(deadline=None)
@given(compact=st.booleans())
def test_records_null_refused_where_not_nullable(compact: bool) -> None:
    out = bytearray()
    write_records(out, None, compact)
    assert read_records(bytes(out), 0, compact, nullable=True) == (None, len(out))
    with pytest.raises(DecodeError):
        read_records(bytes(out), 0, compact, nullable=False)


@settings(deadline=None, max_examples=examples(60))
@given(value=st.binary(min_size=1, max_size=64), compact=st.booleans(), data=st.data())
def test_truncated_records_are_a_decode_error(value: bytes, compact: bool, data: st.DataObject) -> None:
    out = bytearray()
    write_records(out, value, compact)
    cut = data.draw(st.integers(0, len(out) - 1))
    with pytest.raises(DecodeError):
        read_records(bytes(out[:cut]), 0, compact, nullable=True)


# ---------------------------------------------------------------------------------------------
# tagged fields

tags = st.integers(0, 2**31 - 1)
fields = st.lists(st.tuples(tags, st.binary(max_size=20)), max_size=8, unique_by=lambda f: f[0])


@settings(deadline=None, max_examples=examples(120))
@given(known=fields, unknown=fields)
def test_tagged_section_is_sorted_and_round_trips(
    known: list[tuple[int, bytes]], unknown: list[tuple[int, bytes]]
) -> None:
    unknown = [f for f in unknown if f[0] not in {t for t, _ in known}]
    known.sort()
    unknown.sort()
    out = bytearray()
    write_tagged(out, known, unknown)
    got, pos = read_unknown_tagged(bytes(out) + b"\xee", 0)
    assert pos == len(out)
    assert list(got) == sorted(known + unknown)
    wanted_len = uvarint_size(len(got)) + sum(
        uvarint_size(t) + uvarint_size(len(d)) + len(d) for t, d in got
    )
    assert len(out) == wanted_len


@settings(deadline=None, max_examples=examples(80))
@given(section=fields)
def test_unknown_tags_read_in_wire_order_and_written_back_unchanged(
    section: list[tuple[int, bytes]],
) -> None:
    section.sort()
    out = bytearray()
    write_uvarint(out, len(section))
    for tag, data in section:
        write_uvarint(out, tag)
        write_uvarint(out, len(data))
        out += data
    got, pos = read_unknown_tagged(bytes(out), 0)
    assert list(got) == section and pos == len(out)
    again = bytearray()
    write_tagged(again, [], got)
    assert again == out


@settings(deadline=None, max_examples=examples(80))
@given(section=fields.filter(lambda f: sum(len(d) for _, d in f) > 0), data=st.data())
def test_truncated_tagged_section_is_a_decode_error(
    section: list[tuple[int, bytes]], data: st.DataObject
) -> None:
    out = bytearray()
    write_tagged(out, [], sorted(section))
    cut = data.draw(st.integers(0, len(out) - 1))
    with pytest.raises(DecodeError):
        read_unknown_tagged(bytes(out[:cut]), 0)
