"""Property tests of kwire's varints against Kafka's ``ByteUtils``.

Unsigned varints (``writeUnsignedVarint`` / ``writeUnsignedVarlong``) and zig-zag varints
(``writeVarint`` / ``writeVarlong``) must round-trip every value of their range, take exactly
``ceil(bits / 7)`` bytes (at least one), and be read back only within Kafka's limits: a varint
of more than 5 bytes or a varlong of more than 10 is refused (``illegalVarintException`` /
``illegalVarlongException``), as is any truncation.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kwire.wire import (
    DecodeError,
    EncodeError,
    read_uvarint,
    read_varint,
    read_varlong,
    write_uvarint,
    write_varint,
    write_varlong,
)
from tests.properties import examples

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

uint32s = st.integers(0, 2**32 - 1)
uint64s = st.integers(0, 2**64 - 1)
int32s = st.integers(INT32_MIN, INT32_MAX)
int64s = st.integers(INT64_MIN, INT64_MAX)


def expected_size(unsigned: int) -> int:
    """Bytes of an unsigned varint: 7 payload bits per byte, at least one byte
    (``ByteUtils.sizeOfUnsignedVarint`` / ``sizeOfUnsignedVarlong``)."""
    return max(1, -(-unsigned.bit_length() // 7))


def zigzag(value: int) -> int:
    """The zig-zag mapping of ``ByteUtils.writeVarint``: 0, -1, 1, -2, 2 ... -> 0, 1, 2, 3, 4 ..."""
    return 2 * value if value >= 0 else -2 * value - 1


def encode(writer, value: int) -> bytes:  # type: ignore[no-untyped-def]
    out = bytearray()
    writer(out, value)
    return bytes(out)


def decode_groups(raw: bytes) -> int:
    """An independent reading of the protobuf layout: low 7-bit group first."""
    return sum((b & 0x7F) << (7 * i) for i, b in enumerate(raw))


# ---------------------------------------------------------------------------------------------
# unsigned


@settings(deadline=None, max_examples=examples(150))
@given(value=uint64s, prefix=st.binary(max_size=3), suffix=st.binary(max_size=3))
@example(value=0, prefix=b"", suffix=b"")
@example(value=2**64 - 1, prefix=b"", suffix=b"")
def test_uvarint_round_trip_layout_and_size(value: int, prefix: bytes, suffix: bytes) -> None:
    raw = encode(write_uvarint, value)
    assert len(raw) == expected_size(value)
    # every byte but the last carries the continuation bit; the last does not
    assert all(b & 0x80 for b in raw[:-1]) and not raw[-1] & 0x80
    assert decode_groups(raw) == value
    # read at an offset inside a larger buffer: the position advances by exactly the size
    assert read_uvarint(prefix + raw + suffix, len(prefix), 10) == (value, len(prefix) + len(raw))


@settings(deadline=None, max_examples=examples(100))
@given(value=uint32s)
def test_uvarint_of_32_bits_fits_the_5_byte_limit(value: int) -> None:
    raw = encode(write_uvarint, value)
    assert len(raw) <= 5
    assert read_uvarint(raw, 0) == (value, len(raw))  # default limit: 5 bytes


@settings(deadline=None)
@given(value=st.integers(max_value=-1))
def test_negative_uvarint_is_refused(value: int) -> None:
    with pytest.raises(EncodeError):
        write_uvarint(bytearray(), value)


@settings(deadline=None, max_examples=examples(100))
@given(value=uint64s, data=st.data())
def test_uvarint_truncated_anywhere_is_refused(value: int, data: st.DataObject) -> None:
    raw = encode(write_uvarint, value)
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(DecodeError):
        read_uvarint(raw[:cut], 0, 10)


@settings(deadline=None)
@given(limit=st.integers(1, 10), tail=st.integers(0, 0x7F))
def test_uvarint_longer_than_its_limit_is_refused(limit: int, tail: int) -> None:
    # `limit` bytes with the continuation bit, then a final byte: one byte too many
    raw = b"\x80" * limit + bytes([tail])
    with pytest.raises(DecodeError):
        read_uvarint(raw, 0, limit)
    # one byte fewer fits exactly
    assert read_uvarint(raw[1:], 0, limit) == (tail << (7 * (limit - 1)), limit)


def padded(raw: bytes, total: int) -> bytes:
    """``raw`` re-encoded in ``total`` bytes: the same value with high zero groups added (a
    non-canonical varint, which Kafka's readers accept within their byte limit)."""
    assert total >= len(raw)
    if total == len(raw):
        return raw
    return raw[:-1] + bytes([raw[-1] | 0x80]) + b"\x80" * (total - len(raw) - 1) + b"\x00"


@settings(deadline=None, max_examples=examples(100))
@given(value=int64s, data=st.data())
def test_padded_varlong_is_read_up_to_10_bytes_and_refused_beyond(value: int, data: st.DataObject) -> None:
    raw = encode(write_varlong, value)
    total = data.draw(st.integers(len(raw), 12))
    if total <= 10:
        assert read_varlong(padded(raw, total), 0) == (value, total)
    else:
        with pytest.raises(DecodeError):
            read_varlong(padded(raw, total), 0)


@settings(deadline=None, max_examples=examples(100))
@given(value=int32s, data=st.data())
def test_padded_varint_is_read_up_to_5_bytes_and_refused_beyond(value: int, data: st.DataObject) -> None:
    raw = encode(write_varint, value)
    total = data.draw(st.integers(len(raw), 7))
    if total <= 5:
        assert read_varint(padded(raw, total), 0) == (value, total)
    else:
        with pytest.raises(DecodeError):
            read_varint(padded(raw, total), 0)


# ---------------------------------------------------------------------------------------------
# zig-zag varint (32-bit)

# ByteUtilsTest's vectors: the zig-zag order puts small magnitudes of either sign in one byte
KNOWN_VARINTS = {
    0: "00", -1: "01", 1: "02", 63: "7e", -64: "7f", 64: "8001", -65: "8101",
    INT32_MAX: "feffffff0f", INT32_MIN: "ffffffff0f",
}


@pytest.mark.parametrize(("value", "hex_"), KNOWN_VARINTS.items())
def test_varint_known_bytes(value: int, hex_: str) -> None:
    assert encode(write_varint, value).hex() == hex_
    assert read_varint(bytes.fromhex(hex_), 0) == (value, len(hex_) // 2)


@settings(deadline=None, max_examples=examples(150))
@given(value=int32s)
@example(value=INT32_MIN)
@example(value=INT32_MAX)
def test_varint_round_trip_and_size(value: int) -> None:
    raw = encode(write_varint, value)
    assert len(raw) == expected_size(zigzag(value))
    assert 1 <= len(raw) <= 5
    assert decode_groups(raw) == zigzag(value)
    assert read_varint(raw, 0) == (value, len(raw))
    # a varint is also a valid varlong of the same value (Kafka reads both from one layout)
    assert read_varlong(raw, 0) == (value, len(raw))


@settings(deadline=None)
@given(value=int32s)
def test_small_magnitudes_take_one_byte(value: int) -> None:
    assert (len(encode(write_varint, value)) == 1) == (-64 <= value <= 63)


@settings(deadline=None)
@given(extra=st.integers(0, 4), tail=st.integers(0, 0x7F))
def test_varint_of_more_than_5_bytes_is_refused(extra: int, tail: int) -> None:
    raw = b"\xff" * (5 + extra) + bytes([tail])
    with pytest.raises(DecodeError):
        read_varint(raw, 0)


@settings(deadline=None)
@given(tail=st.integers(0x10, 0x7F))
def test_5_byte_varint_beyond_32_bits_is_refused(tail: int) -> None:
    # Kafka's readVarint shifts the fifth byte into an int and loses the high bits; kwire
    # refuses such a value rather than reading a different number than was written.
    with pytest.raises(DecodeError):
        read_varint(b"\xff\xff\xff\xff" + bytes([tail]), 0)


@settings(deadline=None, max_examples=examples(100))
@given(value=int32s, data=st.data())
def test_varint_truncated_anywhere_is_refused(value: int, data: st.DataObject) -> None:
    raw = encode(write_varint, value)
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(DecodeError):
        read_varint(raw[:cut], 0)


@settings(deadline=None)
@given(value=st.integers(INT32_MAX + 1, 2**70) | st.integers(-(2**70), INT32_MIN - 1))
@example(value=INT32_MAX + 1)
@example(value=INT32_MIN - 1)
def test_varint_out_of_32_bit_range_is_refused_not_wrapped(value: int) -> None:
    # ByteUtils.writeVarint takes a Java int: such a value cannot reach it. kwire refuses it
    # rather than writing the varint of a different (wrapped) number.
    with pytest.raises(EncodeError, match="out of 32-bit range"):
        encode(write_varint, value)


# ---------------------------------------------------------------------------------------------
# zig-zag varlong (64-bit)


@settings(deadline=None, max_examples=examples(150))
@given(value=int64s)
@example(value=INT64_MIN)
@example(value=INT64_MAX)
@example(value=-(2**31) - 1)
@example(value=2**31)
def test_varlong_round_trip_and_size(value: int) -> None:
    raw = encode(write_varlong, value)
    assert len(raw) == expected_size(zigzag(value))
    assert 1 <= len(raw) <= 10
    assert decode_groups(raw) == zigzag(value)
    assert read_varlong(raw, 0) == (value, len(raw))


@settings(deadline=None)
@given(value=int32s)
def test_varlong_of_an_int_is_its_varint(value: int) -> None:
    assert encode(write_varlong, value) == encode(write_varint, value)


@settings(deadline=None)
@given(extra=st.integers(0, 4), tail=st.integers(0, 0x7F))
def test_varlong_of_more_than_10_bytes_is_refused(extra: int, tail: int) -> None:
    raw = b"\xff" * (10 + extra) + bytes([tail])
    with pytest.raises(DecodeError):
        read_varlong(raw, 0)


@settings(deadline=None)
@given(tail=st.integers(0x02, 0x7F))
def test_10_byte_varlong_beyond_64_bits_is_refused(tail: int) -> None:
    with pytest.raises(DecodeError):
        read_varlong(b"\xff" * 9 + bytes([tail]), 0)


@settings(deadline=None, max_examples=examples(100))
@given(value=int64s, data=st.data())
def test_varlong_truncated_anywhere_is_refused(value: int, data: st.DataObject) -> None:
    raw = encode(write_varlong, value)
    cut = data.draw(st.integers(0, len(raw) - 1))
    with pytest.raises(DecodeError):
        read_varlong(raw[:cut], 0)


@settings(deadline=None, max_examples=examples(60))
@given(values=st.lists(st.tuples(st.booleans(), int64s), max_size=20))
def test_a_run_of_mixed_varints_reads_back_in_order(values: list[tuple[bool, int]]) -> None:
    out = bytearray()
    wanted = []
    for is_long, v in values:
        if is_long:
            write_varlong(out, v)
        else:
            v = max(INT32_MIN, min(INT32_MAX, v))
            write_varint(out, v)
        wanted.append(v)
    pos = 0
    got = []
    for is_long, _ in values:
        v, pos = (read_varlong if is_long else read_varint)(out, pos)
        got.append(v)
    assert got == wanted
    assert pos == len(out)


@settings(deadline=None)
@given(value=st.integers(INT64_MAX + 1, 2**140) | st.integers(-(2**140), INT64_MIN - 1))
@example(value=INT64_MAX + 1)
@example(value=INT64_MIN - 1)
def test_varlong_out_of_64_bit_range_is_refused_not_wrapped(value: int) -> None:
    with pytest.raises(EncodeError, match="out of 64-bit range"):
        encode(write_varlong, value)
