"""When and what a controller snapshots (KIP-630): Kafka's ``SnapshotGenerator``
(:class:`SnapshotGenerator`, its triggers :class:`SnapshotTriggers`), and the snapshot of an
image (:func:`image_snapshot`).

Every node (active or standby) writes a snapshot of its controller's image once the committed
batches it replayed since its last snapshot reach ``metadata.log.max.record.bytes.between
.snapshots`` bytes, or once ``metadata.log.max.snapshot.interval.ms`` passed since then (0 turns
the time trigger off); a loaded snapshot counts as a snapshot. The check runs when a batch is
replayed, so an idle log (no NoOps, ``metadata.max.idle.interval.ms=0``) is never snapshotted
by time alone, as in Kafka. One snapshot is written at a time. (Deleting old snapshots and the
log below them is the node's file work: ``server.node.log_cleaner``.)
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

from messages.metadata import encode_record
from server.controller.result import Record
from server.raft.control import voters_record
from server.raft.events import CommittedBatch
from server.raft.types import OffsetAndEpoch, VoterSet
from storage.records import RecordBatch
from storage.snapshot_format import SnapshotId, build_snapshot_batches

if TYPE_CHECKING:
    from server.controller.controller import ControlManagers
    from server.controller.operation_context import ControllerLog
    from server.raft.control_state import ControlRecordStateMachine
    from server.raft.log import RaftLog

__all__ = [
    "SNAPSHOT_STEP_RECORDS",
    "SnapshotGenerator",
    "SnapshotToWrite",
    "SnapshotTriggers",
    "image_snapshot",
    "image_snapshot_steps",
    "run_steps",
]


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


@dataclass(frozen=True, slots=True)
class SnapshotToWrite:
    """A snapshot of the image to write and freeze: its id, and ``steps``, which gives a
    generator that makes its ``.checkpoint`` bytes from the image as it stood when the snapshot
    was taken (:func:`image_snapshot_steps`). The generator reads nothing the controller changes
    afterwards, so the driver may run it a step at a time between its other work while the
    controller goes on (at a million partitions it takes over ten seconds). ``image_records`` is
    roughly how many records it holds (``ControlManagers.image_record_estimate``), for the
    driver to choose where to build it."""

    snapshot_id: OffsetAndEpoch
    steps: Callable[[], Generator[None, None, bytes]]
    image_records: int

    def build(self) -> bytes:
        """Every step at once: the snapshot's bytes."""
        return run_steps(self.steps())


class SnapshotGenerator:
    """When one node snapshots its image (Kafka's ``SnapshotGenerator``): the triggers
    (:class:`SnapshotTriggers`) count every replayed committed batch, and when one fires the
    image is snapshotted as it stands after the batch, unless the image is ahead of the batch
    (records applied ahead of their commit: the trigger stays armed for the next batch that
    leaves none), a snapshot is waiting to be written, a metadata transaction is open, there is
    no metadata.version, or the log already starts, or has a snapshot, at or after that offset.
    ``log`` takes the INFO line naming each snapshot and its reason."""

    def __init__(self, node_id: int, max_bytes: int, max_interval_ms: int, now_ms: int, log: ControllerLog) -> None:
        self.node_id = node_id
        self.triggers = SnapshotTriggers(max_bytes, max_interval_ms, now_ms)
        self.log = log

    def loaded(self, now_ms: int) -> None:
        """A snapshot was loaded at ``now_ms``: it counts as one taken."""
        self.triggers.reset(now_ms)

    def replayed(
        self,
        now_ms: int,
        batch: CommittedBatch,
        controller: ControlManagers,
        raft_log: RaftLog,
        control: ControlRecordStateMachine,
        *,
        hold: bool,
    ) -> SnapshotToWrite | None:
        """Count the committed ``batch`` just replayed into ``controller``; the snapshot to
        write now, or None. ``hold``: the image is ahead of the batch or a snapshot is waiting
        to be written. The snapshot's header holds the batch's timestamp and the kraft.version
        and voters of ``control`` as of its last offset (``KafkaRaftClient.createSnapshot``)."""
        reason = self.triggers.replayed(len(batch.data), now_ms)
        if (
            reason is None
            or hold
            or controller.metadata_version is None
            or controller.transaction_open
            or batch.last_offset + 1 <= raft_log.log_start_offset
        ):
            return None
        snapshot_id = OffsetAndEpoch(batch.last_offset + 1, batch.epoch)
        latest = raft_log.latest_snapshot_id()
        if latest is not None and latest.offset >= snapshot_id.offset:
            return None
        kraft_version, voters = control.at_offset(batch.last_offset)
        steps = partial(
            image_snapshot_steps,
            snapshot_id,
            controller.snapshot_view(),
            last_contained_log_timestamp=RecordBatch(batch.data).max_timestamp,
            append_time_ms=now_ms,
            kraft_version=kraft_version,
            voters=voters,
        )
        self.triggers.reset(now_ms)
        self.log.info("node %d: creating snapshot %020d-%010d because %s", self.node_id, snapshot_id.offset,
                      snapshot_id.epoch, reason)
        return SnapshotToWrite(snapshot_id, steps, controller.image_record_estimate())
