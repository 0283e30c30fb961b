"""Synthetic broker log directories and a metadata log for the replica audit's tests.

A :class:`Cluster` holds, per broker, the batches each partition copy has (``Copy``: batches
of ``(epoch, records)`` at consecutive offsets, or explicit base offsets), its high watermark
and epoch checkpoint; and the metadata records that made the partition's leaders. ``write``
lays it out as Kafka does: ``meta.properties``, the four offset checkpoints, ``<topic>-<p>/``
with segments, ``leader-epoch-checkpoint`` and ``partition.metadata``, and a
``__cluster_metadata-0`` in the first broker's directory. Bytes come from storage's codecs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kwire.uuid import Uuid
from messages.generated.partition_change_record import PartitionChangeRecord
from messages.generated.partition_record import PartitionRecord
from messages.generated.remove_topic_record import RemoveTopicRecord
from messages.generated.topic_record import TopicRecord
from messages.metadata import encode_record
from storage.batch_builder import build_batch
from storage.index import OffsetIndex
from storage.leader_epoch import EpochEntry, encode_checkpoint
from storage.meta_properties import MetaProperties, write_meta_properties
from storage.offset_checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_OFFSET_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    encode_offset_checkpoint,
)
from storage.partition_metadata import encode_partition_metadata
from storage.record_codec import SimpleRecord
from storage.records import RecordBatch

CLUSTER_ID = "AAAAAAAAAAAAAAAAAAAAAA"
TOPIC_ID = Uuid(bytes(15) + b"\x42")
T0_MS = 1_700_000_000_000


@dataclass
class Copy:
    """One broker's copy of a partition: ``batches`` as ``(epoch, record count)`` laid at
    consecutive offsets from ``start``; ``high_watermark`` None writes no entry; ``epochs``
    None derives the checkpoint from the batches."""

    batches: list[tuple[int, int]]
    high_watermark: int | None = None
    start: int = 0
    epochs: list[EpochEntry] | None = None
    topic_id: Uuid = TOPIC_ID
    salt: bytes = b""
    """Added to every value: two copies with different salts differ in content, not shape."""
    batches_per_segment: int = 3

    def encoded(self) -> list[tuple[int, bytes]]:
        out, offset = [], self.start
        for epoch, count in self.batches:
            records = [SimpleRecord(b"%d" % (offset + i) + self.salt, key=b"k", timestamp=T0_MS + offset + i)
                       for i in range(count)]
            out.append((offset, build_batch(records, base_offset=offset, partition_leader_epoch=epoch)))
            offset += count
        return out

    def epoch_entries(self) -> list[EpochEntry]:
        if self.epochs is not None:
            return self.epochs
        entries: list[EpochEntry] = []
        offset = self.start
        for epoch, count in self.batches:
            if not entries or entries[-1].epoch != epoch:
                entries.append(EpochEntry(epoch, offset))
            offset += count
        return entries


@dataclass
class Cluster:
    topic: str = "orders"
    copies: dict[int, dict[int, Copy]] = field(default_factory=dict)
    """broker id -> partition -> copy"""
    metadata: list[object] = field(default_factory=list)
    """Metadata records, in order, one batch each."""

    def partition_record(self, partition: int, leader: int, isr: list[int], replicas: list[int] | None = None,
                         epoch: int = 0) -> None:
        self.metadata.append(PartitionRecord(
            partition_id=partition, topic_id=TOPIC_ID, replicas=replicas or sorted(isr), isr=isr, removing_replicas=[],
            adding_replicas=[], leader=leader, leader_recovery_state=0, leader_epoch=epoch, partition_epoch=0,
            directories=[]))

    def change(self, partition: int, *, leader: int = -2, isr: list[int] | None = None, recovering: bool = False,
               replicas: list[int] | None = None) -> None:
        self.metadata.append(PartitionChangeRecord(
            partition_id=partition, topic_id=TOPIC_ID, isr=isr, leader=leader, replicas=replicas,
            leader_recovery_state=1 if recovering else -1))

    def remove_topic(self) -> None:
        self.metadata.append(RemoveTopicRecord(topic_id=TOPIC_ID))

    def write(self, root: Path) -> list[Path]:
        """Every broker's log directory under ``root`` (``broker-<id>``); returns them."""
        dirs = []
        for n, (broker, parts) in enumerate(sorted(self.copies.items())):
            log_dir = root / f"broker-{broker}"
            log_dir.mkdir(parents=True)
            write_meta_properties(log_dir, MetaProperties(1, CLUSTER_ID, broker, Uuid(bytes(15) + bytes([broker % 256]))),
                                  fsync=False)
            marks, recovery, starts = {}, {}, {}
            for partition, copy in parts.items():
                pdir = log_dir / f"{self.topic}-{partition}"
                pdir.mkdir()
                (pdir / "partition.metadata").write_bytes(encode_partition_metadata(copy.topic_id))
                (pdir / "leader-epoch-checkpoint").write_bytes(encode_checkpoint(copy.epoch_entries()))
                batches = copy.encoded()
                for i in range(0, max(len(batches), 1), copy.batches_per_segment):
                    chunk = batches[i:i + copy.batches_per_segment]
                    base = chunk[0][0] if chunk else copy.start
                    (pdir / f"{base:020d}.log").write_bytes(b"".join(data for _, data in chunk))
                    index = OffsetIndex(pdir / f"{base:020d}.index", base)  # an entry per batch
                    index.open_empty(presize=False)
                    position = 0
                    for _, data in chunk:
                        index.append(RecordBatch(data).last_offset, position)
                        position += len(data)
                    index.close()
                end = copy.start + sum(c for _, c in copy.batches)
                if copy.high_watermark is not None:
                    marks[(self.topic, partition)] = copy.high_watermark
                recovery[(self.topic, partition)] = end
                if copy.start:
                    starts[(self.topic, partition)] = copy.start
            (log_dir / REPLICATION_OFFSET_CHECKPOINT).write_bytes(encode_offset_checkpoint(marks))
            (log_dir / RECOVERY_POINT_OFFSET_CHECKPOINT).write_bytes(encode_offset_checkpoint(recovery))
            (log_dir / LOG_START_OFFSET_CHECKPOINT).write_bytes(encode_offset_checkpoint(starts))
            if n == 0 and self.metadata:
                self._write_metadata(log_dir / "__cluster_metadata-0")
            dirs.append(log_dir)
        return dirs

    def _write_metadata(self, pdir: Path) -> None:
        pdir.mkdir()
        records = [TopicRecord(name=self.topic, topic_id=TOPIC_ID), *self.metadata]
        data = b"".join(
            build_batch([SimpleRecord(encode_record(r, type(r).HIGHEST_VERSION), timestamp=T0_MS)], base_offset=i, partition_leader_epoch=1)
            for i, r in enumerate(records))
        (pdir / f"{0:020d}.log").write_bytes(data)
