"""KRaft control and data batches as bytes (kraft-facts §3).

Control record layout (``ControlRecordType``, ``ControlRecordUtils``)::

    key   = version int16 (0) | type int16          (4 bytes, big-endian)
    value = the control message at flexible version 0 (its own Version int16 first)

A control batch has attribute bit 5 set, no compression, CREATE_TIME, producer id/epoch/
sequence -1 and PartitionLeaderEpoch = the leader epoch (``MemoryRecords
.createKraftControlRecordBuilder``); all its records share one timestamp. Batches are built with
``storage.records.build_batch``.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from messages.generated.kraft_version_record import KRaftVersionRecord
from messages.generated.leader_change_message import LeaderChangeMessage
from messages.generated.leader_change_message import Voter as LeaderChangeVoter
from messages.generated.voters_record import Endpoint as VotersEndpoint
from messages.generated.voters_record import KRaftVersionFeature, VotersRecord
from messages.generated.voters_record import Voter as VotersVoter
from server.raft.types import Endpoint, ReplicaKey, VoterNode, VoterSet
from storage.records import RecordBatch, SimpleRecord, build_batch, iter_batches

_KEY = struct.Struct(">hh")


class ControlRecordType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


def control_key(record_type: ControlRecordType) -> bytes:
    return _KEY.pack(0, int(record_type))


def control_type_of(key: bytes | None) -> int:
    """The type in a control record key, or -1 (UNKNOWN) when the key is malformed."""
    if key is None or len(key) < 4:
        return -1
    version, record_type = _KEY.unpack_from(key, 0)
    return -1 if version < 0 else int(record_type)


ControlMessage = LeaderChangeMessage | KRaftVersionRecord | VotersRecord

_TYPE_OF: dict[type, ControlRecordType] = {
    LeaderChangeMessage: ControlRecordType.LEADER_CHANGE,
    KRaftVersionRecord: ControlRecordType.KRAFT_VERSION,
    VotersRecord: ControlRecordType.KRAFT_VOTERS,
}


def build_control_batch(
    messages: Sequence[ControlMessage], *, base_offset: int, epoch: int, timestamp_ms: int
) -> bytes:
    """One control batch holding ``messages`` in order."""
    records = [
        SimpleRecord(
            value=message.encode(0),
            key=control_key(_TYPE_OF[type(message)]),
            timestamp=timestamp_ms,
        )
        for message in messages
    ]
    return build_batch(
        records, base_offset=base_offset, partition_leader_epoch=epoch, is_control=True
    )


def build_data_batch(
    values: Sequence[bytes], *, base_offset: int, epoch: int, timestamp_ms: int
) -> bytes:
    """One uncompressed data batch of ``values`` (KRaft data records have null keys)."""
    return build_batch(
        [SimpleRecord(value=value, timestamp=timestamp_ms) for value in values],
        base_offset=base_offset,
        partition_leader_epoch=epoch,
    )


def leader_change_message(
    leader_id: int, voters: Sequence[int], granting: Sequence[int]
) -> LeaderChangeMessage:
    """LeaderChange at version 0 (no directory ids), as Kafka writes it."""
    return LeaderChangeMessage(
        version_=0,
        leader_id=leader_id,
        voters=[LeaderChangeVoter(voter_id=v) for v in voters],
        granting_voters=[LeaderChangeVoter(voter_id=v) for v in granting],
    )


def voters_record(voters: VoterSet) -> VotersRecord:
    return VotersRecord(
        version_=0,
        voters=[
            VotersVoter(
                voter_id=node.key.id,
                voter_directory_id=node.key.directory_id_or_zero,
                endpoints=[VotersEndpoint(e.name, e.host, e.port) for e in node.endpoints],
                kraft_version_feature=KRaftVersionFeature(
                    min_supported_version=node.supported_kraft_versions[0],
                    max_supported_version=node.supported_kraft_versions[1],
                ),
            )
            for node in voters.voters
        ],
    )


def voter_set_from_record(record: VotersRecord) -> VoterSet:
    return VoterSet(
        tuple(
            VoterNode(
                ReplicaKey.of(v.voter_id, v.voter_directory_id),
                tuple(Endpoint(e.name, e.host, e.port) for e in v.endpoints),
                (
                    v.kraft_version_feature.min_supported_version,
                    v.kraft_version_feature.max_supported_version,
                ),
            )
            for v in record.voters
        )
    )


@dataclass(frozen=True, slots=True)
class ControlRecord:
    offset: int
    epoch: int
    message: ControlMessage


def iter_control_records(batches: bytes | memoryview) -> Iterator[ControlRecord]:
    """The LeaderChange, KRaftVersion and Voters records in ``batches`` (others skipped)."""
    for batch in iter_batches(batches):
        yield from control_records_of(batch)


def control_records_of(batch: RecordBatch) -> Iterator[ControlRecord]:
    if not batch.is_control:
        return
    for record in batch.iter_records():
        record_type = control_type_of(record.key)
        if record.value is None:
            continue
        message: ControlMessage
        if record_type == ControlRecordType.LEADER_CHANGE:
            message = LeaderChangeMessage.decode(record.value, 0)
        elif record_type == ControlRecordType.KRAFT_VERSION:
            message = KRaftVersionRecord.decode(record.value, 0)
        elif record_type == ControlRecordType.KRAFT_VOTERS:
            message = VotersRecord.decode(record.value, 0)
        else:
            continue
        yield ControlRecord(record.offset, batch.partition_leader_epoch, message)


def kraft_version_record(kraft_version: int) -> KRaftVersionRecord:
    return KRaftVersionRecord(version_=0, kraft_version=kraft_version)
