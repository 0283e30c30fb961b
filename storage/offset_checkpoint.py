"""A broker log directory's offset checkpoints (``OffsetCheckpointFile``): one offset per
topic-partition, in the checkpoint text format of :mod:`storage.checkpoint`, one
``<topic> <partition> <offset>`` line per entry (topic names hold no spaces)::

    0
    2
    orders 0 5120
    orders 1 4988

Kafka keeps four such files at the root of every directory in ``log.dirs``:

* ``replication-offset-checkpoint`` -- each partition's high watermark as this broker last
  knew it (``ReplicaManager``, every ``replica.high.watermark.checkpoint.interval.ms``, 5 s by
  default, and at a clean shutdown);
* ``recovery-point-offset-checkpoint`` -- the offset up to which the log was flushed, so
  recovery after a crash starts there (``LogManager``);
* ``log-start-offset-checkpoint`` -- the log start offset where it is above the first
  segment's base offset (``LogManager``, after DeleteRecords or retention);
* ``cleaner-offset-checkpoint`` -- how far the cleaner has compacted each compacted partition
  (``LogCleanerManager``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from storage.checkpoint import decode_checkpoint_lines, encode_checkpoint_lines, parse_int
from storage.fileio import io_errors

REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
RECOVERY_POINT_OFFSET_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
OFFSET_CHECKPOINT_FILES = (
    REPLICATION_OFFSET_CHECKPOINT,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    CLEANER_OFFSET_CHECKPOINT,
)

TopicPartition = tuple[str, int]


def encode_offset_checkpoint(offsets: Mapping[TopicPartition, int]) -> bytes:
    """The whole file for ``offsets`` (``(topic, partition) -> offset``), in their order."""
    return encode_checkpoint_lines([(topic, partition, offset) for (topic, partition), offset in offsets.items()])


def decode_offset_checkpoint(data: bytes, location: str) -> dict[TopicPartition, int]:
    """``(topic, partition) -> offset`` from a file's bytes; ``location`` names it in errors.
    Raises InconsistentStateError when malformed (:func:`storage.checkpoint.decode_checkpoint_lines`)."""
    return {
        (topic, parse_int(partition, location, line)): parse_int(offset, location, line)
        for line in decode_checkpoint_lines(data, location, 3)
        for topic, partition, offset in [line]
    }


def read_offset_checkpoint(path: str | os.PathLike[str]) -> dict[TopicPartition, int] | None:
    """The checkpoint at ``path``, None when there is no such file. Raises
    InconsistentStateError (malformed) or KafkaStorageError (unreadable)."""
    if not os.path.exists(path):
        return None
    with io_errors(f"Error reading {path}"), open(path, "rb") as f:
        data = f.read()
    return decode_offset_checkpoint(data, str(path))
