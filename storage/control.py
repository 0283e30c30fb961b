"""Control records, and the rules KRaft applies to every batch of its log.

Mirrors ``ControlRecordType`` / ``ControlRecordUtils`` (control records), ``EndTransactionMarker``
(ABORT/COMMIT values), ``MemoryRecords.createKraftControlRecordBuilder`` /
``raft.internals.BatchBuilder`` (building KRaft batches) and ``raft.internals.RecordsIterator``
(reading them).

A control record lives in a batch with attribute bit 5 set. Its key is always 4 bytes::

    +---------------+-------------+
    | version int16 | type int16  |    version 0; types below
    +---------------+-------------+

    0 ABORT  1 COMMIT  2 LEADER_CHANGE  3 SNAPSHOT_HEADER  4 SNAPSHOT_FOOTER
    5 KRAFT_VERSION  6 KRAFT_VOTERS                       (anything else: UNKNOWN, -1)

Its value is the message encoded at schema version 0 with the flexible encoding, no prefix --
``LeaderChangeMessage``, ``SnapshotHeaderRecord``, ``SnapshotFooterRecord``,
``KRaftVersionRecord``, ``VotersRecord``. ABORT/COMMIT values are an end-transaction marker::

    +---------------+-------------------------+
    | version int16 | coordinatorEpoch int32  |
    +---------------+-------------------------+

KRaft batches (``BatchBuilder`` / ``RecordsIterator``): magic 2, CreateTime, producer id, epoch
and base sequence -1, not transactional, PartitionLeaderEpoch = the leader's epoch, BaseTimestamp
= MaxTimestamp = the append time, every record with timestamp delta 0 and no headers. Data
records have no key and a non-empty value (a framed metadata record); control records have a
non-empty key and value, of a type 2-6.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kwire.wire import DecodeError
from messages.generated.kraft_version_record import KRaftVersionRecord
from messages.generated.leader_change_message import LeaderChangeMessage
from messages.generated.snapshot_footer_record import SnapshotFooterRecord
from messages.generated.snapshot_header_record import SnapshotHeaderRecord
from messages.generated.voters_record import VotersRecord
from storage.batch_builder import assemble_batch, encode_keyless_records
from storage.compression import CompressionType
from storage.errors import InvalidRecordError
from storage.record_codec import Record, encode_record, read_record
from storage.records import RecordBatch

CONTROL_KEY = struct.Struct(">hh")
END_TXN_MARKER = struct.Struct(">hi")
CURRENT_CONTROL_RECORD_KEY_VERSION = 0
CONTROL_RECORD_VALUE_VERSION = 0  # ControlRecordUtils.*_CURRENT_VERSION


class ControlRecordType(enum.IntEnum):
    """``ControlRecordType``; ``UNKNOWN`` stands for any type id kwire does not know."""

    UNKNOWN = -1
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6

    @classmethod
    def from_type_id(cls, type_id: int) -> ControlRecordType:
        """The member for an int16 type id, UNKNOWN for any other
        (``ControlRecordType.fromTypeId``); never raises."""
        try:
            return cls(type_id)
        except ValueError:
            return cls.UNKNOWN

    def key_bytes(self) -> bytes:
        """The 4-byte record key: int16 version 0 + int16 type (``ControlRecordType.recordKey``).
        Raises ValueError for UNKNOWN."""
        if self is ControlRecordType.UNKNOWN:
            raise ValueError("Cannot serialize UNKNOWN control record type")
        return CONTROL_KEY.pack(CURRENT_CONTROL_RECORD_KEY_VERSION, int(self))


def parse_control_key(key: bytes | memoryview | None) -> ControlRecordType:
    """The type in a control record key (``ControlRecordType.parse``). Raises
    InvalidRecordError for a key shorter than 4 bytes or a negative version."""
    if key is None or len(key) < CONTROL_KEY.size:
        raise InvalidRecordError(
            f"Invalid value size found for end control record key. Must have at least "
            f"{CONTROL_KEY.size} bytes, but found only {0 if key is None else len(key)}"
        )
    version, type_id = CONTROL_KEY.unpack_from(key, 0)
    if version < 0:
        raise InvalidRecordError(f"Invalid version found for control record: {version}. May indicate data corruption")
    return ControlRecordType.from_type_id(type_id)


@dataclass(frozen=True, slots=True)
class EndTransactionMarker:
    """The value of an ABORT or COMMIT control record
    (``org.apache.kafka.common.record.EndTransactionMarker``). KRaft never writes one; kwire
    decodes them so that dump-log can print them."""

    control_type: ControlRecordType
    coordinator_epoch: int

    def value_bytes(self) -> bytes:
        """The 6-byte value: int16 version 0 + int32 coordinator epoch (``serializeValue``)."""
        return END_TXN_MARKER.pack(0, self.coordinator_epoch)

    @classmethod
    def deserialize(cls, control_type: ControlRecordType, value: bytes) -> EndTransactionMarker:
        """The marker in a record value; ``control_type`` (ABORT or COMMIT, from the key) is
        stored, not checked. Bytes after the first 6 are ignored. Raises InvalidRecordError for
        a value shorter than 6 bytes or a negative version
        (``EndTransactionMarker.deserialize``)."""
        if len(value) < END_TXN_MARKER.size:
            raise InvalidRecordError(f"end transaction marker of {len(value)} bytes is too short")
        version, coordinator_epoch = END_TXN_MARKER.unpack_from(value, 0)
        if version < 0:
            raise InvalidRecordError(f"Invalid version found for end transaction marker: {version}")
        return cls(control_type, coordinator_epoch)


ControlMessage = (
    LeaderChangeMessage | SnapshotHeaderRecord | SnapshotFooterRecord | KRaftVersionRecord | VotersRecord
)

_MESSAGE_TYPES: dict[ControlRecordType, Any] = {
    ControlRecordType.LEADER_CHANGE: LeaderChangeMessage,
    ControlRecordType.SNAPSHOT_HEADER: SnapshotHeaderRecord,
    ControlRecordType.SNAPSHOT_FOOTER: SnapshotFooterRecord,
    ControlRecordType.KRAFT_VERSION: KRaftVersionRecord,
    ControlRecordType.KRAFT_VOTERS: VotersRecord,
}
_TYPES_BY_CLASS: dict[type, ControlRecordType] = {cls: t for t, cls in _MESSAGE_TYPES.items()}

KRAFT_CONTROL_TYPES = frozenset(_MESSAGE_TYPES)


def control_type_of(message: ControlMessage) -> ControlRecordType:
    """The control record type whose value ``message`` is (LeaderChangeMessage ->
    LEADER_CHANGE, ...). Raises TypeError for any other object."""
    try:
        return _TYPES_BY_CLASS[type(message)]
    except KeyError:
        raise TypeError(f"{type(message).__name__} is not a KRaft control record") from None


def encode_control_value(message: ControlMessage) -> bytes:
    """The record value: the message at schema version 0 (``MessageUtil.toByteBuffer(msg, 0)``)."""
    return message.encode(CONTROL_RECORD_VALUE_VERSION)


def decode_control_value(control_type: ControlRecordType, value: bytes) -> ControlMessage:
    """Decode a KRaft control record value (``ControlRecordUtils.deserialize*``). Raises
    InvalidRecordError for an unknown type or malformed bytes."""
    cls = _MESSAGE_TYPES.get(control_type)
    if cls is None:
        raise InvalidRecordError(f"Unknown control record type {control_type.name}")
    try:
        message: ControlMessage = cls.decode(value, CONTROL_RECORD_VALUE_VERSION)
    except DecodeError as exc:
        raise InvalidRecordError(f"invalid {control_type.name} control record: {exc}") from exc
    return message


# ---------------------------------------------------------------------------------------------
# building KRaft batches


def build_kraft_batch(
    records: Sequence[tuple[bytes | None, bytes]],
    *,
    base_offset: int,
    partition_leader_epoch: int,
    append_time_ms: int,
    is_control: bool,
    compression: CompressionType = CompressionType.NONE,
) -> bytes:
    """A batch as KRaft writes it: ``records`` are ``(key, value)`` pairs at consecutive
    offsets from ``base_offset``, every timestamp the append time (ms), no headers, no producer.

    Returns the whole batch (header, CRC and records) as bytes, ``partition_leader_epoch`` in its
    PartitionLeaderEpoch field. Mirrors ``raft.internals.BatchBuilder`` and
    ``MemoryRecords.createKraftControlRecordBuilder``. Raises ValueError when ``records`` is
    empty."""
    if not records:
        raise ValueError("a KRaft batch needs at least one record")
    body = bytearray()
    for delta, (key, value) in enumerate(records):
        encode_record(body, delta, 0, key, value)
    return assemble_batch(
        body,
        record_count=len(records),
        base_offset=base_offset,
        last_offset_delta=len(records) - 1,
        partition_leader_epoch=partition_leader_epoch,
        base_timestamp=append_time_ms,
        max_timestamp=append_time_ms,
        compression=compression,
        is_control=is_control,
    )


def build_data_batch(
    values: Sequence[bytes],
    *,
    base_offset: int,
    partition_leader_epoch: int,
    append_time_ms: int,
    compression: CompressionType = CompressionType.NONE,
) -> bytes:
    """A KRaft data batch of framed metadata records (``messages.metadata.encode_record``), one
    keyless record per value, as bytes. Raises ValueError for no values or an empty value
    (``RecordsIterator`` would reject the batch)."""
    if not values:
        raise ValueError("a KRaft batch needs at least one record")
    if not all(values):
        raise ValueError("KRaft data records need a non-empty value")
    return assemble_batch(
        encode_keyless_records(values),
        record_count=len(values),
        base_offset=base_offset,
        last_offset_delta=len(values) - 1,
        partition_leader_epoch=partition_leader_epoch,
        base_timestamp=append_time_ms,
        max_timestamp=append_time_ms,
        compression=compression,
    )


def build_control_batch(
    messages: Sequence[ControlMessage],
    *,
    base_offset: int,
    partition_leader_epoch: int,
    append_time_ms: int,
) -> bytes:
    """A KRaft control batch holding ``messages`` in order (e.g. LeaderChange, KRaftVersion,
    Voters at the start of an epoch; SnapshotHeader ... in a snapshot), uncompressed, as bytes;
    each value encoded at schema version 0. Raises TypeError for a message that is not a KRaft
    control record and ValueError for no messages."""
    return build_kraft_batch(
        [(control_type_of(m).key_bytes(), encode_control_value(m)) for m in messages],
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        append_time_ms=append_time_ms,
        is_control=True,
    )


# ---------------------------------------------------------------------------------------------
# reading KRaft batches


@dataclass(frozen=True, slots=True)
class ControlRecord:
    """One decoded record of a KRaft control batch: its type (from the key) and its value
    decoded at schema version 0 (``org.apache.kafka.raft.ControlRecord``)."""

    type: ControlRecordType
    message: ControlMessage


@dataclass(frozen=True, slots=True)
class KRaftBatch:
    """A validated KRaft batch (``org.apache.kafka.raft.Batch``): ``records`` are the data
    records' values (framed metadata records, undecoded) or, for a control batch,
    :class:`ControlRecord`s.

    ``base_offset`` and ``last_offset`` are inclusive offsets, ``epoch`` the batch's
    PartitionLeaderEpoch, ``append_timestamp`` its MaxTimestamp in ms, ``size_in_bytes`` the
    whole batch on disk.
    """

    base_offset: int
    last_offset: int
    epoch: int
    append_timestamp: int
    size_in_bytes: int
    is_control: bool
    records: tuple[bytes, ...] | tuple[ControlRecord, ...]


def kraft_data_values(batch: RecordBatch) -> tuple[bytes, ...]:
    """The values of a KRaft data batch's records, checked by KRaft's rules as
    :func:`read_kraft_batch` checks them, with the same errors. Every record of a loaded
    snapshot passes here, so the usual shape (a size of one or two bytes, timestamp delta 0, a
    null key, a value under 8 KiB, no headers) is read inline, without a
    :class:`~storage.record_codec.Record`; a record of any other shape is decoded in full and judged
    by the rules one at a time."""
    data = batch.records_section()
    if batch.records_count < 0:
        raise InvalidRecordError(f"Found invalid record count {batch.records_count} in magic v2 batch")
    # The varints are decoded inline, as RecordBatch.iter_values's Python loop decodes them: a helper
    # function shared by the two costs a call per varint, 5% of a 10^6-partition load.
    end_of_data = len(data)
    values: list[bytes] = []
    append = values.append
    pos = 0
    for _ in range(batch.records_count):
        start = pos
        try:
            b = data[pos]
            if b < 0x80:
                body_size, pos = (b >> 1) ^ -(b & 1), pos + 1
            elif data[pos + 1] < 0x80:
                raw = (b & 0x7F) | (data[pos + 1] << 7)
                body_size, pos = (raw >> 1) ^ -(raw & 1), pos + 2
            else:
                body_size = -1
            end = pos + body_size
            # attributes (any), timestamp delta 0, an offset delta of 1-4 bytes, key -1
            if 0 < body_size and end <= end_of_data and data[pos + 1] == 0:
                pos += 2
                skip = (1 if data[pos] < 0x80 else 2 if data[pos + 1] < 0x80 else 3 if data[pos + 2] < 0x80
                        else 4 if data[pos + 3] < 0x80 else 0)
                pos += skip
                if skip and data[pos] == 1:  # zig-zag -1: a null key
                    b = data[pos + 1]
                    if b < 0x80:
                        value_size, pos = (b >> 1) ^ -(b & 1), pos + 2
                    elif data[pos + 2] < 0x80:
                        raw = (b & 0x7F) | (data[pos + 2] << 7)
                        value_size, pos = (raw >> 1) ^ -(raw & 1), pos + 3
                    else:
                        value_size = 0
                    if value_size > 0 and pos + value_size + 1 == end and data[end - 1] == 0:  # no headers
                        append(data[pos : pos + value_size])
                        pos = end
                        continue
        except IndexError:
            pass  # the general reader names what is wrong
        record, pos = read_record(data, start, batch.base_offset, batch.base_timestamp, batch.base_sequence, None)
        append(_kraft_value(record, keyed=False))
    if pos != end_of_data:
        raise InvalidRecordError("Incorrect declared batch size, records still remaining in file")
    return tuple(values)


def _kraft_value(record: Record, *, keyed: bool) -> bytes:
    """A record's value by KRaft's rules (``RecordsIterator.readBatch``): timestamp delta 0, no
    headers, a non-empty key when ``keyed`` (control records) and none otherwise, a non-empty
    value. Raises InvalidRecordError naming the broken rule."""
    if record.timestamp_delta != 0:
        raise InvalidRecordError(
            f"Got timestamp delta of {record.timestamp_delta}, but this is "
            "invalid because it is not 0 as expected."
        )
    if record.headers:
        raise InvalidRecordError(
            f"Got numHeaders of {len(record.headers)}, but this is invalid because it is "
            "not 0 as expected."
        )
    if keyed:
        if record.key is None:
            raise InvalidRecordError("Missing key in the record when a key was expected")
        if not record.key:
            raise InvalidRecordError("Got an unexpected empty key in the record")
    elif record.key is not None:
        raise InvalidRecordError("Got key in the record when no key was expected")
    if record.value is None:
        raise InvalidRecordError("Missing value in the record when a value was expected")
    if not record.value:
        raise InvalidRecordError("Got an unexpected empty value in the record")
    return record.value


def read_kraft_batch(batch: RecordBatch, *, validate_crc: bool = True) -> KRaftBatch:
    """Validate ``batch`` by KRaft's rules and decode its records (``RecordsIterator.readBatch``).

    Raises CorruptRecordError (CRC) or InvalidRecordError (a timestamp delta, header, key or
    missing value where KRaft allows none, an unknown control type)."""
    if validate_crc:
        batch.ensure_valid()
    records: tuple[bytes, ...] | tuple[ControlRecord, ...]
    if batch.is_control:
        control: list[ControlRecord] = []
        for record in batch.iter_records():
            value = _kraft_value(record, keyed=True)
            assert record.key is not None
            control_type = parse_control_key(record.key)
            control.append(ControlRecord(control_type, decode_control_value(control_type, value)))
        records = tuple(control)
    else:
        records = kraft_data_values(batch)
    return KRaftBatch(
        base_offset=batch.base_offset,
        last_offset=batch.last_offset,
        epoch=batch.partition_leader_epoch,
        append_timestamp=batch.max_timestamp,
        size_in_bytes=batch.size_in_bytes,
        is_control=batch.is_control,
        records=records,
    )
