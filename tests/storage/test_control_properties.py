"""Property tests of KRaft control records and batches (``ControlRecordType``,
``ControlRecordUtils``, ``RecordsIterator.readBatch``).

* A control record key is int16 version 0 + int16 type; any type id parses back to its member,
  or UNKNOWN for ids kwire does not know; a negative version or a short key is refused.
* A control batch of any LeaderChange / SnapshotHeader / SnapshotFooter / KRaftVersion messages
  reads back as the same messages in order, at consecutive offsets, with the batch's epoch and
  append time; a flipped bit under the CRC is refused before any record is decoded.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from messages.generated.kraft_version_record import KRaftVersionRecord
from messages.generated.leader_change_message import LeaderChangeMessage, Voter
from messages.generated.snapshot_footer_record import SnapshotFooterRecord
from messages.generated.snapshot_header_record import SnapshotHeaderRecord
from storage.control import (
    ControlRecordType,
    build_control_batch,
    control_type_of,
    parse_control_key,
    read_kraft_batch,
)
from storage.errors import CorruptRecordError, InvalidRecordError
from storage.records import RecordBatch
from tests.properties import examples

int32 = st.integers(-(2**31), 2**31 - 1)
# control values are written at schema version 0, which has no VoterDirectoryId
voters = st.lists(st.builds(Voter, voter_id=st.integers(0, 2**31 - 1)), max_size=4)
control_messages = st.one_of(
    st.builds(LeaderChangeMessage, version_=st.just(0), leader_id=int32, voters=voters,
              granting_voters=voters),
    st.builds(SnapshotHeaderRecord, version_=st.just(0),
              last_contained_log_timestamp=st.integers(0, 2**62)),
    st.builds(SnapshotFooterRecord, version_=st.just(0)),
    st.builds(KRaftVersionRecord, version_=st.just(0), kraft_version=st.integers(0, 1)),
)


@settings(deadline=None)
@given(type_id=st.integers(-(2**15), 2**15 - 1), version=st.integers(0, 2**15 - 1),
       tail=st.binary(max_size=4))
def test_control_key_parses_any_type_id(type_id: int, version: int, tail: bytes) -> None:
    key = struct.pack(">hh", version, type_id) + tail  # later key versions may append fields
    known = {t.value for t in ControlRecordType} - {-1}
    expected = ControlRecordType(type_id) if type_id in known else ControlRecordType.UNKNOWN
    assert parse_control_key(key) is expected
    if expected is not ControlRecordType.UNKNOWN:
        assert expected.key_bytes() == struct.pack(">hh", 0, type_id)


@settings(deadline=None)
@given(version=st.integers(-(2**15), -1), type_id=st.integers(0, 6), cut=st.integers(0, 3))
def test_control_key_with_a_negative_version_or_too_short_is_refused(
    version: int, type_id: int, cut: int
) -> None:
    with pytest.raises(InvalidRecordError):
        parse_control_key(struct.pack(">hh", version, type_id))
    with pytest.raises(InvalidRecordError):
        parse_control_key(struct.pack(">hh", 0, type_id)[:cut])


@settings(deadline=None, max_examples=examples(80))
@given(messages=st.lists(control_messages, min_size=1, max_size=5),
       base_offset=st.integers(0, 2**40), epoch=st.integers(0, 2**31 - 1),
       append_time=st.integers(0, 2**41))
def test_control_batch_round_trip(
    messages: list[object], base_offset: int, epoch: int, append_time: int
) -> None:
    raw = build_control_batch(messages, base_offset=base_offset,  # type: ignore[arg-type]
                              partition_leader_epoch=epoch, append_time_ms=append_time)
    batch = read_kraft_batch(RecordBatch(raw))
    assert batch.is_control
    assert (batch.base_offset, batch.last_offset) == (base_offset, base_offset + len(messages) - 1)
    assert (batch.epoch, batch.append_timestamp, batch.size_in_bytes) == (epoch, append_time, len(raw))
    assert [r.type for r in batch.records] == [control_type_of(m) for m in messages]  # type: ignore[union-attr, arg-type]
    assert [r.message for r in batch.records] == messages  # type: ignore[union-attr]
    # every record's key is the 4-byte control key of its type
    keys = [bytes(r.key or b"") for r in RecordBatch(raw).records()]
    assert keys == [control_type_of(m).key_bytes() for m in messages]  # type: ignore[arg-type]


@settings(deadline=None, max_examples=examples(60))
@given(messages=st.lists(control_messages, min_size=1, max_size=3), data=st.data())
def test_control_batch_with_a_flipped_bit_is_refused(messages: list[object], data: st.DataObject) -> None:
    raw = bytearray(build_control_batch(messages, base_offset=0, partition_leader_epoch=1,  # type: ignore[arg-type]
                                        append_time_ms=5))
    bit = data.draw(st.integers(17 * 8, len(raw) * 8 - 1))  # the CRC and what it covers
    raw[bit // 8] ^= 0x80 >> (bit % 8)
    with pytest.raises(CorruptRecordError):
        read_kraft_batch(RecordBatch(raw))
