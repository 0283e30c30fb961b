"""The leader's append accumulator: records appended by the local state machine linger for
``controller.quorum.append.linger.ms`` and leave as few, large batches.

Mirrors the behaviour of Kafka's ``org.apache.kafka.raft.internals.BatchAccumulator``:

* an append is all-or-nothing: its records go into one batch; if they do not fit in the open
  batch, that batch is completed and a new one started; an append bigger than a whole batch is
  refused (``RecordBatchTooLargeException``, Kafka error RECORD_LIST_TOO_LARGE);
* the offsets of an append are known at once (``prepareAppend`` returns them): the next offset
  is the log end offset plus the records still lingering;
* the linger timer starts with the first record of an empty accumulator; the accumulator must be
  drained when that timer expires or when a batch has been completed, and a drain takes every
  batch, the open one included.

The batch size limit is ``KafkaRaftClient.MAX_BATCH_SIZE_BYTES`` (8 MiB), counted with the
record batch v2 header and each record's worst-case framing, as Kafka's ``BatchBuilder`` sizes
records before compression.
"""

from __future__ import annotations

__all__ = ["MAX_BATCH_SIZE_BYTES", "BatchAccumulator", "record_size_upper_bound", "records_size_upper_bound"]

MAX_BATCH_SIZE_BYTES = 8 * 1024 * 1024
"""``KafkaRaftClient.MAX_BATCH_SIZE_BYTES`` (8 MiB), the default of Kafka 4.x's
``internal.metadata.max.batch.size.in.bytes``."""

BATCH_HEADER_BYTES = 61
"""``DefaultRecordBatch.RECORD_BATCH_OVERHEAD``."""


def record_size_upper_bound(value_size: int) -> int:
    """Bytes one record with a ``value_size``-byte value and no key or headers can take in a
    batch v2: length varint (<= 5), attributes (1), timestamp and offset deltas (<= 5 + 5), key
    length -1 (1), value length varint (<= 5), the value, header count 0 (1)."""
    return value_size + 23


def records_size_upper_bound(values: tuple[bytes, ...] | list[bytes]) -> int:
    """:func:`record_size_upper_bound` of each of ``values``, summed (without a call per value)."""
    return sum(map(len, values)) + len(values) * record_size_upper_bound(0)


class BatchAccumulator:
    """Records waiting to be appended by a leader of ``epoch``.

    ``append`` returns whether the records were accepted; ``needs_drain(now_ms)`` says whether
    ``drain()`` must run now; ``deadline_ms`` is when the linger timer fires (None when empty).
    """

    __slots__ = ("epoch", "linger_ms", "max_batch_bytes", "deadline_ms", "_batches", "_open_bytes",
                 "pending_records")

    def __init__(self, epoch: int, linger_ms: int, max_batch_bytes: int = MAX_BATCH_SIZE_BYTES) -> None:
        if linger_ms < 0:
            raise ValueError(f"append.linger.ms must be >= 0, not {linger_ms}")
        self.epoch = epoch
        self.linger_ms = linger_ms
        self.max_batch_bytes = max_batch_bytes
        self.deadline_ms: int | None = None
        self._batches: list[list[bytes]] = []
        self._open_bytes = 0
        self.pending_records = 0
        """Records accepted and not drained yet."""

    def __len__(self) -> int:
        return self.pending_records

    @staticmethod
    def _size(values: tuple[bytes, ...] | list[bytes]) -> int:
        return BATCH_HEADER_BYTES + records_size_upper_bound(values)

    def append(self, values: tuple[bytes, ...] | list[bytes], now_ms: int) -> bool:
        """Add ``values`` as one all-or-nothing group; False (nothing added) when they cannot fit
        in one batch."""
        size = self._size(values)
        if size > self.max_batch_bytes:
            return False
        added = size - BATCH_HEADER_BYTES
        if not self._batches or self._open_bytes + added > self.max_batch_bytes:
            self._batches.append([])
            self._open_bytes = BATCH_HEADER_BYTES
        self._batches[-1].extend(values)
        self._open_bytes += added
        self.pending_records += len(values)
        if self.deadline_ms is None:
            self.deadline_ms = now_ms + self.linger_ms
        return True

    def drain_at(self, now_ms: int) -> None:
        """End the linger now: the next drain check at ``now_ms`` takes every batch."""
        if self._batches:
            self.deadline_ms = min(self.deadline_ms if self.deadline_ms is not None else now_ms, now_ms)

    def needs_drain(self, now_ms: int) -> bool:
        """A completed batch is waiting, or the linger timer has expired."""
        if not self._batches:
            return False
        assert self.deadline_ms is not None
        return len(self._batches) > 1 or now_ms >= self.deadline_ms

    def drain(self) -> list[list[bytes]]:
        """Every batch, the open one included, in append order; the accumulator is empty after."""
        batches = self._batches
        self._batches = []
        self._open_bytes = 0
        self.pending_records = 0
        self.deadline_ms = None
        return batches
