"""When and what a controller snapshots (KIP-630): Kafka's ``SnapshotGenerator`` triggers, as
plain state, and the snapshot of an image (:func:`image_snapshot`).

Every node (active or standby) writes a snapshot of its controller's image once the committed
batches it replayed since its last snapshot reach ``metadata.log.max.record.bytes.between
.snapshots`` bytes, or once ``metadata.log.max.snapshot.interval.ms`` passed since then (0 turns
the time trigger off); a loaded snapshot counts as a snapshot. The check runs when a batch is
replayed, so an idle log (no NoOps, ``metadata.max.idle.interval.ms=0``) is never snapshotted
by time alone, as in Kafka. One snapshot is written at a time. (Deleting old snapshots and the
log below them is the node's file work: ``server.node.log_cleaner``.)
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from typing import Any

from messages.metadata import encode_record
from server.controller.result import Record
from server.raft.control import voters_record
from server.raft.types import OffsetAndEpoch, VoterSet
from storage.snapshot_format import SnapshotId, build_snapshot_batches

__all__ = ["SNAPSHOT_STEP_RECORDS", "SnapshotTriggers", "image_snapshot", "image_snapshot_steps", "run_steps"]


class SnapshotTriggers:
    """The byte and time triggers of one node (``SnapshotGenerator.publishLogDelta``):
    ``max_bytes`` > 0, ``max_interval_ms`` >= 0 (0: no time trigger), times in ms."""

    def __init__(self, max_bytes: int, max_interval_ms: int, now_ms: int) -> None:
        self.max_bytes = max_bytes
        self.max_interval_ms = max_interval_ms
        self.bytes_since_last = 0
        """Bytes of the committed batches replayed since the last snapshot."""
        self.last_snapshot_ms = now_ms

    def replayed(self, batch_bytes: int, now_ms: int) -> str | None:
        """Count a replayed batch of ``batch_bytes``; the reason to write a snapshot now, or
        None when neither trigger is met."""
        self.bytes_since_last += batch_bytes
        if self.bytes_since_last >= self.max_bytes:
            return f"we have replayed at least {self.max_bytes} bytes"
        if self.max_interval_ms and now_ms - self.last_snapshot_ms >= self.max_interval_ms:
            return f"we have waited at least {self.max_interval_ms} ms"
        return None

    def reset(self, now_ms: int) -> None:
        """A snapshot was started or loaded at ``now_ms``: count from zero again."""
        self.bytes_since_last = 0
        self.last_snapshot_ms = now_ms


SNAPSHOT_STEP_RECORDS = 1000
"""Records :func:`image_snapshot_steps` encodes between two of its pauses."""


def image_snapshot_steps(
    snapshot_id: OffsetAndEpoch,
    records: Iterable[Record],
    *,
    last_contained_log_timestamp: int,
    append_time_ms: int,
    kraft_version: int,
    voters: VoterSet,
) -> Generator[None, None, bytes]:
    """The ``.checkpoint`` bytes of snapshot ``snapshot_id`` holding the image ``records``,
    behind a header with ``last_contained_log_timestamp`` and, at kraft.version 1 or later, the
    KRaftVersion and Voters control records of ``voters``, both as of the last contained
    offset, as ``KafkaRaftClient.createSnapshot`` writes them; made by a generator that pauses
    (yields None) after every :data:`SNAPSHOT_STEP_RECORDS` records it encodes and after every
    batch it makes, and returns the bytes (``StopIteration.value``). A driver that runs one
    step at a time between its other work builds a snapshot of a million partitions without
    holding its event loop for more than a few milliseconds at once."""
    values: list[bytes] = []
    for count, (record, version) in enumerate(records, 1):
        values.append(encode_record(record, version))
        if count % SNAPSHOT_STEP_RECORDS == 0:
            yield
    batches: list[bytes] = []
    for batch in build_snapshot_batches(
        SnapshotId(snapshot_id.offset, snapshot_id.epoch),
        last_contained_log_timestamp=last_contained_log_timestamp,
        records=values,
        append_time_ms=append_time_ms,
        kraft_version=kraft_version,
        voters=voters_record(voters) if kraft_version >= 1 else None,
    ):
        batches.append(batch)
        yield
    return b"".join(batches)


def run_steps(steps: Generator[None, None, bytes]) -> bytes:
    """Run every step of ``steps`` (:func:`image_snapshot_steps`) at once; its bytes."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def image_snapshot(snapshot_id: OffsetAndEpoch, records: Iterable[Record], **header: Any) -> bytes:
    """The bytes of snapshot ``snapshot_id`` (``.checkpoint`` content) holding the image
    ``records``: :func:`image_snapshot_steps` with the same ``header`` keywords
    (``last_contained_log_timestamp``, ``append_time_ms``, ``kraft_version``, ``voters``), every
    step at once."""
    return run_steps(image_snapshot_steps(snapshot_id, records, **header))
