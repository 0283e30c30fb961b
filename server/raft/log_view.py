"""The replica's log as this step leaves it: staged log changes, the high watermark and the
committed-batch cursor.

The core never writes the log itself. Appends, a truncation and a snapshot install are staged
into the step's Outbox, and the driver applies them before the next step; until then this view
answers "what will the log end offset and last fetched epoch be" from what was staged. The
high watermark lives here (it only grows; a move back raises :class:`RaftSafetyError`), and so
does the offset up to which committed batches were handed to the state machine, each once and
in offset order. Offsets are log offsets; sizes are bytes.
"""

from __future__ import annotations

from server.raft.control import build_data_batch
from server.raft.control_state import ControlRecordStateMachine
from server.raft.events import CommittedBatch, Outbox
from server.raft.log import RaftLog, read_batches
from server.raft.quorum_state import QuorumState, RaftSafetyError
from server.raft.roles import Leader
from server.raft.types import OffsetAndEpoch
from storage.batch_scan import iter_batches

MAX_DELIVERED_RECORDS_PER_STEP = 20_000
"""About how many committed records one step hands the state machine (one batch at least).
Kafka's listener replays on a thread of its own; here it replays on the event loop, and a
follower that fetched 8 MiB of partition changes (160,000 records, two seconds of replay) in
one step would miss its own fetch timeout. Counted in records, not bytes: replay costs per
record (20,000 partition changes are about 1 MiB, 20,000 of TestRaftServer's records 5 MiB)."""


class LogView:
    """Stages log changes into the current Outbox and tracks the high watermark.

    ``begin_step`` must be called with each step's fresh Outbox before anything is staged.
    """

    def __init__(self, log: RaftLog, control: ControlRecordStateMachine, quorum: QuorumState) -> None:
        self.log = log
        self._control = control
        self._quorum = quorum
        self._out = Outbox()
        self._now_ms = 0
        self._staged_end: int | None = None
        self._staged_epoch: int | None = None
        self._staged_truncation = False
        self._high_watermark = log.high_watermark
        self.delivered_offset = log.log_start_offset
        self.delivery_pending = False
        """Committed batches are left to deliver at the next step (the per-step bound)."""
        """Every batch below this offset has been handed to the state machine."""

    def begin_step(self, out: Outbox, now_ms: int) -> None:
        """Start staging into ``out`` (the driver applied the previous step's changes)."""
        self._out = out
        self._now_ms = now_ms
        self._staged_end = None
        self._staged_epoch = None
        self._staged_truncation = False

    @property
    def has_staged_changes(self) -> bool:
        """True while this step staged an append or a truncation not yet applied."""
        return self._staged_end is not None or self._staged_truncation

    @property
    def high_watermark(self) -> int:
        """This replica's high watermark (never decreases while the process lives)."""
        return self._high_watermark

    def log_end_offset(self) -> int:
        """The log end offset including changes staged in this step's Outbox."""
        return self._staged_end if self._staged_end is not None else self.log.log_end_offset

    def last_fetched_epoch(self) -> int:
        """The epoch of the last batch, including staged changes (after a truncation to the
        log start: the latest snapshot's epoch, or 0)."""
        if self._staged_epoch is not None:
            return self._staged_epoch
        if self._staged_truncation:
            end = self.log_end_offset()
            if end <= self.log.log_start_offset:
                snapshot = self.log.latest_snapshot_id()
                return snapshot.epoch if snapshot is not None else 0
            for batch in iter_batches(self.log.read(end - 1, 1)):
                return batch.partition_leader_epoch
        return self.log.last_fetched_epoch

    def end_offset(self) -> OffsetAndEpoch:
        """``(log end offset, last fetched epoch)``, staged changes included."""
        return OffsetAndEpoch(self.log_end_offset(), self.last_fetched_epoch())

    def stage_append(self, data: bytes) -> None:
        """Append whole batches (already at the right offsets) via the Outbox, and a flush.
        Raises :class:`RaftSafetyError` unless they start at the staged log end offset."""
        batches = list(iter_batches(data))
        if not batches:
            return
        if batches[0].base_offset != self.log_end_offset():
            raise RaftSafetyError(f"append at {batches[0].base_offset}, end offset is {self.log_end_offset()}")
        self._out.appends.append(data)
        self._out.flush = True
        self._staged_end = batches[-1].next_offset
        self._staged_epoch = batches[-1].partition_leader_epoch
        for batch in batches:
            self._control.add_batch(batch)
        state = self._quorum.state
        if isinstance(state, Leader) and state.voters != self._control.voters:
            state.set_voters(self._control.voters, self._now_ms)

    def stage_lingering(self, leader: Leader, now_ms: int) -> None:
        """Stage every lingering batch of the leader's accumulator as data batches of its
        epoch, timestamped ``now_ms``."""
        for values in leader.accumulator.drain():
            self.stage_append(
                build_data_batch(values, base_offset=self.log_end_offset(), epoch=leader.epoch, timestamp_ms=now_ms)
            )

    def stage_truncation(self, offset: int) -> None:
        """Truncate the log to ``offset`` via the Outbox. Raises :class:`RaftSafetyError` below
        the high watermark or after an append staged in the same step."""
        if offset < self._high_watermark:
            raise RaftSafetyError(f"truncation to {offset} below the high watermark {self._high_watermark}")
        if self._out.appends:
            raise RaftSafetyError("truncation after an append in one step")
        out = self._out
        out.truncate_to = offset if out.truncate_to is None else min(offset, out.truncate_to)
        out.flush = True
        self._staged_end = offset
        self._staged_epoch = None
        self._staged_truncation = True
        self._control.truncate(offset)

    def update_high_watermark(self, offset: int) -> None:
        """Raise the high watermark to ``offset`` (recorded in the Outbox when it moves).
        Raises :class:`RaftSafetyError` for a move back."""
        if offset < self._high_watermark:
            raise RaftSafetyError(f"high watermark moving back from {self._high_watermark} to {offset}")
        if offset > self._high_watermark:
            self._high_watermark = offset
            self._out.high_watermark = offset

    def stage_snapshot_install(self, snapshot_id: OffsetAndEpoch, data: bytes) -> None:
        """A downloaded snapshot replaces the whole log (``truncateToLatestSnapshot``); the state
        machine reloads from it. Raises :class:`RaftSafetyError` on a leader or for a snapshot
        ending below the high watermark."""
        if isinstance(self._quorum.state, Leader):
            raise RaftSafetyError("a leader never loads a snapshot")
        if snapshot_id.offset < self._high_watermark:
            raise RaftSafetyError(f"snapshot {snapshot_id} ends below the high watermark {self._high_watermark}")
        self._control.replace_with_snapshot(snapshot_id, data)
        self._out.install_snapshot = (snapshot_id, data)
        self._out.load_snapshot = snapshot_id
        self._out.committed.clear()
        self._staged_end = snapshot_id.offset
        self._staged_epoch = snapshot_id.epoch
        self.delivered_offset = snapshot_id.offset
        self.update_high_watermark(snapshot_id.offset)

    def validate_snapshot_id(self, snapshot_id: OffsetAndEpoch) -> None:
        """Raise ValueError unless the state machine may snapshot at ``snapshot_id``: at most
        the high watermark, after the log start, and with the epoch of the batch holding
        ``offset - 1`` (``KafkaRaftClient.createSnapshot``)."""
        if snapshot_id.offset > self._high_watermark:
            raise ValueError(f"snapshot {snapshot_id} beyond the high watermark {self._high_watermark}")
        if snapshot_id.offset <= self.log.log_start_offset:
            raise ValueError(f"snapshot {snapshot_id} not after the log start offset")
        for batch in iter_batches(self.log.read(snapshot_id.offset - 1, 1)):
            if batch.last_offset != snapshot_id.offset - 1:
                raise ValueError(f"snapshot {snapshot_id} does not end at a batch boundary")
            if batch.partition_leader_epoch != snapshot_id.epoch:
                raise ValueError(
                    f"snapshot {snapshot_id} has epoch {snapshot_id.epoch}, the log has "
                    f"{batch.partition_leader_epoch} there"
                )
            return
        raise ValueError(f"snapshot {snapshot_id} is not in the log")

    def deliver_committed(self) -> None:
        """Put the batches wholly below the high watermark into the Outbox's ``committed``,
        once each, in offset order (none while a snapshot install is staged), about
        :data:`MAX_DELIVERED_RECORDS_PER_STEP` records per step: the rest waits for the next
        step, which the core asks for at once (``delivery_pending``)."""
        self.delivery_pending = False
        if self._out.install_snapshot is not None:
            return  # the log is about to be replaced: deliver from the next step on
        limit = min(self._high_watermark, self.log.log_end_offset)
        budget = MAX_DELIVERED_RECORDS_PER_STEP
        # stops early where nothing is readable (e.g. below the log start): wait
        for batch in read_batches(self.log, self.delivered_offset, limit):
            if budget <= 0:
                self.delivery_pending = True
                return
            last = batch.last_offset
            self._out.committed.append(
                CommittedBatch(batch.base_offset, last, batch.partition_leader_epoch, batch.is_control, batch.to_bytes())
            )
            self.delivered_offset = last + 1
            budget -= last - batch.base_offset + 1
