"""Every partition's history as a metadata log tells it: the states its PartitionRecord and
PartitionChangeRecords left, with their metadata offsets, for the replica audit.

The log is read from the oldest point it still explains: from offset 0 when its first segment
starts there, else from the oldest snapshot that reaches the first segment (its records give
each partition's state at the snapshot, with metadata offset -1), then the segments' records
past it. States follow ``PartitionRegistration.merge`` (:mod:`server.controller.image`, the
controller's own replay): a PartitionChangeRecord whose leader is not -2 starts a new leader
epoch. Read-only, through the same file walk as the metadata-log audit (:mod:`tools.audit.scan`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from tools.audit.replica_checks import PartitionHistory, PartitionState

TOPIC_RECORD, PARTITION_RECORD, PARTITION_CHANGE_RECORD, REMOVE_TOPIC_RECORD = 2, 3, 5, 9
"""The metadata record api keys the history replays (``MetadataRecordType``)."""


@dataclass
class MetadataHistory:
    """The topics and partition histories of one metadata log (``source``, read up to
    ``end_offset``): ``topic_ids`` maps each live topic's name to its id (base64), ``names`` every
    topic id ever seen to its name, ``removed`` the ids of deleted topics."""

    source: str
    end_offset: int = 0
    topic_ids: dict[str, str] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    removed: set[str] = field(default_factory=set)
    partitions: dict[tuple[str, int], PartitionHistory] = field(default_factory=dict)

    def lookup(self, topic: str, partition: int, topic_id: str | None) -> PartitionHistory | None:
        """The history of a partition directory's partition: by the topic id its
        ``partition.metadata`` names, else by the live topic of that name; None when the
        metadata has neither."""
        tid = topic_id if topic_id is not None and topic_id in self.names else self.topic_ids.get(topic)
        return None if tid is None else self.partitions.get((tid, partition))


def _batches(path: str) -> Iterator:  # noqa: ANN401 - storage.records.RecordBatch, imported lazily
    from storage.batch_scan import iter_batches

    with open(path, "rb") as f:
        data = f.read()
    try:
        yield from iter_batches(data)
    except Exception:  # noqa: BLE001 - a corrupt tail ends the history there (the metadata audit reports it)
        return


def read_history(metadata_dir: str) -> MetadataHistory:
    """The history of the metadata log in ``metadata_dir`` (a ``__cluster_metadata-0``)."""
    from messages.generated.partition_change_record import PartitionChangeRecord
    from messages.generated.partition_record import PartitionRecord
    from messages.generated.remove_topic_record import RemoveTopicRecord
    from messages.generated.topic_record import TopicRecord
    from messages.metadata import decode_record
    from server.controller.image import PartitionRegistration
    from tools.audit.scan import SEGMENT_RE, SNAPSHOT_RE

    names = sorted(os.listdir(metadata_dir))
    segments = [os.path.join(metadata_dir, n) for n in names if SEGMENT_RE.match(n)]
    snapshots = sorted((int(m.group(1)), os.path.join(metadata_dir, n))
                       for n in names if (m := SNAPSHOT_RE.match(n)))
    log_start = int(os.path.basename(segments[0])[:20]) if segments else None
    history = MetadataHistory(metadata_dir)
    current: dict[tuple[str, int], PartitionRegistration] = {}

    def replay(value: bytes, offset: int) -> None:
        if len(value) < 2 or value[1] not in (TOPIC_RECORD, PARTITION_RECORD, PARTITION_CHANGE_RECORD, REMOVE_TOPIC_RECORD):
            return
        record, _version = decode_record(value)
        if isinstance(record, TopicRecord):
            tid = str(record.topic_id)
            history.topic_ids[record.name] = tid
            history.names[tid] = record.name
            history.removed.discard(tid)
        elif isinstance(record, RemoveTopicRecord):
            tid = str(record.topic_id)
            history.removed.add(tid)
            name = history.names.get(tid)
            if name is not None and history.topic_ids.get(name) == tid:
                del history.topic_ids[name]
        elif isinstance(record, PartitionRecord | PartitionChangeRecord):
            tp = (str(record.topic_id), record.partition_id)
            if isinstance(record, PartitionRecord):
                registration = PartitionRegistration.from_record(record)
                kind = "PartitionRecord"
            else:
                before = current.get(tp)
                if before is None:
                    return  # a change of a partition the readable log does not create
                registration = before.merge(record)
                kind = "PartitionChangeRecord"
            current[tp] = registration
            entry = history.partitions.get(tp)
            if entry is None:
                entry = history.partitions[tp] = PartitionHistory(tp[0], [], complete=offset >= 0)
            entry.states.append(PartitionState(
                offset, kind, registration.leader, registration.leader_epoch, tuple(registration.isr),
                tuple(registration.replicas), tuple(registration.adding_replicas),
                registration.leader_recovery_state))

    start = 0
    if log_start is None or log_start > 0:
        reach = [(end, path) for end, path in snapshots if log_start is None or end >= log_start]
        if reach:
            start, path = reach[0] if log_start is not None else reach[-1]
            for batch in _batches(path):
                if not batch.is_control:
                    for value in batch.iter_values():
                        if value is not None:
                            replay(bytes(value), -1)
    history.end_offset = start
    for path in segments:
        for batch in _batches(path):
            if batch.is_control or batch.last_offset < start:
                history.end_offset = max(history.end_offset, batch.last_offset + 1)
                continue
            for offset, value in enumerate(batch.iter_values(), batch.base_offset):
                if offset >= start and value is not None:
                    replay(bytes(value), offset)
            history.end_offset = batch.last_offset + 1
    return history


def newest_history(metadata_dirs: list[str]) -> MetadataHistory | None:
    """The history of whichever of ``metadata_dirs`` reaches furthest (None for none)."""
    best = None
    for metadata_dir in metadata_dirs:
        history = read_history(metadata_dir)
        if best is None or history.end_offset > best.end_offset:
            best = history
    return best
