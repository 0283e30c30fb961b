"""Record batch v2: layout, CRC coverage, records, builder, scanning; cross-checked against
kafka-python's DefaultRecordBatch and a `construct` declaration of the header."""

from __future__ import annotations

import struct

import construct as cs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from storage.batch_builder import build_batch, set_base_offset, set_partition_leader_epoch
from storage.batch_layout import RECORD_BATCH_OVERHEAD, TimestampType
from storage.batch_scan import iter_batches, next_offset_after, scan_batches
from storage.compression import CompressionType
from storage.errors import CorruptRecordError, InvalidRecordError
from storage.record_codec import Header, SimpleRecord, encode_record
from storage.records import RecordBatch
from tests.properties import examples

# An independent declaration of the 61-byte header (DefaultRecordBatch.java:35-130).
HEADER = cs.Struct(
    "base_offset" / cs.Int64sb,
    "length" / cs.Int32sb,
    "partition_leader_epoch" / cs.Int32sb,
    "magic" / cs.Const(2, cs.Int8sb),
    "crc" / cs.Int32ub,
    "attributes" / cs.BitStruct(
        "unused" / cs.BitsInteger(9),
        "delete_horizon" / cs.Flag,
        "control" / cs.Flag,
        "transactional" / cs.Flag,
        "timestamp_type" / cs.BitsInteger(1),
        "compression" / cs.BitsInteger(3),
    ),
    "last_offset_delta" / cs.Int32sb,
    "base_timestamp" / cs.Int64sb,
    "max_timestamp" / cs.Int64sb,
    "producer_id" / cs.Int64sb,
    "producer_epoch" / cs.Int16sb,
    "base_sequence" / cs.Int32sb,
    "records_count" / cs.Int32sb,
)
assert HEADER.sizeof() == RECORD_BATCH_OVERHEAD

headers_st = st.lists(
    st.builds(Header, st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=8))), max_size=3
)
record_st = st.builds(
    SimpleRecord,
    value=st.one_of(st.none(), st.binary(max_size=300)),
    key=st.one_of(st.none(), st.binary(max_size=20)),
    timestamp=st.integers(0, 2**45),
    headers=headers_st.map(tuple),
)
codec_st = st.sampled_from(list(CompressionType))


def test_header_layout_by_hand() -> None:
    batch = build_batch(
        [SimpleRecord(b"v", timestamp=1000), SimpleRecord(b"w", timestamp=1500)],
        base_offset=42,
        partition_leader_epoch=7,
        producer_id=99,
        producer_epoch=3,
        base_sequence=10,
        is_transactional=True,
    )
    (base, length, epoch, magic, crc, attrs, lod, base_ts, max_ts, pid, pep, seq, count) = (
        struct.unpack_from(">qiibIhiqqqhii", batch)
    )
    assert (base, length, epoch, magic) == (42, len(batch) - 12, 7, 2)
    assert (attrs, lod, base_ts, max_ts, pid, pep, seq, count) == (0x10, 1, 1000, 1500, 99, 3, 10, 2)
    view = RecordBatch(batch)
    view.ensure_valid()
    assert view.last_sequence == 11
    assert [(r.offset, r.timestamp, r.sequence) for r in view.records()] == [
        (42, 1000, 10),
        (43, 1500, 11),
    ]


def test_crc_covers_exactly_attributes_to_end() -> None:
    batch = build_batch([SimpleRecord(b"value", b"key", 5)], base_offset=3, partition_leader_epoch=2)
    for i in range(len(batch)):
        mutated = bytearray(batch)
        mutated[i] ^= 0x01
        if i == 16:
            with pytest.raises(CorruptRecordError):  # magic
                RecordBatch(mutated)
            continue
        if 8 <= i < 12:
            with pytest.raises(CorruptRecordError):  # the length no longer frames the bytes
                RecordBatch(mutated)
            continue
        view = RecordBatch(mutated)
        assert view.is_valid() == (i < 17), i


def test_set_offset_and_epoch_keep_crc() -> None:
    batch = bytearray(build_batch([SimpleRecord(b"a"), SimpleRecord(b"b")]))
    set_base_offset(batch, 1000)
    set_partition_leader_epoch(batch, 9)
    view = RecordBatch(batch)
    view.ensure_valid()
    assert (view.base_offset, view.partition_leader_epoch, view.last_offset) == (1000, 9, 1001)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=st.lists(record_st, min_size=1, max_size=12),
    codec=codec_st,
    base_offset=st.integers(0, 2**40),
    epoch=st.integers(-1, 2**31 - 1),
    control=st.booleans(),
    log_append=st.booleans(),
)
def test_round_trip_and_construct_oracle(
    records: list[SimpleRecord],
    codec: CompressionType,
    base_offset: int,
    epoch: int,
    control: bool,
    log_append: bool,
) -> None:
    raw = build_batch(
        records,
        base_offset=base_offset,
        partition_leader_epoch=epoch,
        compression=codec,
        is_control=control,
        timestamp_type=TimestampType.LOG_APPEND_TIME if log_append else TimestampType.CREATE_TIME,
        log_append_time=777 if log_append else None,
    )
    view = RecordBatch(raw)
    view.ensure_valid()
    parsed = view.records()
    assert [r.value for r in parsed] == [r.value for r in records]
    assert list(view.iter_values()) == [r.value for r in records]
    assert [r.key for r in parsed] == [r.key for r in records]
    assert [r.headers for r in parsed] == [r.headers for r in records]
    assert [r.offset for r in parsed] == list(range(base_offset, base_offset + len(records)))
    if log_append:
        assert all(r.timestamp == 777 for r in parsed)
    else:
        assert [r.timestamp for r in parsed] == [r.timestamp for r in records]

    oracle = HEADER.parse(raw)
    assert oracle.base_offset == view.base_offset == base_offset
    assert oracle.length == len(raw) - 12
    assert oracle.partition_leader_epoch == view.partition_leader_epoch == epoch
    assert oracle.crc == view.crc == view.compute_crc()
    assert oracle.attributes.compression == view.compression == codec
    assert oracle.attributes.control == view.is_control == control
    assert oracle.attributes.timestamp_type == int(view.timestamp_type) == int(log_append)
    assert oracle.attributes.transactional is False
    assert oracle.last_offset_delta == len(records) - 1
    assert oracle.base_timestamp == records[0].timestamp
    assert oracle.max_timestamp == (777 if log_append else max(r.timestamp for r in records))
    assert (oracle.producer_id, oracle.producer_epoch, oracle.base_sequence) == (-1, -1, -1)
    assert oracle.records_count == len(records)


def _kafka_python_build(records: list[SimpleRecord], codec: CompressionType) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 24,
    )
    for i, r in enumerate(records):
        builder.append(
            i,
            timestamp=r.timestamp,
            key=r.key,
            value=r.value,
            headers=[(h.key, h.value) for h in r.headers],
        )
    return bytes(builder.build())


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=st.lists(record_st, min_size=1, max_size=10), codec=codec_st)
def test_kafka_python_reads_kwire_batches(records: list[SimpleRecord], codec: CompressionType) -> None:
    raw = build_batch(records, base_offset=500, partition_leader_epoch=4, compression=codec)
    theirs = DefaultRecordBatch(raw)
    assert theirs.validate_crc()
    assert theirs.base_offset == 500
    assert theirs.compression_type == int(codec)
    got = list(theirs)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in got] == [
        (500 + i, r.timestamp, r.key, r.value) for i, r in enumerate(records)
    ]
    assert [list(r.headers) for r in got] == [[(h.key, h.value) for h in r.headers] for r in records]
    if codec == CompressionType.NONE:
        # Same encoder decisions: identical bytes once kafka-python's fixed fields are patched.
        mine = bytearray(_kafka_python_build(records, codec))
        set_base_offset(mine, 500)
        set_partition_leader_epoch(mine, 4)
        assert bytes(mine) == raw


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=st.lists(record_st, min_size=1, max_size=10), codec=codec_st)
def test_kwire_reads_kafka_python_batches(records: list[SimpleRecord], codec: CompressionType) -> None:
    raw = bytearray(_kafka_python_build(records, codec))
    # kafka-python always writes BaseOffset 0 and PartitionLeaderEpoch 0
    assert RecordBatch(raw).base_offset == 0 and RecordBatch(raw).partition_leader_epoch == 0
    set_base_offset(raw, 77)
    set_partition_leader_epoch(raw, 5)
    view = RecordBatch(raw)
    view.ensure_valid()
    # kafka-python falls back to no compression when compressing would not shrink the records
    assert view.compression in (codec, CompressionType.NONE)
    assert view.compression == DefaultRecordBatch(bytes(raw)).compression_type
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in view.records()] == [
        (77 + i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(records)
    ]


def test_delete_horizon_and_control_attributes() -> None:
    raw = build_batch([SimpleRecord(b"v", timestamp=50)], delete_horizon_ms=40, is_control=True)
    view = RecordBatch(raw)
    assert view.has_delete_horizon and view.delete_horizon_ms == 40 and view.is_control
    assert view.attributes == 0x60
    assert view.records()[0].timestamp == 50
    plain = RecordBatch(build_batch([SimpleRecord(b"v", timestamp=50)]))
    assert plain.delete_horizon_ms is None and plain.attributes == 0


def test_builder_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        build_batch([])
    with pytest.raises(ValueError):
        build_batch([SimpleRecord(b"v", timestamp=-5)])
    with pytest.raises(ValueError):
        build_batch([SimpleRecord(b"v")], timestamp_type=TimestampType.LOG_APPEND_TIME)


def _batch_with_records_body(body: bytes, count: int) -> bytes:
    from storage.batch_builder import assemble_batch

    return assemble_batch(
        body, record_count=count, base_offset=0, last_offset_delta=max(count - 1, 0),
        partition_leader_epoch=0, base_timestamp=0, max_timestamp=0,
    )


def test_record_structure_errors() -> None:
    good = bytearray()
    encode_record(good, 0, 0, None, b"value")
    # count larger than the records present
    with pytest.raises(InvalidRecordError):
        RecordBatch(_batch_with_records_body(bytes(good), 2)).records()
    # bytes left over after the declared records
    with pytest.raises(InvalidRecordError):
        RecordBatch(_batch_with_records_body(bytes(good) + b"\x00", 1)).records()
    # a length varint promising more than the batch holds
    with pytest.raises(InvalidRecordError):
        RecordBatch(_batch_with_records_body(b"\x7e" + bytes(good[1:]), 1)).records()
    # negative record count
    with pytest.raises(InvalidRecordError):
        RecordBatch(_batch_with_records_body(bytes(good), -1)).records()


@settings(max_examples=examples(300), deadline=None)
@given(garbage=st.binary(min_size=0, max_size=120), count=st.integers(-2, 5))
def test_garbage_records_raise_only_invalid_record(garbage: bytes, count: int) -> None:
    try:
        RecordBatch(_batch_with_records_body(garbage, count)).records()
    except InvalidRecordError:
        pass
    try:
        list(RecordBatch(_batch_with_records_body(garbage, count)).iter_values())
    except InvalidRecordError:
        pass


def _three_batches() -> bytes:
    return b"".join(
        build_batch([SimpleRecord(b"x" * n)] * 2, base_offset=2 * i, partition_leader_epoch=1)
        for i, n in enumerate((10, 20, 30))
    )


def test_iter_and_scan_whole_buffer() -> None:
    data = _three_batches()
    assert [b.base_offset for b in iter_batches(data)] == [0, 2, 4]
    result = scan_batches(data, expected_offset=0)
    assert result.valid_bytes == len(data) and result.error is None and not result.torn
    assert result.next_offset == 6


def test_next_offset_after_reads_the_headers_up_to_the_last_whole_batch() -> None:
    data = _three_batches()
    assert next_offset_after(data) == 6
    for cut in range(len(data)):
        whole = list(iter_batches(data[:cut]))
        assert next_offset_after(data[:cut]) == (whole[-1].next_offset if whole else None), cut


def test_scan_stops_at_torn_tail_at_every_cut() -> None:
    data = _three_batches()
    sizes = [b.size_in_bytes for b in iter_batches(data)]
    boundaries = [0, sizes[0], sizes[0] + sizes[1], len(data)]
    for cut in range(len(data) + 1):
        result = scan_batches(data[:cut], expected_offset=0)
        expected_valid = max(b for b in boundaries if b <= cut)
        assert result.valid_bytes == expected_valid, cut
        assert result.torn == (cut != expected_valid)
        assert len(list(iter_batches(data[:cut]))) == boundaries.index(expected_valid)


def test_scan_stops_at_corruption() -> None:
    data = bytearray(_three_batches())
    first = RecordBatch(memoryview(data)[: struct.unpack_from(">i", data, 8)[0] + 12])
    second_start = first.size_in_bytes
    data[second_start + 70] ^= 0xFF  # inside the second batch's records: bad CRC
    result = scan_batches(data, expected_offset=0)
    assert result.valid_bytes == second_start and "crc" in (result.error or "")
    # an impossible size field
    data2 = bytearray(_three_batches())
    struct.pack_into(">i", data2, second_start + 8, 3)
    assert scan_batches(data2).valid_bytes == second_start
    with pytest.raises(CorruptRecordError):
        list(iter_batches(data2))
    # zero-filled tail (a preallocated or torn file) reads as size 0: corrupt, stop there
    data3 = _three_batches() + bytes(100)
    assert scan_batches(data3).valid_bytes == len(_three_batches())
    # offsets that do not follow on
    assert scan_batches(_three_batches(), expected_offset=1).valid_bytes == 0


def test_iter_values_reads_long_varints_too() -> None:
    """``iter_values`` decodes one- and two-byte varints inline: values of every length class
    (null, 0, 63, 64, 8191, 8192 and 70,000 bytes), keys, timestamp deltas beyond one byte and
    offset deltas beyond 63 come out as ``records()`` gives them."""
    sizes = [None, 0, 63, 64, 8191, 8192, 70_000]
    records = [
        SimpleRecord(None if n is None else bytes([i % 251]) * n, key=b"k" * i, timestamp=1_000 + 97 * i)
        for i, n in enumerate(sizes * 12)
    ]
    view = RecordBatch(build_batch(records))
    assert list(view.iter_values()) == [r.value for r in view.records()] == [r.value for r in records]


def test_records_at_the_varint_table_bounds_encode_as_kafka_python_does() -> None:
    """``encode_record`` takes the common record (a value, no key or headers, deltas and sizes
    below 8192) from a table of varints: at and across the table's bounds the bytes stay
    kafka-python's."""
    sizes = [0, 1, 63, 64, 8100, 8160, 8170, 8191, 8192, 9000]
    records = [SimpleRecord(b"v" * n, timestamp=1_000 + delta) for n in sizes for delta in (0, 63, 64, 8191, 8192)]
    records += [SimpleRecord(None, timestamp=1_000), SimpleRecord(b"x", key=b"k", timestamp=999)]
    raw = build_batch(records, base_offset=0, partition_leader_epoch=0)
    assert bytes(_kafka_python_build(records, CompressionType.NONE)) == raw
