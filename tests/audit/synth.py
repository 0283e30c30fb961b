"""Synthetic KRaft metadata-log directories for the audit tests.

Builds the history a 3-voter quorum would leave behind: per leader epoch one control batch at
the epoch's first offset (LeaderChange, plus KRaftVersion + Voters in the first epoch), then
data batches of metadata records; segments rolled every few batches with an offset index entry
per batch, a snapshot checkpoint, and the leader-epoch-checkpoint. Bytes come from storage's
batch builder, index and epoch-checkpoint codecs; values from the generated message codecs.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

from kwire.uuid import Uuid
from messages.generated.feature_level_record import FeatureLevelRecord
from messages.generated.kraft_version_record import KRaftVersionRecord
from messages.generated.leader_change_message import LeaderChangeMessage
from messages.generated.leader_change_message import Voter as LcVoter
from messages.generated.no_op_record import NoOpRecord
from messages.generated.snapshot_footer_record import SnapshotFooterRecord
from messages.generated.snapshot_header_record import SnapshotHeaderRecord
from messages.generated.topic_record import TopicRecord
from messages.generated.voters_record import Endpoint, KRaftVersionFeature, VotersRecord
from messages.generated.voters_record import Voter as VrVoter
from messages.metadata import encode_record
from storage.batch_builder import build_batch
from storage.index import OffsetIndex
from storage.leader_epoch import EpochEntry, encode_checkpoint
from storage.record_codec import SimpleRecord

PARTITION = "__cluster_metadata-0"
T0_MS = 1_700_000_000_000
VOTERS = (1, 2, 3)


def control_record(control_type: int, message, timestamp: int) -> SimpleRecord:  # noqa: ANN001
    return SimpleRecord(
        value=message.encode(0), key=struct.pack(">hh", 0, control_type), timestamp=timestamp
    )


def voters_record() -> VotersRecord:
    return VotersRecord(
        voters=[
            VrVoter(
                voter_id=v,
                voter_directory_id=Uuid(bytes(15) + bytes([100 + v])),
                endpoints=[Endpoint(name="CONTROLLER", host="localhost", port=9090 + v)],
                kraft_version_feature=KRaftVersionFeature(0, 1),
            )
            for v in VOTERS
        ]
    )


@dataclass
class Batch:
    offset: int
    epoch: int
    timestamp: int
    records: list[SimpleRecord]
    control: bool

    def encode(self) -> bytes:
        return build_batch(
            self.records,
            base_offset=self.offset,
            partition_leader_epoch=self.epoch,
            is_control=self.control,
        )


@dataclass
class History:
    batches: list[Batch] = field(default_factory=list)

    @property
    def end_offset(self) -> int:
        last = self.batches[-1]
        return last.offset + len(last.records)


def make_history(epochs: list[tuple[int, int, int]], *, tag: str = "") -> History:
    """``epochs`` = ``[(epoch, leader id, data batches), ...]``; each data batch holds three
    records. ``tag`` changes the topic names, so two histories can differ in bytes only."""
    history = History()
    offset = 0
    ts = T0_MS
    for epoch, leader, data_batches in epochs:
        records = [
            control_record(
                2,
                LeaderChangeMessage(
                    leader_id=leader,
                    voters=[LcVoter(voter_id=v) for v in VOTERS],
                    granting_voters=[LcVoter(voter_id=v) for v in sorted({leader, VOTERS[0]})],
                ),
                ts,
            )
        ]
        if not history.batches:
            records += [
                control_record(5, KRaftVersionRecord(kraft_version=1), ts),
                control_record(6, voters_record(), ts),
            ]
        history.batches.append(Batch(offset, epoch, ts, records, True))
        offset += len(records)
        for i in range(data_batches):
            ts += 250
            values = [
                encode_record(FeatureLevelRecord(name="metadata.version", feature_level=21), 0),
                encode_record(
                    TopicRecord(name=f"t{tag}-{epoch}-{i}", topic_id=Uuid(bytes(15) + b"\x77")), 0
                ),
                encode_record(NoOpRecord(), 0),
            ]
            history.batches.append(
                Batch(offset, epoch, ts, [SimpleRecord(v, timestamp=ts) for v in values], False)
            )
            offset += 3
        ts += 1000
    return history


def write_node(
    node_dir: Path,
    history: History,
    *,
    upto: int | None = None,
    batches_per_segment: int = 6,
    snapshot_at_batch: int | None = 4,
) -> Path:
    """Write the batches of ``history`` below offset ``upto`` (whole batches) into
    ``node_dir/__cluster_metadata-0``; returns the partition dir."""
    pdir = node_dir / PARTITION
    pdir.mkdir(parents=True, exist_ok=True)
    batches = [b for b in history.batches if upto is None or b.offset + len(b.records) <= upto]
    epochs: list[EpochEntry] = []
    for start in range(0, len(batches), batches_per_segment):
        group = batches[start : start + batches_per_segment]
        base = group[0].offset
        index = OffsetIndex(pdir / f"{base:020d}.index", base)
        index.open_empty(presize=False)
        position = 0
        with open(pdir / f"{base:020d}.log", "wb") as log:
            for batch in group:
                raw = batch.encode()
                log.write(raw)
                index.append(batch.offset + len(batch.records) - 1, position)
                position += len(raw)
                if not epochs or epochs[-1].epoch < batch.epoch:
                    epochs.append(EpochEntry(batch.epoch, batch.offset))
        index.close()
    (pdir / "leader-epoch-checkpoint").write_bytes(encode_checkpoint(epochs))
    if snapshot_at_batch is not None and snapshot_at_batch < len(batches):
        last = batches[snapshot_at_batch - 1]
        end = last.offset + len(last.records)
        parts = [
            build_batch(
                [control_record(3, SnapshotHeaderRecord(last_contained_log_timestamp=last.timestamp), last.timestamp),
                 control_record(5, KRaftVersionRecord(kraft_version=1), last.timestamp),
                 control_record(6, voters_record(), last.timestamp)],
                base_offset=0, partition_leader_epoch=last.epoch, is_control=True,
            ),
            build_batch(
                [SimpleRecord(encode_record(FeatureLevelRecord(name="metadata.version", feature_level=21), 0), timestamp=last.timestamp)],
                base_offset=3, partition_leader_epoch=last.epoch,
            ),
            build_batch(
                [control_record(4, SnapshotFooterRecord(), last.timestamp)],
                base_offset=4, partition_leader_epoch=last.epoch, is_control=True,
            ),
        ]
        (pdir / f"{end:020d}-{last.epoch:010d}.checkpoint").write_bytes(b"".join(parts))
    return pdir


def make_cluster(root: Path, history: History, **kwargs) -> list[Path]:  # noqa: ANN003
    """Three identical replicas ``root/node1..3``; returns the node dirs."""
    dirs = []
    for n in (1, 2, 3):
        d = root / f"node{n}"
        write_node(d, history, **kwargs)
        dirs.append(d)
    return dirs


def segment_files(pdir: Path) -> list[Path]:
    return sorted(p for p in pdir.iterdir() if p.suffix == ".log")


def flip_byte(path: Path, position: int) -> None:
    with open(path, "r+b") as f:
        f.seek(position)
        b = f.read(1)
        f.seek(position)
        f.write(bytes([b[0] ^ 0xFF]))


def file_size(path: Path) -> int:
    return os.path.getsize(path)
