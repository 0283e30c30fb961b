"""When a node writes a metadata snapshot and cleans its log (KIP-630): Kafka's
``SnapshotGenerator`` triggers and ``KafkaRaftClient``'s cleaning timer, as plain state.

Every node (active or standby) writes a snapshot of its controller's image once the committed
batches it replayed since its last snapshot reach ``metadata.log.max.record.bytes.between
.snapshots`` bytes, or once ``metadata.log.max.snapshot.interval.ms`` passed since then (0 turns
the time trigger off); a loaded snapshot counts as a snapshot. The check runs when a batch is
replayed, so an idle log (no NoOps, ``metadata.max.idle.interval.ms=0``) is never snapshotted
by time alone, as in Kafka. One snapshot is written at a time. Every 60 s
(``kwire.metadata.log.clean.interval.ms``, for tests) the node deletes old snapshots and the
log below them as ``metadata.max.retention.bytes`` and ``metadata.max.retention.ms`` say
(``storage.log.MetadataLog.maybe_clean``).
"""

from __future__ import annotations

__all__ = ["SnapshotTriggers"]


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
