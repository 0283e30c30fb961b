"""Record batch v2 (magic 2) layout: header fields, their offsets, attribute bits and sentinels.

The constants of ``org.apache.kafka.common.record.DefaultRecordBatch`` and ``Records``, shared
by the batch view (:mod:`storage.records`), the builder (:mod:`storage.batch_builder`) and the
walkers over a buffer of batches (:mod:`storage.batch_scan`). All integers big-endian::

     0  BaseOffset            int64
     8  Length                int32   bytes after this field (batch size - 12)
    12  PartitionLeaderEpoch  int32   -- not covered by the CRC
    16  Magic                 int8    = 2
    17  CRC                   uint32  CRC-32C of bytes [21, end of batch)
    21  Attributes            int16   bits 0-2 compression, 3 timestamp type (1 = LogAppendTime),
                                      4 transactional, 5 control, 6 delete horizon set
    23  LastOffsetDelta       int32
    27  BaseTimestamp         int64   (the delete horizon when bit 6 is set)
    35  MaxTimestamp          int64
    43  ProducerId            int64
    51  ProducerEpoch         int16
    53  BaseSequence          int32
    57  RecordsCount          int32
    61  Records               (compressed as one stream when bits 0-2 != 0)

Each record (zig-zag varints, ``ByteUtils.writeVarint``/``writeVarlong``; decoded and encoded
by :mod:`storage.record_codec`)::

    Length varint (bytes after it) | Attributes int8 | TimestampDelta varlong | OffsetDelta varint
    | KeyLength varint (-1 = null) | Key | ValueLength varint (-1 = null) | Value
    | HeadersCount varint | { KeyLength varint | Key utf-8 | ValueLength varint | Value } ...
"""

from __future__ import annotations

import enum
import struct

Buffer = bytes | bytearray | memoryview
"""What the readers accept: batch bytes, owned or borrowed."""

# DefaultRecordBatch / Records constants
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
OFFSET_AND_LENGTH = struct.Struct(">qi")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT32 = struct.Struct(">I")
LOG_OVERHEAD = 12  # BaseOffset + Length
HEADER_SIZE_UP_TO_MAGIC = 17
PARTITION_LEADER_EPOCH_OFFSET = 12
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
LAST_OFFSET_DELTA_OFFSET = 23
RECORDS_OFFSET = 61
RECORD_BATCH_OVERHEAD = 61
RECORD_OVERHEAD_V0 = 14  # LegacyRecord.RECORD_OVERHEAD_V0: the smallest size any magic allows
MAGIC_VALUE_V2 = 2
assert BATCH_HEADER.size == RECORD_BATCH_OVERHEAD

COMPRESSION_CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_FLAG_MASK = 0x10
CONTROL_FLAG_MASK = 0x20
DELETE_HORIZON_FLAG_MASK = 0x40

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
INT32_MAX = 0x7FFFFFFF


class TimestampType(enum.IntEnum):
    """Attribute bit 3. ``label`` is what Kafka prints (``TimestampType.name``)."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    @property
    def label(self) -> str:
        """``CreateTime`` or ``LogAppendTime``, as DumpLogSegments prints it."""
        return "CreateTime" if self is TimestampType.CREATE_TIME else "LogAppendTime"


def increment_sequence(sequence: int, increment: int) -> int:
    """``DefaultRecordBatch.incrementSequence``: sequences wrap from INT32_MAX to 0."""
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment
