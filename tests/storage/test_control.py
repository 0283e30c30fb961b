"""Control records and KRaft's batch rules."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch

from kwire.uuid import Uuid
from messages.generated.kraft_version_record import KRaftVersionRecord
from messages.generated.leader_change_message import LeaderChangeMessage
from messages.generated.leader_change_message import Voter as LcVoter
from messages.generated.snapshot_footer_record import SnapshotFooterRecord
from messages.generated.snapshot_header_record import SnapshotHeaderRecord
from messages.generated.voters_record import Endpoint, KRaftVersionFeature, Voter, VotersRecord
from storage.batch_builder import assemble_batch, build_batch
from storage.compression import CompressionType
from storage.control import (
    ControlRecord,
    ControlRecordType,
    EndTransactionMarker,
    build_control_batch,
    build_data_batch,
    build_kraft_batch,
    decode_control_value,
    encode_control_value,
    kraft_data_values,
    parse_control_key,
    read_kraft_batch,
)
from storage.errors import CorruptRecordError, InvalidRecordError
from storage.record_codec import Header, SimpleRecord
from storage.records import RecordBatch
from tests.properties import examples


def test_control_keys() -> None:
    assert [t.key_bytes().hex() for t in list(ControlRecordType)[1:]] == [
        "00000000", "00000001", "00000002", "00000003", "00000004", "00000005", "00000006",
    ]
    assert parse_control_key(b"\x00\x00\x00\x06") is ControlRecordType.KRAFT_VOTERS
    assert parse_control_key(b"\x00\x00\x00\x63") is ControlRecordType.UNKNOWN
    assert parse_control_key(b"\x00\x01\x00\x02extra") is ControlRecordType.LEADER_CHANGE
    with pytest.raises(InvalidRecordError):
        parse_control_key(b"\x00\x00\x00")
    with pytest.raises(InvalidRecordError):
        parse_control_key(b"\xff\xff\x00\x02")
    with pytest.raises(ValueError):
        ControlRecordType.UNKNOWN.key_bytes()


def test_leader_change_value_bytes() -> None:
    message = LeaderChangeMessage(leader_id=1, voters=[LcVoter(1)], granting_voters=[LcVoter(1)])
    # version int16 | leaderId int32 | voters compact array (2 = one) {id, tags} | granting | tags
    assert encode_control_value(message).hex() == "0000" "00000001" "02" "00000001" "00" "02" "00000001" "00" "00"
    assert decode_control_value(ControlRecordType.LEADER_CHANGE, encode_control_value(message)) == message


def test_end_transaction_marker() -> None:
    marker = EndTransactionMarker(ControlRecordType.COMMIT, 17)
    assert marker.value_bytes().hex() == "000000000011"
    assert EndTransactionMarker.deserialize(ControlRecordType.COMMIT, marker.value_bytes()) == marker
    with pytest.raises(InvalidRecordError):
        EndTransactionMarker.deserialize(ControlRecordType.ABORT, b"\x00")


def _voters() -> VotersRecord:
    return VotersRecord(
        voters=[
            Voter(
                voter_id=1,
                voter_directory_id=Uuid.from_string("J8aAPcfLQt2bqs1JT_rMgQ"),
                endpoints=[Endpoint("CONTROLLER", "localhost", 9093)],
                kraft_version_feature=KRaftVersionFeature(0, 1),
            )
        ]
    )


def test_start_of_epoch_control_batch_layout() -> None:
    messages = [
        LeaderChangeMessage(leader_id=1, voters=[LcVoter(1)], granting_voters=[LcVoter(1)]),
        KRaftVersionRecord(kraft_version=1),
        _voters(),
    ]
    raw = build_control_batch(messages, base_offset=10, partition_leader_epoch=3, append_time_ms=1234)
    batch = RecordBatch(raw)
    batch.ensure_valid()
    assert batch.attributes == 0x20 and batch.is_control
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert (batch.base_timestamp, batch.max_timestamp) == (1234, 1234)
    assert (batch.base_offset, batch.last_offset, batch.partition_leader_epoch) == (10, 12, 3)
    kraft = read_kraft_batch(batch)
    assert kraft.is_control and kraft.append_timestamp == 1234 and kraft.epoch == 3
    assert list(kraft.records) == [
        ControlRecord(ControlRecordType.LEADER_CHANGE, messages[0]),
        ControlRecord(ControlRecordType.KRAFT_VERSION, messages[1]),
        ControlRecord(ControlRecordType.KRAFT_VOTERS, messages[2]),
    ]
    # an independent reader sees a control batch with 4-byte keys
    theirs = DefaultRecordBatch(raw)
    assert theirs.validate_crc() and theirs.is_control_batch
    assert [r.key for r in theirs] == [b"\x00\x00\x00\x02", b"\x00\x00\x00\x05", b"\x00\x00\x00\x06"]


def test_snapshot_marker_batches() -> None:
    header = build_control_batch(
        [SnapshotHeaderRecord(last_contained_log_timestamp=99)], base_offset=0,
        partition_leader_epoch=0, append_time_ms=5,
    )
    footer = build_control_batch([SnapshotFooterRecord()], base_offset=1, partition_leader_epoch=0, append_time_ms=5)
    records = read_kraft_batch(RecordBatch(header)).records
    assert records == (ControlRecord(ControlRecordType.SNAPSHOT_HEADER, SnapshotHeaderRecord(last_contained_log_timestamp=99)),)
    assert read_kraft_batch(RecordBatch(footer)).records[0].type is ControlRecordType.SNAPSHOT_FOOTER  # type: ignore[union-attr]


@settings(max_examples=examples(40), deadline=None)
@given(
    values=st.lists(st.binary(min_size=1, max_size=200), min_size=1, max_size=20),
    codec=st.sampled_from(list(CompressionType)),
)
def test_data_batch_round_trip(values: list[bytes], codec: CompressionType) -> None:
    raw = build_data_batch(values, base_offset=7, partition_leader_epoch=2, append_time_ms=50, compression=codec)
    kraft = read_kraft_batch(RecordBatch(raw))
    assert not kraft.is_control
    assert list(kraft.records) == values
    assert (kraft.base_offset, kraft.last_offset) == (7, 6 + len(values))


def _judged_one_at_a_time(batch: RecordBatch) -> list[bytes] | str:
    """KRaft's data-batch rules applied to fully decoded records: the values, or the error."""
    values = []
    try:
        for record in batch.iter_records():
            if record.timestamp_delta != 0:
                return f"Got timestamp delta of {record.timestamp_delta}, but this is invalid because it is not 0 as expected."
            if record.headers:
                return f"Got numHeaders of {len(record.headers)}, but this is invalid because it is not 0 as expected."
            if record.key is not None:
                return "Got key in the record when no key was expected"
            if record.value is None:
                return "Missing value in the record when a value was expected"
            if not record.value:
                return "Got an unexpected empty value in the record"
            values.append(record.value)
    except InvalidRecordError as exc:
        return str(exc)
    return values


_SIZES = st.sampled_from([1, 2, 62, 63, 64, 65, 120, 8180, 8191, 8192, 8200, 20000])


@settings(max_examples=examples(150), deadline=None)
@given(
    shapes=st.lists(
        st.tuples(_SIZES, st.sampled_from([None, b"", b"k"]), st.sampled_from([0, 0, 0, 1, 300]),
                  st.booleans(), st.sampled_from(["value", "value", "value", "null", "empty"])),
        min_size=1, max_size=80,
    ),
    base_offset=st.sampled_from([0, 5, 1 << 40]),
)
def test_data_values_inline_match_the_rules_judged_one_record_at_a_time(
    shapes: list[tuple[int, bytes | None, int, bool, str]], base_offset: int,
) -> None:
    records = [
        SimpleRecord(
            None if kind == "null" else (b"" if kind == "empty" else bytes([i % 251]) * size),
            key=key, timestamp=1000 + delta if i else 1000,
            headers=(Header("h", b"x"),) if header else (),
        )
        for i, (size, key, delta, header, kind) in enumerate(shapes)
    ]
    batch = RecordBatch(build_batch(records, base_offset=base_offset))
    expected = _judged_one_at_a_time(batch)
    try:
        got: list[bytes] | str = list(kraft_data_values(batch))
    except InvalidRecordError as exc:
        got = str(exc)
    assert got == expected


def test_data_values_inline_read_offset_deltas_of_three_bytes() -> None:
    values = [bytes([i % 200 + 1]) for i in range(9000)]  # deltas past 8191 take three bytes
    batch = RecordBatch(build_data_batch(values, base_offset=0, partition_leader_epoch=0, append_time_ms=1))
    assert list(kraft_data_values(batch)) == values == _judged_one_at_a_time(batch)


def test_data_values_inline_reject_a_malformed_record_as_the_general_reader_does() -> None:
    raw = build_data_batch([b"a" * 100, b"b" * 100], base_offset=0, partition_leader_epoch=0, append_time_ms=1)
    body = raw[61:]  # the records section of an uncompressed v2 batch
    for cut in (1, 50, len(body) - 1):
        batch = RecordBatch(assemble_batch(body[:-cut], record_count=2, base_offset=0, last_offset_delta=1,
                                           partition_leader_epoch=0, base_timestamp=1, max_timestamp=1))
        expected = _judged_one_at_a_time(batch)
        assert isinstance(expected, str)
        with pytest.raises(InvalidRecordError, match=re.escape(expected)):
            kraft_data_values(batch)
    for header_count in (b"\x01", b"\x02"):  # -1, and 1 with no header after it
        batch = RecordBatch(assemble_batch(body[:-1] + header_count, record_count=2, base_offset=0, last_offset_delta=1,
                                           partition_leader_epoch=0, base_timestamp=1, max_timestamp=1))
        expected = _judged_one_at_a_time(batch)
        assert isinstance(expected, str) and "header" in expected
        with pytest.raises(InvalidRecordError, match=re.escape(expected)):
            kraft_data_values(batch)


def test_kraft_rules_reject() -> None:
    def fails(raw: bytes) -> None:
        with pytest.raises(InvalidRecordError):
            read_kraft_batch(RecordBatch(raw))

    fails(build_kraft_batch([(b"k", b"v")], base_offset=0, partition_leader_epoch=0, append_time_ms=1, is_control=False))
    fails(build_kraft_batch([(None, b"")], base_offset=0, partition_leader_epoch=0, append_time_ms=1, is_control=False))
    fails(build_batch([SimpleRecord(b"v", timestamp=1), SimpleRecord(b"v", timestamp=2)]))
    fails(build_batch([SimpleRecord(b"v", timestamp=1, headers=(Header("h", b"x"),))]))
    fails(build_batch([SimpleRecord(None, timestamp=1)]))
    # control records: missing key, unknown or transactional types, garbage values
    fails(build_kraft_batch([(None, b"v")], base_offset=0, partition_leader_epoch=0, append_time_ms=1, is_control=True))
    fails(build_kraft_batch([(b"", b"v")], base_offset=0, partition_leader_epoch=0, append_time_ms=1, is_control=True))
    fails(build_kraft_batch(
        [(ControlRecordType.COMMIT.key_bytes(), EndTransactionMarker(ControlRecordType.COMMIT, 0).value_bytes())],
        base_offset=0, partition_leader_epoch=0, append_time_ms=1, is_control=True,
    ))
    fails(build_kraft_batch([(ControlRecordType.LEADER_CHANGE.key_bytes(), b"\xff")], base_offset=0,
                            partition_leader_epoch=0, append_time_ms=1, is_control=True))
    corrupt = bytearray(build_data_batch([b"x"], base_offset=0, partition_leader_epoch=0, append_time_ms=1))
    corrupt[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        read_kraft_batch(RecordBatch(corrupt))
    with pytest.raises(ValueError):
        build_data_batch([b""], base_offset=0, partition_leader_epoch=0, append_time_ms=1)
