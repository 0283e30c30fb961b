"""Property tests of whole record batches through both record loops: the compiled ones
(``storage/_crecords.c``) and the Python ones that ``KWIRE_PURE_PYTHON=1`` selects (the module
then has no ``_crecords``; here it is set aside for the duration of a call, the same switch).

* Any batch (keys, null values, headers, timestamps, producer id and sequence, transactional,
  control or delete-horizon attributes, every codec) decodes to the records it was built from,
  with the header fields ``DefaultRecordBatch`` derives (last offset and sequence, wrapping past
  INT32_MAX; max timestamp), and both loops give the same values, selected values and
  validation.
* A batch whose records section was damaged under a good CRC (so only the record walk can find
  it) is refused by both loops with the same ``InvalidRecordError`` message, or accepted by both
  with the same values.
* KRaft data batches (``build_data_batch``) are byte-identical whichever loop wrote them, for
  every buffer type a caller may pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from storage import record_loops
from storage.batch_builder import assemble_batch, build_batch
from storage.batch_layout import INT32_MAX, NO_SEQUENCE, TimestampType, increment_sequence
from storage.compression import CompressionType
from storage.control import build_data_batch
from storage.errors import InvalidRecordError
from storage.record_codec import Header, SimpleRecord
from storage.records import RecordBatch
from tests.properties import examples

pytestmark = pytest.mark.skipif(not record_loops.COMPILED, reason="compares the compiled loops with Python's")

slow = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

headers_st = st.lists(
    st.builds(Header, st.text(max_size=6), st.none() | st.binary(max_size=6)), max_size=3
).map(tuple)
record_st = st.builds(
    SimpleRecord,
    value=st.none() | st.binary(max_size=200),
    key=st.none() | st.binary(max_size=16),
    timestamp=st.just(-1) | st.integers(0, 2**45),
    headers=headers_st,
)
codec_st = st.sampled_from(list(CompressionType))


@contextmanager
def pure_python() -> Iterator[None]:
    saved = record_loops._crecords
    record_loops._crecords = None  # type: ignore[assignment]
    try:
        yield
    finally:
        record_loops._crecords = saved


def outcome(call: Callable[[], Any]) -> Any:
    """What ``call()`` returns, or ``("error", message)`` for the InvalidRecordError it raises."""
    try:
        return call()
    except InvalidRecordError as exc:
        return ("error", str(exc))


def both_paths(batch: RecordBatch, wanted: bytes) -> list[Any]:
    """Values, selected values and validation of ``batch`` by the loops the module chose and by
    the Python loops alone, which must agree; and the compiled loops called directly (without the
    fallback to Python that gives Kafka's error message) must refuse exactly what Python refuses."""
    def run() -> list[Any]:
        return [
            outcome(lambda: [None if v is None else bytes(v) for v in batch.iter_values()]),
            outcome(lambda: [(i, bytes(v)) for i, v in batch.iter_selected_values(wanted)]),
            outcome(lambda: batch.validate_records()),
        ]

    compiled = run()
    with pure_python():
        python = run()
    assert compiled == python
    crecords = record_loops._crecords
    section = batch.records_section()
    direct = []
    for call in (lambda: crecords.values(section, batch.records_count),
                 lambda: crecords.selected_values(section, batch.records_count, wanted),
                 lambda: crecords.check(section, batch.records_count, batch.last_offset - batch.base_offset)):
        try:
            direct.append(call())
        except ValueError:
            direct.append("refused")
    assert [d == "refused" for d in direct] == [isinstance(p, tuple) for p in python]
    return python


wanted_st = st.sets(st.integers(0, 255), max_size=40).map(lambda s: bytes(1 if b in s else 0 for b in range(256)))


@settings(slow, max_examples=examples(25))
@given(
    batch_records=st.lists(record_st, min_size=1, max_size=8),
    codec=codec_st,
    base_offset=st.integers(0, 2**40),
    producer=st.none() | st.tuples(st.integers(0, 2**62), st.integers(0, 2**15 - 1),
                                   st.integers(INT32_MAX - 12, INT32_MAX) | st.integers(0, INT32_MAX)),
    transactional=st.booleans(),
    log_append=st.none() | st.integers(0, 2**45),
    delete_horizon=st.none() | st.integers(0, 2**45),
    wanted=wanted_st,
)
def test_any_batch_decodes_to_its_records_alike_in_both_loops(
    batch_records: list[SimpleRecord], codec: CompressionType, base_offset: int,
    producer: tuple[int, int, int] | None, transactional: bool, log_append: int | None,
    delete_horizon: int | None, wanted: bytes,
) -> None:
    producer_id, producer_epoch, base_sequence = producer or (-1, -1, NO_SEQUENCE)
    raw = build_batch(
        batch_records, base_offset=base_offset, partition_leader_epoch=3, compression=codec,
        timestamp_type=TimestampType.CREATE_TIME if log_append is None else TimestampType.LOG_APPEND_TIME,
        log_append_time=log_append, producer_id=producer_id, producer_epoch=producer_epoch,
        base_sequence=base_sequence, is_transactional=transactional, delete_horizon_ms=delete_horizon,
    )
    batch = RecordBatch(raw)
    batch.ensure_valid()
    count = len(batch_records)
    assert (batch.base_offset, batch.last_offset, batch.records_count) == (base_offset, base_offset + count - 1, count)
    assert (batch.producer_id, batch.producer_epoch, batch.is_transactional) == (producer_id, producer_epoch, transactional)
    assert batch.compression == codec and batch.delete_horizon_ms == delete_horizon
    # sequences wrap from INT32_MAX to 0 (DefaultRecordBatch.incrementSequence)
    if base_sequence == NO_SEQUENCE:
        assert batch.last_sequence == NO_SEQUENCE
    else:
        assert batch.last_sequence == (base_sequence + count - 1) % (INT32_MAX + 1)
    stamps = [r.timestamp for r in batch_records]
    assert batch.max_timestamp == (max(stamps) if log_append is None else log_append)

    decoded = batch.records()
    assert [(r.key, r.value, r.headers) for r in decoded] == [(r.key, r.value, r.headers) for r in batch_records]
    assert [r.offset for r in decoded] == list(range(base_offset, base_offset + count))
    if log_append is None:
        assert [r.timestamp for r in decoded] == stamps
    else:
        assert all(r.timestamp == log_append for r in decoded)
    assert [r.sequence for r in decoded] == [
        NO_SEQUENCE if base_sequence == NO_SEQUENCE else increment_sequence(base_sequence, i) for i in range(count)]

    values, selected, valid = both_paths(batch, wanted)
    assert values == [r.value for r in batch_records]
    assert selected == [(i, v) for i, v in enumerate(values) if v is not None and len(v) >= 2 and wanted[v[1]]]
    assert valid is None


@settings(slow, max_examples=examples(120))
@given(
    batch_records=st.lists(record_st, min_size=1, max_size=8),
    codec=codec_st,
    extra=st.integers(-2, 2),
    data=st.data(),
)
def test_a_damaged_records_section_under_a_good_crc_is_judged_alike_by_both_loops(
    batch_records: list[SimpleRecord], codec: CompressionType, extra: int, data: st.DataObject
) -> None:
    body = bytes(RecordBatch(build_batch(batch_records)).records_section())
    damage = data.draw(st.sampled_from(["flip", "nudge", "cut", "grow", "count"]), label="damage")
    if damage in ("flip", "nudge"):  # any change of a byte, or a length or delta off by one or two
        i = data.draw(st.integers(0, len(body) - 1), label="byte")
        new = body[i] ^ data.draw(st.integers(1, 255), label="xor") if damage == "flip" else (
            body[i] + data.draw(st.sampled_from([-4, -2, -1, 1, 2, 4]), label="step")) % 256
        body = body[:i] + bytes([new]) + body[i + 1:]
    elif damage == "cut":
        body = body[:data.draw(st.integers(0, len(body) - 1), label="cut")]
    elif damage == "grow":
        body += data.draw(st.binary(min_size=1, max_size=8), label="tail")
    count = len(batch_records) + (extra if damage == "count" else 0)
    assume(count >= 0)
    # the header is written whole after the damage, so the CRC covers the damaged section
    batch = RecordBatch(assemble_batch(
        body, record_count=count, base_offset=0, last_offset_delta=max(count - 1, 0), partition_leader_epoch=0,
        base_timestamp=0, max_timestamp=0, compression=codec,
    ))
    batch.ensure_valid()
    values, selected, valid = both_paths(batch, bytes([1]) * 256)
    if valid is None:  # accepted: the values are those the full record walk reads
        assert values == [r.value for r in batch.records()]
        assert selected == [(i, v) for i, v in enumerate(values) if v is not None and len(v) >= 2]
    else:  # validation is at least as strict as the value walk
        assert valid[0] == "error"
    if isinstance(values, tuple):
        assert valid is not None


@settings(slow, max_examples=examples(80))
@given(
    values=st.lists(st.binary(min_size=1, max_size=9000), min_size=1, max_size=20),
    wrap=st.sampled_from([bytes, bytearray, memoryview]),
    codec=codec_st,
    base_offset=st.integers(0, 2**40),
    epoch=st.integers(0, INT32_MAX),
    now=st.integers(0, 2**45),
)
def test_kraft_data_batches_are_the_same_bytes_from_either_loop(
    values: list[bytes], wrap: type, codec: CompressionType, base_offset: int, epoch: int, now: int
) -> None:
    def build() -> bytes:
        return build_data_batch([wrap(v) for v in values], base_offset=base_offset,
                                partition_leader_epoch=epoch, append_time_ms=now, compression=codec)

    compiled = build()
    with pure_python():
        python = build()
    assert compiled == python
    batch = RecordBatch(compiled)
    batch.ensure_valid()
    assert [bytes(v) for v in batch.iter_values()] == values  # type: ignore[arg-type]
    assert (batch.base_offset, batch.partition_leader_epoch, batch.max_timestamp) == (base_offset, epoch, now)


def test_a_record_whose_fields_overrun_its_length_is_refused_by_both_loops() -> None:
    # a null key and null value with a declared length of 4 where its fields take 6 bytes: the
    # value's length lies past the record (Kafka: "Invalid record size"); the Python walk once
    # read it from the bytes after the record and gave None
    section = bytes([0x08, 0, 0, 0, 0x01, 0x01, 0])
    batch = RecordBatch(assemble_batch(section, record_count=1, base_offset=0, last_offset_delta=0,
                                       partition_leader_epoch=0, base_timestamp=0, max_timestamp=0))
    values, _, valid = both_paths(batch, bytes(256))
    assert values[0] == "error" and "Invalid record size" in values[1]
    assert valid[0] == "error"
