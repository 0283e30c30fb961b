"""Records by reference (kwire.wire: read_records, write_records, ScatterBuffer) and the interned
Uuids of the decoders (kwire.uuid)."""

from __future__ import annotations

import pytest

from kwire import uuid as kuuid
from kwire.uuid import METADATA_TOPIC_ID, Uuid
from kwire.wire import (
    RECORDS_BY_REFERENCE_MIN_BYTES,
    DecodeError,
    RecordsRegion,
    ScatterBuffer,
    read_records,
    write_records,
)
from messages.generated.describe_quorum_response import ReplicaState
from messages.generated.fetch_response import FetchableTopicResponse, FetchResponse, PartitionData
from messages.generated.fetch_snapshot_response import (
    FetchSnapshotResponse,
    PartitionSnapshot,
    TopicSnapshot,
)
from messages.protocol import decode_response, encode_response

BIG = bytes(range(256)) * (RECORDS_BY_REFERENCE_MIN_BYTES // 256 + 1)


def _fetch(records: bytes | RecordsRegion | None) -> FetchResponse:
    return FetchResponse(responses=[FetchableTopicResponse(
        topic_id=METADATA_TOPIC_ID, partitions=[PartitionData(high_watermark=7, records=records)])])


def _plain_encoding(message: FetchResponse | FetchSnapshotResponse, version: int) -> bytes:
    """What the writers put in an ordinary bytearray: every byte copied in place."""
    out = bytearray()
    message.write(out, version)
    return bytes(out)


@pytest.mark.parametrize("version", [4, 12, 17])
def test_decoded_records_are_a_read_only_view_of_immutable_input(version: int) -> None:
    data = _fetch(BIG).encode(version)
    records = FetchResponse.decode(data, version).responses[0].partitions[0].records
    assert isinstance(records, memoryview) and records.readonly
    assert records.obj is data
    assert records == BIG


def test_records_of_a_mutable_input_are_copied_so_later_changes_cannot_reach_them() -> None:
    data = bytearray(_fetch(BIG).encode(17))
    records = FetchResponse.decode(data, 17).responses[0].partitions[0].records
    assert isinstance(records, bytes)
    data[-200:-100] = b"\xee" * 100
    assert records == BIG


@pytest.mark.parametrize("version", [4, 17])
def test_null_and_empty_records(version: int) -> None:
    for value in (None, b""):
        decoded = FetchResponse.decode(_fetch(value).encode(version), version)
        assert decoded.responses[0].partitions[0].records == value


@pytest.mark.parametrize(
    ("data", "compact", "nullable", "why"),
    [
        (b"\x00", True, False, "null where non-nullable"),
        (b"\xff\xff\xff\xff", False, False, "null where non-nullable"),
        (b"\xff\xff\xff\xfe", False, True, "negative records length"),
        (b"\x05abc", True, True, "truncated"),
        (b"\x00\x00\x00\x04abc", False, True, "truncated"),
    ],
)
def test_malformed_records_are_decode_errors(
    data: bytes, compact: bool, nullable: bool, why: str
) -> None:
    with pytest.raises(DecodeError, match=why):
        read_records(data, 0, compact, nullable)


def test_a_scatter_buffer_holds_large_values_and_copies_small_ones() -> None:
    out = ScatterBuffer(b"head")
    write_records(out, b"small", True)
    write_records(out, BIG, True)
    out += b"tail"
    assert out.refs == [(len(b"head") + 6 + 3, BIG)]  # the big value's uvarint length is 3 bytes
    assert len(out) == 4 + 6 + 3 + 4
    assert out.nbytes == len(out) + len(BIG)
    plain = bytearray(b"head")
    write_records(plain, b"small", True)
    write_records(plain, BIG, True)
    plain += b"tail"
    assert bytes(out) == out.to_bytes() == b"".join(out.parts()) == plain
    assert [len(p) for p in out.parts()] == [13, len(BIG), 4]


def test_encode_copies_held_records_into_the_same_bytes_as_a_plain_buffer() -> None:
    for version in (4, 17):
        message = _fetch(BIG)
        assert message.encode(version) == _plain_encoding(message, version)
    snapshot = FetchSnapshotResponse(topics=[TopicSnapshot(name="__cluster_metadata", partitions=[
        PartitionSnapshot(size=len(BIG), unaligned_records=BIG)])])
    data = snapshot.encode(1)
    assert data == _plain_encoding(snapshot, 1)
    decoded = FetchSnapshotResponse.decode(data, 1)
    assert decoded == snapshot
    assert isinstance(decoded.topics[0].partitions[0].unaligned_records, memoryview)


def test_a_response_frame_counts_held_records_in_its_size_prefix() -> None:
    frame = encode_response(_fetch(BIG), 17, correlation_id=41)
    assert frame.refs, "the records should be held, not copied"
    wire = b"".join(frame.parts())
    assert int.from_bytes(wire[:4], "big") == len(wire) - 4 == frame.nbytes - 4
    header, body = decode_response(wire[4:], FetchResponse.API_KEY, 17)  # type: ignore[arg-type]
    assert header.correlation_id == 41
    assert body == _fetch(BIG)


class _Region:
    """A RecordsRegion that is not a buffer (as a file region is), counting its reads."""

    def __init__(self, data: bytes) -> None:
        self.data, self.reads = data, 0

    def __len__(self) -> int:
        return len(self.data)

    def __bytes__(self) -> bytes:
        self.reads += 1
        return self.data


def test_a_records_region_is_held_whatever_its_size_and_read_only_where_bytes_are_needed() -> None:
    for data in (b"tiny", BIG):
        region = _Region(data)
        assert isinstance(region, RecordsRegion)
        frame = encode_response(_fetch(region), 17, correlation_id=5)
        assert [value for _, value in frame.refs] == [region] and region.reads == 0
        parts = frame.parts()
        assert parts[1] is region and frame.nbytes == sum(len(p) for p in parts)
        assert frame.to_bytes() == encode_response(_fetch(data), 17, correlation_id=5).to_bytes()
        assert region.reads == 1
        plain = bytearray()
        _fetch(region).write(plain, 17)
        assert bytes(plain) == _plain_encoding(_fetch(data), 17) and region.reads == 2


def test_decoders_share_one_uuid_object_per_id() -> None:
    dir_id = Uuid.from_longs(12, 34)
    state = ReplicaState(replica_id=1, replica_directory_id=dir_id)
    data = state.encode(2)
    first = ReplicaState.decode(data, 2).replica_directory_id
    second = ReplicaState.decode(data, 2).replica_directory_id
    assert first == dir_id and type(first) is Uuid and str(first) == str(dir_id)
    assert first is second


def test_the_uuid_table_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kuuid, "INTERNED_UUIDS_MAX", 8)
    made = [kuuid.intern_uuid(i.to_bytes(16, "big")) for i in range(20)]
    assert len(kuuid._interned) <= 8
    assert [int.from_bytes(u, "big") for u in made] == list(range(20))
    assert all(type(u) is Uuid for u in made)
    assert kuuid.intern_uuid(bytes(made[-1])) is made[-1]


def _replicas(n: int) -> list[ReplicaState]:
    return [ReplicaState(replica_id=i, replica_directory_id=Uuid.from_longs(i, i + 1),
                         log_end_offset=100 + i, last_fetch_timestamp=-1,
                         last_caught_up_timestamp=7 * i) for i in range(n)]


@pytest.mark.parametrize("tagged_at", [None, 0, 2, 5])
def test_fixed_layout_arrays_decode_in_one_run_up_to_an_element_with_tags(
    tagged_at: int | None,
) -> None:
    from messages.generated.describe_quorum_response import (
        DescribeQuorumResponse,
        TopicData,
    )
    from messages.generated.describe_quorum_response import PartitionData as QuorumPartition

    voters = _replicas(6)
    if tagged_at is not None:
        voters[tagged_at].unknown_tagged_fields = ((5, b"\x01\x02\x03"),)
    message = DescribeQuorumResponse(topics=[TopicData(topic_name="__cluster_metadata", partitions=[
        QuorumPartition(current_voters=voters, observers=_replicas(3))])])
    data = message.encode(2)
    decoded = DescribeQuorumResponse.decode(data, 2)
    assert decoded == message
    assert decoded.encode(2) == data
    with pytest.raises(DecodeError):
        DescribeQuorumResponse.decode(data[:-30], 2)


def test_fixed_layout_arrays_of_a_non_flexible_version() -> None:
    from messages.generated.fetch_response import AbortedTransaction

    aborted = [AbortedTransaction(producer_id=i, first_offset=10 * i) for i in range(5)]
    message = _fetch(b"")
    message.responses[0].partitions[0].aborted_transactions = aborted
    for version in (4, 11, 12):
        decoded = FetchResponse.decode(message.encode(version), version)
        assert decoded.responses[0].partitions[0].aborted_transactions == aborted
