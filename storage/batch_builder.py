"""Building v2 record batches: records encoded, compressed, framed by the 61-byte header and
its CRC; and the two header fields the leader rewrites in place.

Mirrors ``org.apache.kafka.common.record.MemoryRecordsBuilder`` and
``DefaultRecordBatch.writeHeader`` / ``setLastOffset`` / ``setPartitionLeaderEpoch``. The layout
is in :mod:`storage.batch_layout`, one record's encoding in :mod:`storage.record_codec`. A data
batch's records are written by the compiled loop where :data:`storage.record_loops.COMPILED`.
"""

from __future__ import annotations

from collections.abc import Sequence

import crc32c

from storage import record_loops
from storage.batch_layout import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER,
    CONTROL_FLAG_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_FLAG_MASK,
    INT32,
    INT64,
    LOG_OVERHEAD,
    MAGIC_VALUE_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    PARTITION_LEADER_EPOCH_OFFSET,
    RECORD_BATCH_OVERHEAD,
    RECORDS_OFFSET,
    TRANSACTIONAL_FLAG_MASK,
    UINT32,
    Buffer,
    TimestampType,
)
from storage.compression import CompressionType, compress
from storage.record_codec import SimpleRecord, encode_record


def build_batch(
    records: Sequence[SimpleRecord],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    compression: CompressionType = CompressionType.NONE,
    compression_level: int | None = None,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    log_append_time: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """Build one v2 batch holding ``records`` at offsets ``base_offset, base_offset + 1, ...``
    (``MemoryRecordsBuilder``).

    BaseTimestamp is the first record's timestamp (or ``delete_horizon_ms``, which also sets
    attribute bit 6); MaxTimestamp is the largest record timestamp, or ``log_append_time`` for
    LOG_APPEND_TIME batches. Raises ValueError for an empty batch, a negative timestamp other
    than -1, or LOG_APPEND_TIME without ``log_append_time``.
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    if timestamp_type == TimestampType.LOG_APPEND_TIME and log_append_time is None:
        raise ValueError("LOG_APPEND_TIME batches need log_append_time")
    for record in records:
        if record.timestamp < 0 and record.timestamp != NO_TIMESTAMP:
            raise ValueError(f"Invalid negative timestamp {record.timestamp}")
    base_timestamp = records[0].timestamp if delete_horizon_ms is None else delete_horizon_ms
    max_timestamp = NO_TIMESTAMP
    body = bytearray()
    for delta, record in enumerate(records):
        if record.timestamp > max_timestamp:
            max_timestamp = record.timestamp
        encode_record(
            body, delta, record.timestamp - base_timestamp, record.key, record.value, record.headers
        )
    if timestamp_type == TimestampType.LOG_APPEND_TIME:
        assert log_append_time is not None
        max_timestamp = log_append_time
    return assemble_batch(
        body,
        record_count=len(records),
        base_offset=base_offset,
        last_offset_delta=len(records) - 1,
        partition_leader_epoch=partition_leader_epoch,
        compression=compression,
        compression_level=compression_level,
        timestamp_type=timestamp_type,
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=is_transactional,
        is_control=is_control,
        has_delete_horizon=delete_horizon_ms is not None,
    )


def encode_keyless_records(values: Sequence[bytes]) -> bytes:
    """The records of a KRaft data batch: one keyless record per value at offset deltas 0, 1,
    ..., timestamp delta 0, no headers; the bytes :func:`encode_record` writes for each, in
    order. Compiled where :data:`storage.record_loops.COMPILED`."""
    try:
        encoded = record_loops.keyless_records(values)
    except TypeError:
        encoded = None  # a value that is not bytes (a bytearray, a memoryview): the Python loop takes it
    if encoded is not None:
        return encoded
    body = bytearray()
    for delta, value in enumerate(values):
        encode_record(body, delta, 0, None, value)
    return bytes(body)


def assemble_batch(
    records_body: Buffer,
    *,
    record_count: int,
    base_offset: int,
    last_offset_delta: int,
    partition_leader_epoch: int,
    base_timestamp: int,
    max_timestamp: int,
    compression: CompressionType = CompressionType.NONE,
    compression_level: int | None = None,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    has_delete_horizon: bool = False,
) -> bytes:
    """Compress already-encoded records, write the 61-byte header and its CRC
    (``DefaultRecordBatch.writeHeader``); returns the whole batch as bytes.

    ``records_body`` is ``record_count`` records as :func:`encode_record` writes them; the
    header fields are taken as given, unchecked. Raises ValueError as
    :func:`storage.compression.compress` does."""
    payload = compress(compression, records_body, compression_level)
    attributes = int(compression) | (int(timestamp_type) << 3)
    if is_transactional:
        attributes |= TRANSACTIONAL_FLAG_MASK
    if is_control:
        attributes |= CONTROL_FLAG_MASK
    if has_delete_horizon:
        attributes |= DELETE_HORIZON_FLAG_MASK
    out = bytearray(RECORD_BATCH_OVERHEAD + len(payload))
    BATCH_HEADER.pack_into(
        out,
        0,
        base_offset,
        len(out) - LOG_OVERHEAD,
        partition_leader_epoch,
        MAGIC_VALUE_V2,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        record_count,
    )
    out[RECORDS_OFFSET:] = payload
    UINT32.pack_into(out, CRC_OFFSET, crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def set_base_offset(batch: bytearray | memoryview, base_offset: int) -> None:
    """Overwrite BaseOffset in place (outside the CRC, as ``DefaultRecordBatch.setLastOffset``
    does for the leader's offset assignment)."""
    INT64.pack_into(batch, 0, base_offset)


def set_partition_leader_epoch(batch: bytearray | memoryview, epoch: int) -> None:
    """Overwrite PartitionLeaderEpoch in place (outside the CRC,
    ``DefaultRecordBatch.setPartitionLeaderEpoch``)."""
    INT32.pack_into(batch, PARTITION_LEADER_EPOCH_OFFSET, epoch)
