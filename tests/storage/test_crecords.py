"""The compiled record loops (``storage/_crecords.c``) against the Python ones they mirror.

The Python loops are the reference: on every input, valid or not, the compiled reader must give
the values the Python reader gives, or the error it raises; the compiled writer must give the
bytes ``encode_record`` writes. ``make install`` builds the module, so these tests fail (not
skip) where it was not built, unless ``KWIRE_PURE_PYTHON=1`` chose the Python loops.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from storage import record_loops
from storage.batch_builder import assemble_batch, encode_keyless_records
from storage.errors import InvalidRecordError
from storage.record_codec import Header, encode_record
from storage.records import RecordBatch
from tests.properties import examples

PURE = bool(os.environ.get("KWIRE_PURE_PYTHON"))


def _batch(body: bytes, count: int) -> RecordBatch:
    return RecordBatch(assemble_batch(
        body, record_count=count, base_offset=0, last_offset_delta=max(count - 1, 0),
        partition_leader_epoch=0, base_timestamp=0, max_timestamp=0,
    ))


def _python_values(batch: RecordBatch) -> list[bytes | None] | str:
    try:
        return list(batch._iter_values_python())
    except InvalidRecordError as exc:
        return f"InvalidRecordError: {exc}"


def _values(batch: RecordBatch) -> list[bytes | None] | str:
    try:
        return list(batch.iter_values())
    except InvalidRecordError as exc:
        return f"InvalidRecordError: {exc}"


def _python_body(values: list[bytes]) -> bytes:
    body = bytearray()
    for delta, value in enumerate(values):
        encode_record(body, delta, 0, None, value)
    return bytes(body)


def test_the_compiled_loops_are_built_and_chosen() -> None:
    assert record_loops.COMPILED is not PURE


def test_pure_python_is_selectable() -> None:
    """``KWIRE_PURE_PYTHON=1`` runs the Python loops, in a process of its own."""
    code = "from storage import record_loops; print(record_loops.COMPILED)"
    env = {**os.environ, "KWIRE_PURE_PYTHON": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


values_lists = st.lists(st.binary(min_size=1, max_size=300), min_size=1, max_size=40)


@settings(max_examples=examples(200), deadline=None)
@given(values=values_lists)
def test_writer_matches_encode_record(values: list[bytes]) -> None:
    assert encode_keyless_records(values) == _python_body(values)


def test_writer_long_values_and_many_records() -> None:
    """Varints of three bytes and more: a 70 KB value, offset deltas past 8,191."""
    values = [b"v" * 70_000] + [b"x"] * 9_000
    assert encode_keyless_records(values) == _python_body(values)
    assert list(_batch(encode_keyless_records(values), len(values)).iter_values()) == values


def test_writer_takes_other_buffers_through_python() -> None:
    values = [bytearray(b"ab"), memoryview(b"cd")]
    assert encode_keyless_records(values) == _python_body([b"ab", b"cd"])  # type: ignore[arg-type]


@settings(max_examples=examples(200), deadline=None)
@given(
    records_=st.lists(
        st.tuples(st.one_of(st.none(), st.binary(max_size=200)), st.one_of(st.none(), st.binary(max_size=300)),
                  st.integers(0, 2**40), st.integers(0, 2**20)),
        min_size=1, max_size=20,
    )
)
def test_reader_matches_python_on_every_record_shape(
    records_: list[tuple[bytes | None, bytes | None, int, int]],
) -> None:
    """Keys, null values, long timestamp and offset deltas: the same values either way."""
    body = bytearray()
    for key, value, timestamp_delta, offset_delta in records_:
        encode_record(body, offset_delta, timestamp_delta, key, value)
    batch = _batch(bytes(body), len(records_))
    expected = [value for _, value, _, _ in records_]
    assert _values(batch) == _python_values(batch) == expected
    if record_loops._crecords is not None:  # read by the compiled loop itself, not handed back
        assert record_loops._crecords.values(bytes(body), len(records_)) == expected


def _selected(values: list[bytes | None] | str, wanted: bytes) -> list[tuple[int, bytes]] | str:
    """The reference for iter_selected_values: iter_values' values filtered in Python."""
    if isinstance(values, str):
        return values
    return [(i, v) for i, v in enumerate(values) if v is not None and len(v) >= 2 and wanted[v[1]]]


def _selected_values(batch: RecordBatch, wanted: bytes) -> list[tuple[int, bytes]] | str:
    try:
        return list(batch.iter_selected_values(wanted))
    except InvalidRecordError as exc:
        return f"InvalidRecordError: {exc}"


@settings(max_examples=examples(300), deadline=None)
@given(
    values=st.lists(st.one_of(st.none(), st.binary(max_size=40)), min_size=1, max_size=30),
    wanted=st.binary(min_size=256, max_size=256),
    cut=st.one_of(st.none(), st.integers(0, 400)),
)
def test_selected_values_are_the_values_with_a_wanted_second_byte(
    values: list[bytes | None], wanted: bytes, cut: int | None,
) -> None:
    """Each record whose value has a wanted second byte (a metadata record's type), as
    (index, value), and the same failures as iter_values on a cut section: compiled and Python
    alike."""
    body = bytearray()
    for delta, value in enumerate(values):
        encode_record(body, delta, 0, None, value)
    if cut is not None:
        del body[cut:]
    batch = _batch(bytes(body), len(values))
    expected = _selected(_python_values(batch), wanted)
    assert _selected_values(batch, wanted) == expected
    saved = record_loops._crecords
    record_loops._crecords = None
    try:
        assert _selected_values(batch, wanted) == expected
    finally:
        record_loops._crecords = saved
    if saved is not None and cut is None:  # read by the compiled loop itself, not handed back
        assert saved.selected_values(bytes(body), len(values), wanted) == expected


def test_selected_values_take_a_256_byte_mask() -> None:
    batch = _batch(_python_body([b"\x00\x02"]), 1)
    with pytest.raises(ValueError):
        batch.iter_selected_values(b"\x01" * 255)
    if record_loops._crecords is not None:
        with pytest.raises(TypeError):
            record_loops._crecords.selected_values(_python_body([b"\x00\x02"]), 1, b"\x01" * 255)


@settings(max_examples=examples(500), deadline=None)
@given(garbage=st.binary(max_size=160), count=st.integers(-2, 8))
def test_reader_fails_as_python_fails_on_garbage(garbage: bytes, count: int) -> None:
    batch = _batch(garbage, count)
    assert _values(batch) == _python_values(batch)


@settings(max_examples=examples(300), deadline=None)
@given(values=values_lists, data=st.data())
def test_reader_fails_as_python_fails_on_cut_or_flipped_records(values: list[bytes], data: st.DataObject) -> None:
    body = bytearray(_python_body(values))
    if data.draw(st.booleans()):
        del body[data.draw(st.integers(0, len(body) - 1)):]
    else:
        at = data.draw(st.integers(0, len(body) - 1))
        body[at] = data.draw(st.integers(0, 255))
    batch = _batch(bytes(body), len(values))
    assert _values(batch) == _python_values(batch)


@pytest.mark.parametrize(("last", "fits"), [(0x0F, True), (0x10, False), (0x7F, False)])
def test_reader_rejects_a_varint_past_32_bits_as_python_does(last: int, fits: bool) -> None:
    """A five-byte varint whose last byte sets bits past the 32nd (here a record's offset delta)
    is out of range: the compiled loop rejects it as the Python reader does, which then names
    the error (a case the cut-or-flipped property drew once)."""
    offset_delta = bytes([0x80, 0x80, 0x80, 0x80, last])
    body = bytes([0x16, 0x00, 0x00]) + offset_delta + bytes([0x01, 0x02]) + b"x" + bytes([0x00])
    batch = _batch(body, 1)
    assert _values(batch) == _python_values(batch) == ([b"x"] if fits else
                                                       "InvalidRecordError: Invalid record: varint out of 32-bit range")
    if record_loops._crecords is not None and not fits:
        with pytest.raises(ValueError, match="record header"):
            record_loops._crecords.values(body, 1)


def _python_validate(body: bytes, count: int, max_delta: int) -> bool:
    """``RecordBatch.validate_records``' Python rule: every record parses and lies within the
    batch, nothing after the last."""
    batch = _batch(body, count)
    try:
        for record in batch.iter_records():
            if not 0 <= record.offset - batch.base_offset <= max_delta:
                return False
    except InvalidRecordError:
        return False
    return True


def _compiled_validate(body: bytes, count: int, max_delta: int) -> bool:
    assert record_loops._crecords is not None
    try:
        record_loops._crecords.check(body, count, max_delta)
    except ValueError:
        return False
    return True


record_shapes = st.lists(
    st.tuples(st.one_of(st.none(), st.binary(max_size=40)), st.one_of(st.none(), st.binary(max_size=60)),
              st.integers(-2**40, 2**40), st.integers(-3, 12),
              st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20))), max_size=3)),
    min_size=0, max_size=8,
)


@pytest.mark.skipif(record_loops._crecords is None, reason="the compiled module is not built")
@settings(max_examples=examples(400), deadline=None)
@given(shapes=record_shapes, max_delta=st.integers(0, 10), data=st.data())
def test_check_accepts_what_the_python_reader_accepts(shapes: list, max_delta: int, data: st.DataObject) -> None:
    """``check`` (the deep audit's compiled loop) and the Python reader agree on records with
    keys, null values, headers and offset deltas in and out of the batch, whole, cut short,
    with a byte flipped, or with the count off by one."""
    body = bytearray()
    for key, value, timestamp_delta, offset_delta, headers in shapes:
        encode_record(body, offset_delta, timestamp_delta, key, value, [Header(k, v) for k, v in headers])
    count = len(shapes)
    mutation = data.draw(st.sampled_from(["none", "cut", "flip", "count"]))
    if mutation == "cut" and body:
        del body[data.draw(st.integers(0, len(body) - 1)):]
    elif mutation == "flip" and body:
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    elif mutation == "count":
        count += data.draw(st.sampled_from([-1, 1]))
    expected = _python_validate(bytes(body), count, max_delta)
    assert _compiled_validate(bytes(body), count, max_delta) == expected
    if mutation == "none" and count >= 0:
        assert expected == all(0 <= shape[3] <= max_delta for shape in shapes)


@pytest.mark.parametrize("count", [0, 1, 3])
def test_reader_counts_as_the_header_says(count: int) -> None:
    body = _python_body([b"a", b"b", b"c"])
    assert list(_batch(body, count).iter_values()) == [b"a", b"b", b"c"][:count]
