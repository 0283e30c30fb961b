"""The KRaft control records the core writes and reads, on top of ``storage.control``.

Batch layout and record encoding are ``storage.control``'s (Kafka's ``ControlRecordType`` and
``ControlRecordUtils``): a control batch has attribute bit 5 set, every record a 4-byte key
``version int16 | type int16`` and the message at flexible version 0 as value. This module
adds what the core needs: building the start-of-epoch messages from a
:class:`~server.raft.types.VoterSet`, turning a VotersRecord back into one, and reading the voter
set and kraft.version from control batches and from the bootstrap checkpoint
(``00000000000000000000-0000000000.checkpoint``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from messages.generated.kraft_version_record import KRaftVersionRecord
from messages.generated.leader_change_message import LeaderChangeMessage
from messages.generated.leader_change_message import Voter as LeaderChangeVoter
from messages.generated.voters_record import Endpoint as VotersEndpoint
from messages.generated.voters_record import KRaftVersionFeature, VotersRecord
from messages.generated.voters_record import Voter as VotersVoter
from server.raft.types import Endpoint, ReplicaKey, VoterNode, VoterSet
from storage import control as storage_control
from storage.control import ControlMessage, ControlRecordType
from storage.records import RecordBatch, iter_batches
from storage.snapshot_format import read_snapshot_content

__all__ = [
    "ControlMessage",
    "ControlRecordType",
    "LogControlRecord",
    "bootstrap_voters",
    "build_control_batch",
    "build_data_batch",
    "control_records_of",
    "kraft_version_record",
    "leader_change_message",
    "voter_set_from_record",
    "voters_record",
]


def build_control_batch(
    messages: Sequence[ControlMessage], *, base_offset: int, epoch: int, timestamp_ms: int
) -> bytes:
    """One KRaft control batch holding ``messages`` in order."""
    return storage_control.build_control_batch(
        messages, base_offset=base_offset, partition_leader_epoch=epoch, append_time_ms=timestamp_ms
    )


def build_data_batch(
    values: Sequence[bytes], *, base_offset: int, epoch: int, timestamp_ms: int
) -> bytes:
    """One uncompressed KRaft data batch of ``values`` (null keys, non-empty values)."""
    return storage_control.build_data_batch(
        values, base_offset=base_offset, partition_leader_epoch=epoch, append_time_ms=timestamp_ms
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


def kraft_version_record(kraft_version: int) -> KRaftVersionRecord:
    """The KRaftVersion control record (version 0) finalizing ``kraft_version`` (KIP-853)."""
    return KRaftVersionRecord(version_=0, kraft_version=kraft_version)


def voters_record(voters: VoterSet) -> VotersRecord:
    """The Voters control record (version 0) of ``voters``: ids, directory ids (zero when
    unknown), endpoints and supported kraft.version ranges (KIP-853,
    ``VoterSet.toVotersRecord``)."""
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
    """The voter set a Voters control record describes (``VoterSet.fromVotersRecord``); the
    zero directory id means none. Raises ValueError for repeated voter ids."""
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
class LogControlRecord:
    """A KRaft control record where the log holds it: its absolute offset, the leader epoch of
    its batch and its decoded value (``storage.control.ControlRecord`` is the record alone)."""

    offset: int
    epoch: int
    message: ControlMessage


def control_records_of(batch: RecordBatch) -> Iterator[LogControlRecord]:
    """The control records of ``batch`` (nothing for a data batch). Raises InvalidRecordError
    for a control batch that breaks KRaft's record rules."""
    if not batch.is_control:
        return
    kraft = storage_control.read_kraft_batch(batch, validate_crc=False)
    for index, record in enumerate(kraft.records):
        assert isinstance(record, storage_control.ControlRecord)
        epoch = batch.partition_leader_epoch
        yield LogControlRecord(batch.base_offset + index, epoch, record.message)


def iter_control_records(batches: bytes | memoryview) -> Iterator[LogControlRecord]:
    """The control records of every batch in ``batches`` (concatenated record batches, as
    read from a segment or a Fetch response), in offset order. Raises as
    :func:`control_records_of`."""
    for batch in iter_batches(batches):
        yield from control_records_of(batch)


def bootstrap_voters(checkpoint: bytes) -> tuple[int, VoterSet | None]:
    """``(kraft.version, voter set or None)`` from the bytes of the bootstrap checkpoint
    ``00000000000000000000-0000000000.checkpoint`` that ``kafka-storage format --standalone`` /
    ``--initial-controllers`` writes (Kafka's ``Formatter``, KIP-853: a header, KRaftVersion 1 and
    a VotersRecord of the initial voters). Raises CorruptRecordError / InvalidRecordError for
    bytes that are not a valid snapshot."""
    content = read_snapshot_content(checkpoint)
    voters = content.voters
    return content.kraft_version, (voter_set_from_record(voters) if voters is not None else None)
