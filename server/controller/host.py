"""The controller host: the sans-IO object that runs a node's quorum controller beside its KRaft
core, driven by the node (``server.node.driver``) and by the deterministic simulation alike.

It is what Kafka's ``QuorumController`` is around its managers: the raft listener that replays
committed batches and loaded snapshots, the claim and renouncement of the active controller on
leadership changes, the queue of controller requests, the writes waiting for their batch to
commit (``DeferredEventQueue``), the periodic tasks, and the snapshot triggers
(``SnapshotGenerator``). It reads no clock and draws no randomness it is not handed, opens no
socket and touches no file. Events go in as calls; what the driver must do comes out of
:meth:`ControllerHost.poll` as a :class:`ControllerOutbox`::

    driver ── commit(now, batch) ───────────────┐
           ── load_snapshot(now, id, records) ──┤
           ── append_result(result) ────────────┼──► ControllerHost ── poll(now) ──► ControllerOutbox
           ── request(now, ControllerRequest) ──┘      (QuorumController,           raft_events: step the core
                                                         write queue, timers,         replies: answer requests
                                                         snapshot triggers)           snapshot: write this file
                                                                                      next_deadline_ms

The driver calls :meth:`~ControllerHost.poll` after every core Outbox it carried out (that is
where the host sees leadership change) and when ``next_deadline_ms`` comes; it steps the core
with ``raft_events`` in order (consecutive appends may share a step, and then a batch) before it
feeds the core anything else, since a write's offsets (a new broker's epoch, the offsets its
records are applied at) are computed from where those appends land.

Rules (Kafka's ``QuorumController``):

* Activation: once the raft leader of an epoch has replayed everything before the epoch's start
  offset (where ``KafkaRaftClient`` tells its listener of its own leadership), the controller
  claims the epoch and appends its activation records (``server.controller.activation``) as one
  batch. Off the leader it renounces: every waiting write and request gets NOT_CONTROLLER.
* Writes: the active controller applies a write's records to its image when it appends them,
  before they commit (Kafka's active controller replays each write as it generates it), so a
  request runs at once and sees every request before it, committed or not; writes that arrive
  while others are in flight share the next batch. A write's records go to the log in one
  batch; its answer leaves when that batch commits (NOT_CONTROLLER if leadership is lost
  first). A request that writes nothing, and a read on the active controller, is answered once
  everything it saw has committed (Kafka's ``DeferredEventQueue`` at the last written offset);
  reads elsewhere are answered at once from the committed image. When this node loses the
  leadership with records applied but uncommitted, it goes back to the committed image: it
  reloads the latest snapshot and the committed log after it (Kafka reverts its timeline data
  structures to the last committed offset instead). A write that asks for a kraft.version
  upgrade is not applied ahead (the control batch before it moves its offsets): it is replayed
  when it commits, and requests after it wait until every write has committed.
* Periodic tasks, on the active controller only: a NoOpRecord every
  ``metadata.max.idle.interval.ms`` (``maybeScheduleNextWriteNoOpRecord``); every
  ``broker.session.timeout.ms`` / 8 the fencing of one broker whose session expired
  (``registerMaybeFenceStaleBroker``, again at once after one was found); every
  ``leader.imbalance.check.interval.seconds`` with ``auto.leader.rebalance.enable`` the
  preferred-leader elections (``maybeBalancePartitionLeaders``); every
  ``unclean.leader.election.interval.ms`` the unclean elections for leaderless partitions of
  topics that allow them (the electUnclean task). A task that writes waits for earlier writes
  (10 ms at a time); an election task that hit its bound runs again at once.
* Snapshots: every node counts the committed bytes it replays; when a trigger fires
  (``server.controller.snapshots``) it snapshots its image as of that batch, unless one is
  waiting to be written, a metadata transaction is open, there is no metadata.version, or the
  log already starts at or after that offset; while the active controller holds records applied
  beyond the batch, the trigger stays armed for the next batch that leaves none.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from typing import TYPE_CHECKING, Any, Protocol

from kwire.errors import Errors
from messages.generated.no_op_record import NoOpRecord
from messages.metadata import encode_record
from messages.runtime import Message
from server.controller import elections
from server.controller.acls import ACL_OPERATIONS, CLUSTER, CLUSTER_NAME
from server.controller.authorizer import CLUSTER_ACTION, Authorize, StandardAuthorizer, audit_line
from server.controller.cluster import ReplayError
from server.controller.controller import REPLAYED_KEY_BYTES, QuorumController
from server.controller.errors import ApiError
from server.controller.event_times import EventTimes
from server.controller.operations import ControllerConfig, ControllerLog, OperationContext
from server.controller.raft_access import RAFT_OPERATIONS, raft_refusal
from server.controller.registry import ControllerApi, find
from server.controller.responses import not_controller
from server.controller.result import Record
from server.controller.snapshots import SnapshotTriggers, image_snapshot_steps, run_steps
from server.raft.control_state import ControlRecordStateMachine
from server.raft.events import AppendResult, ClientAppend, CommittedBatch, UpgradeKRaftVersion
from server.raft.log import RaftLog, read_batches
from server.raft.roles import EpochState, Leader
from server.raft.types import LeaderAndEpoch, OffsetAndEpoch, VoterSet
from storage.records import RecordBatch
from storage.snapshot_format import read_snapshot_batches

if TYPE_CHECKING:
    import random

__all__ = [
    "MAX_ELECTIONS_PER_IMBALANCE",
    "ControllerHost",
    "ControllerOutbox",
    "ControllerRequest",
    "RaftView",
    "SnapshotToWrite",
]

MAX_ELECTIONS_PER_IMBALANCE = 1000
"""Elections one periodic election task writes at most (``maxElectionsPerImbalance``)."""

_RETRY_AFTER_WRITE_MS = 10
"""How long a periodic task that writes waits when it may not write yet."""

_REPLAYED_TYPE_BYTES = bytes(int(b in REPLAYED_KEY_BYTES) for b in range(256))
"""REPLAYED_KEY_BYTES as the 256 flags ``RecordBatch.iter_selected_values`` takes."""

SNAPSHOT_LOAD_RECORDS_PER_POLL = 20_000
"""Records of a snapshot being loaded that one call replays at most (about a quarter of a
second): a snapshot of 10^6 partitions takes seconds to replay, and the node must go on
fetching, voting and answering meanwhile, as Kafka's raft thread does while its controller
replays a snapshot on its own event queue."""

MAX_UNCOMMITTED_TASK_RECORDS = 10_000
"""A periodic task that writes waits while more than this many records of the active
controller's are uncommitted (one user operation's worth, ``MAX_RECORDS_PER_USER_OP``): the
fencing of a third of 1,000 brokers (3,000 partition changes each at 10^6 partitions) would
otherwise run as far ahead of the followers as the leader's CPU allows, and the followers,
replaying on the same two cores, miss their fetch timeouts."""


class RaftView(Protocol):
    """What the host reads of the KRaft core it sits beside (``server.raft.core.RaftCore``
    fits). Reading only: the host changes the core solely through its outbox's
    ``raft_events``."""

    @property
    def state(self) -> EpochState:
        """The current role."""

    @property
    def epoch(self) -> int:
        """The current epoch."""

    @property
    def leader_and_epoch(self) -> LeaderAndEpoch:
        """The known leader and the epoch."""

    @property
    def voters(self) -> VoterSet:
        """The newest voter set."""

    @property
    def kraft_version(self) -> int:
        """The finalized kraft.version."""

    @property
    def next_append_offset(self) -> int | None:
        """Where the next append starts on this leader, None elsewhere."""

    @property
    def high_watermark(self) -> int:
        """This replica's high watermark (0 while unknown)."""

    @property
    def control(self) -> ControlRecordStateMachine:
        """The voter set and kraft.version history (``at_offset`` for a snapshot's header)."""

    @property
    def log(self) -> RaftLog:
        """The replicated log (its start offset and latest snapshot id)."""

    def check_kraft_upgrade(self, epoch: int, level: int) -> bool:
        """Whether this leader of ``epoch`` will append kraft.version ``level``."""


@dataclass(frozen=True, slots=True)
class ControllerRequest:
    """A controller RPC as it reached the node: ``handle`` is the driver's (the reply names it),
    ``listener_name`` the listener it arrived on, ``received_ms`` when its frame was read (on
    the driver's clock, for the queue-time metric)."""

    handle: Any
    body: Message
    version: int
    listener_name: str = ""
    received_ms: int = 0
    principal: str = "User:ANONYMOUS"
    """The principal the request is made by, in ``Type:name`` form: a PLAINTEXT connection's
    is ``User:ANONYMOUS`` (``KafkaPrincipal.ANONYMOUS``)."""
    client_host: str = ""
    """The client's address, as authorization matches hosts."""
    token_requests_allowed: bool = True
    """The connection may ask for delegation tokens (``ControllerApis.allowTokenRequests``)."""


@dataclass(frozen=True, slots=True)
class SnapshotToWrite:
    """A snapshot of the image to write and freeze: its id, and ``steps``, which gives a
    generator that makes its ``.checkpoint`` bytes from the image as it stood when the snapshot
    was taken (``server.controller.snapshots.image_snapshot_steps``). The generator reads
    nothing the host changes afterwards, so the driver may run it a step at a time between its
    other work while the host goes on (at a million partitions it takes over ten seconds).
    ``image_records`` is roughly how many records it holds
    (``QuorumController.image_record_estimate``), for the driver to choose where to build it."""

    snapshot_id: OffsetAndEpoch
    steps: Callable[[], Generator[None, None, bytes]]
    image_records: int

    def build(self) -> bytes:
        """Every step at once: the snapshot's bytes."""
        return run_steps(self.steps())


@dataclass(slots=True)
class ControllerOutbox:
    """What the driver must do after a :meth:`ControllerHost.poll`, in this order:

    1. ``raft_events``: step the core with each (``ClientAppend`` of the controller's writes,
       activation records and NoOps; ``UpgradeKRaftVersion`` before the write that asked for
       it), in order and before any other event reaches the core (consecutive appends may go
       in one step);
    2. ``replies``: answer each request (``(handle, response)``);
    3. ``snapshot``: build it a step at a time between other work, and write it; skip it
       when the log meanwhile starts at or after its offset;
    4. poll again no later than ``next_deadline_ms`` (None: no timer is running).

    ``loaded`` names the snapshot whose load (:meth:`ControllerHost.load_snapshot`) ended since
    the previous poll: the image is whole and long-lived from there on.
    """

    raft_events: list[ClientAppend | UpgradeKRaftVersion] = field(default_factory=list)
    replies: list[tuple[Any, Message]] = field(default_factory=list)
    snapshot: SnapshotToWrite | None = None
    loaded: OffsetAndEpoch | None = None
    next_deadline_ms: int | None = None


@dataclass(slots=True)
class _Write:
    """A write whose batch is on its way to the log: ``answer`` (None for the controller's own
    writes) hears the outcome once the batch up to ``last_offset`` committed, ``on_commit`` the
    batch's last offset."""

    answer: Callable[[ApiError | None], None] | None
    on_commit: Callable[[int], None] | None = None
    last_offset: int | None = None


@dataclass(frozen=True, slots=True)
class _Applied:
    """One of the host's appends whose records the image holds ahead of their commit: the
    append's ``token``, its records' offsets ``first`` to ``last``, and the leader ``epoch`` it
    was made in."""

    token: int
    first: int
    last: int
    epoch: int


@dataclass(slots=True)
class _Loading:
    """An image being rebuilt a slice at a time (:data:`SNAPSHOT_LOAD_RECORDS_PER_POLL`): the
    snapshot it starts from and its records not replayed yet, the committed log after it to
    replay again (going back to the committed image), how many records were replayed, when it
    started, and what arrived meanwhile and waits for the whole image: committed batches and
    requests, in order."""

    snapshot_id: OffsetAndEpoch
    records: Iterator[bytes | None] | None
    """None once every record is replayed."""
    started_ms: int
    log: deque[CommittedBatch] = field(default_factory=deque)
    """Going back to the committed image: the committed batches after the snapshot."""
    revert: bool = False
    """Going back to the committed image, not loading a snapshot the core handed over."""
    reactivate: bool = False
    """Broker sessions start afresh at the end if this node is still the active controller."""
    replayed: int = 0
    done: bool = False
    """The snapshot and the log are replayed (what arrived meanwhile may not be)."""
    committed: deque[CommittedBatch] = field(default_factory=deque)
    requests: deque[ControllerRequest] = field(default_factory=deque)


@dataclass(slots=True)
class _Task:
    """A periodic task: when it runs next (None: not scheduled), and what it does; ``run``
    returns the delay to its next run."""

    name: str
    run: Callable[[int], int]
    next_ms: int | None = None


class _SilentLog:
    def info(self, msg: str, *args: Any) -> None:
        pass

    def error(self, msg: str, *args: Any) -> None:
        pass


class ControllerHost:
    """The controller of one node (module docstring).

    ``config`` holds the node's settings, ``bootstrap`` the formatted bootstrap records
    (``(record, version)``, metadata.version among them), ``raft`` the core it sits beside,
    ``now_ms`` the time it starts at. ``rng`` places replicas and draws topic ids; ``log``
    takes its INFO and ERROR lines; ``logger_levels`` lists the node's loggers for
    DescribeConfigs; ``perf_counter`` (seconds) times each request's processing for the
    EventQueueProcessingTimeMs metric only (None: not timed).
    """

    def __init__(
        self,
        config: ControllerConfig,
        *,
        bootstrap: Sequence[Record],
        raft: RaftView,
        now_ms: int,
        rng: random.Random,
        log: ControllerLog | None = None,
        logger_levels: Callable[[], Mapping[str, str]] = dict,
        perf_counter: Callable[[], float] | None = None,
    ) -> None:
        self.config = config
        self.raft = raft
        self.rng = rng
        self.log: ControllerLog = log if log is not None else _SilentLog()
        self._logger_levels = logger_levels
        self._perf_counter = perf_counter
        self.controller = QuorumController(
            bootstrap=bootstrap,
            min_insync_replicas=config.min_insync_replicas,
            cluster_id=config.cluster_id,
            session_timeout_ms=config.session_timeout_ms,
        )
        self.replayed_offset = 0
        """The offset after the last committed batch (or snapshot) replayed."""
        self.authorizer = StandardAuthorizer(config.super_users, config.allow_everyone_if_no_acl_found)
        """Decides requests on the ACLs when ``authorizer.class.name`` is set
        (``server.controller.authorizer``)."""
        self.queue_times = EventTimes()
        """``ControllerEventManager`` EventQueueTimeMs: arrival to the start of handling."""
        self.processing_times = EventTimes()
        """``ControllerEventManager`` EventQueueProcessingTimeMs: the handling itself."""
        self.stopping = False
        """The node is stopping: no activation and no NoOps any more."""
        self._triggers = SnapshotTriggers(config.snapshot_max_bytes, config.snapshot_max_interval_ms, now_ms)
        self._writes: dict[int, _Write] = {}
        """Uncommitted writes (and answers waiting for them) by the token of their append."""
        self._waiting: deque[ControllerRequest] = deque()
        """Requests waiting, in arrival order, for every write before them to commit (only
        behind a write not applied ahead, or after going back to the committed image)."""
        self._balance_walk: elections.BalanceWalk | None = None
        """The rebalance's pass in progress (``_balance_leaders``)."""
        self._barrier = False
        """Requests wait in ``_waiting`` until no write is uncommitted."""
        self._applied: deque[_Applied] = deque()
        """The host's appends the image holds ahead of their commit, in offset order."""
        self._applied_by_token: dict[int, _Applied] = {}
        self._write_end = 0
        """The offset after the host's latest append on the active controller."""
        self._now_ms = now_ms
        """The time of the latest call that gave one."""
        self._next_token = -1
        """The host's append tokens count down from -1, so they never meet a driver's own."""
        self._loading: _Loading | None = None
        """The image being rebuilt a slice at a time (a snapshot load, or a revert)."""
        self.load_records_per_poll = SNAPSHOT_LOAD_RECORDS_PER_POLL
        """Records :meth:`load_snapshot`, a revert and each :meth:`poll` replay at most."""
        self._elected: tuple[int, int, int] | None = None
        """The epoch this node leads, when the host first saw it lead, and ``replayed_offset`` then."""
        self._out = ControllerOutbox()
        self._pending_records = 0
        """Records of ``_out.raft_events`` not yet handed to the driver."""
        self._no_op = _Task("no-op", self._append_no_op)
        self._session_expiry = _Task("session expiry", self._fence_stale_broker)
        self._leader_balance = _Task("leader balance", self._balance_leaders)
        self._unclean_election = _Task("unclean election", self._elect_unclean_leaders)
        self._token_sweep = _Task("delegation token expiry", self._expire_tokens)
        self._tasks = (self._no_op, self._session_expiry, self._leader_balance, self._unclean_election,
                       self._token_sweep)
        if config.unsafe_ack_on_append:
            self.log.error("kwire.unsafe.test.ack.on.append=true: writes are acknowledged before they commit "
                           "(TEST ONLY; acknowledged writes can be lost)")

    # ------------------------------------------------------------------ events

    def commit(self, now_ms: int, batch: CommittedBatch) -> None:
        """A batch now wholly committed, in offset order: its data records are replayed (a
        record that does not fit the image is logged at ERROR and skipped, as Kafka's controller
        counts a metadata fault), then the snapshot triggers and the writes it completes."""
        self._now_ms = now_ms
        if self._loading is not None:
            self._loading.committed.append(batch)  # after the whole snapshot
            return
        applied = self._applied
        if applied and not self._applied_still_ours(batch):
            self._revert(now_ms, f"batch {batch.base_offset}-{batch.last_offset} of epoch {batch.epoch} committed")
            if self._loading is not None:
                self._loading.committed.append(batch)  # after the committed image is whole again
                return
        if not batch.is_control and not applied:  # nothing applied ahead: only the replayed records are read out
            base = batch.base_offset
            for index, replayed_value in RecordBatch(batch.data).iter_selected_values(_REPLAYED_TYPE_BYTES):
                self._replay(replayed_value, base + index, "committed")
        elif not batch.is_control:
            replayed = REPLAYED_KEY_BYTES
            for offset, value in enumerate(RecordBatch(batch.data).iter_values(), batch.base_offset):
                if applied and applied[0].first <= offset:  # applied when it was appended
                    if offset >= applied[0].last:
                        del self._applied_by_token[applied.popleft().token]
                    continue
                if value is not None and len(value) >= 2 and value[1] in replayed:  # else not replayed
                    self._replay(value, offset, "committed")
        self.replayed_offset = batch.last_offset + 1
        self._maybe_snapshot(now_ms, batch)
        if self._writes:
            self._complete_writes(batch.last_offset)

    def _replay(self, value: bytes | None, offset: int, how: str) -> None:
        """Replay one record at ``offset`` (``how``: "committed", or "appended" when applied
        ahead); one that does not fit the image is logged at ERROR and skipped, as Kafka's
        controller counts a metadata fault."""
        try:
            self.controller.replay(value, offset)
        except ReplayError as exc:
            self.log.error("skipped a record %s at offset %d: %s", how, offset, exc)

    @property
    def speculating(self) -> bool:
        """The image holds records of this node's appends that have not committed yet (it is
        then ahead of ``replayed_offset``)."""
        return bool(self._applied)

    def _applied_still_ours(self, batch: CommittedBatch) -> bool:
        """The records applied ahead will commit as they were applied: this node still leads
        the epoch they were appended in, and ``batch`` is of that epoch where it reaches them."""
        first = self._applied[0]
        state = self.raft.state
        return (
            isinstance(state, Leader)
            and state.epoch == first.epoch
            and (batch.last_offset < first.first or batch.epoch == first.epoch)
        )

    def _revert(self, now_ms: int, reason: str) -> None:
        """Go back to the committed image: the records applied ahead of their commit may never
        commit (Kafka's ``QuorumController.renounce`` reverts its timeline data structures to
        the last committed offset). The image is rebuilt from the latest snapshot and the
        committed log after it, up to ``replayed_offset``, a slice at a time as a loaded
        snapshot is (:meth:`load_snapshot`); sessions start afresh if this node is still the
        active controller then."""
        end = self.replayed_offset
        self.log.info("node %d: going back to the committed image at offset %d: %s", self.config.node_id, end, reason)
        self._applied.clear()
        self._applied_by_token.clear()
        controller, raft_log = self.controller, self.raft.log
        sessions = controller.cluster.heartbeats is not None
        controller.cluster.deactivate()
        snapshot = raft_log.latest_snapshot_id()
        records: Iterator[bytes | None] = iter(())
        start = OffsetAndEpoch(0, 0)
        if snapshot is not None and 0 < snapshot.offset <= end:
            size = raft_log.snapshot_size(snapshot)
            assert size is not None
            records = read_snapshot_batches(raft_log.read_snapshot(snapshot, 0, size)).iter_data_records()
            start, offset = snapshot, snapshot.offset
        else:
            offset = raft_log.log_start_offset
        log: deque[CommittedBatch] = deque()
        for stored in read_batches(raft_log, offset, end):
            log.append(CommittedBatch(stored.base_offset, stored.last_offset, stored.partition_leader_epoch,
                                      stored.is_control, stored.to_bytes()))
            offset = stored.last_offset + 1
        if offset < end:
            raise RuntimeError(f"the committed log cannot be read back from offset {offset} up to {end}")
        assert self._loading is None, "nothing is applied ahead while an image is rebuilt"
        self._loading = _Loading(start, records, now_ms, log=log, revert=True, reactivate=sessions)
        controller.reset((), start.offset - 1)
        self.replayed_offset = 0
        self._continue_loading(now_ms)

    def load_snapshot(self, now_ms: int, snapshot_id: OffsetAndEpoch, record_values: Iterable[bytes | None]) -> None:
        """The node's state machine starts again from snapshot ``snapshot_id`` whose data
        records' values are ``record_values`` (an iterable this host may read from until the
        load ends; a later load replaces one in progress).

        The first :attr:`load_records_per_poll` records are replayed now, the rest that many
        per :meth:`poll` (``next_deadline_ms`` is then now), so that the driver goes on
        fetching and voting between the slices: Kafka's ``KafkaRaftClient`` hands a snapshot
        to its listener and goes on, and the controller replays it on its own event queue.
        Until the last record is replayed, :attr:`loading` is true: ``replayed_offset`` is 0,
        the controller does not claim leadership nor run its periodic tasks, and committed
        batches and requests wait, in order, for the whole image (as events behind the load in
        ``QuorumController``'s queue do). Raises ``ReplayError`` (here or from :meth:`poll`)
        for a snapshot whose records do not form an image."""
        self._now_ms = now_ms
        self.controller.reset((), snapshot_id.offset - 1)
        self.replayed_offset = 0
        self._applied.clear()  # a leader never loads one: nothing was applied ahead
        self._applied_by_token.clear()
        self._out.snapshot = None  # of an image the loaded one replaces
        self._triggers.reset(now_ms)
        held = self._loading.requests if self._loading is not None else deque()
        self._loading = _Loading(snapshot_id, iter(record_values), now_ms, requests=held)
        self._continue_loading(now_ms)

    @property
    def loading(self) -> bool:
        """The image is being rebuilt (:meth:`load_snapshot`, or going back to the committed
        image) and is not whole yet."""
        return self._loading is not None

    def _continue_loading(self, now_ms: int) -> None:
        """Replay the next slice of the image being rebuilt: the snapshot's records, then the
        committed log read back after it (going back to the committed image), then the batches
        committed meanwhile, :attr:`load_records_per_poll` records per call; once all are
        replayed, the requests that waited."""
        loading = self._loading
        assert loading is not None
        budget = self.load_records_per_poll
        if loading.records is not None:
            offset, replay = loading.snapshot_id.offset - 1, self.controller.replay
            count = 0
            for value in islice(loading.records, budget):
                replay(value, offset)
                count += 1
            loading.replayed += count
            if count == budget:
                return  # there may be more
            loading.records = None
            self.replayed_offset = loading.snapshot_id.offset
            budget -= count
        log = loading.log
        while log and budget > 0:
            batch = log.popleft()
            if not batch.is_control:
                for offset, value in enumerate(RecordBatch(batch.data).iter_values(), batch.base_offset):
                    self._replay(value, offset, "committed")
            self.replayed_offset = batch.last_offset + 1
            count = batch.last_offset - batch.base_offset + 1
            loading.replayed += count
            budget -= count
        if log:
            return
        if not loading.done:
            loading.done = True
            self.log.info("node %d: %s at offset %d: %d records in %d ms", self.config.node_id,
                          "went back to the committed image" if loading.revert else "loaded snapshot",
                          self.replayed_offset, loading.replayed, now_ms - loading.started_ms)
            if not loading.revert:
                self._out.loaded = loading.snapshot_id
            if loading.reactivate and self._claimed():
                self.controller.cluster.activate(now_ms)
        committed = loading.committed
        while committed and budget > 0:
            batch = committed.popleft()
            self._loading = None
            try:
                self.commit(now_ms, batch)
            finally:
                self._loading = loading
            budget -= batch.last_offset - batch.base_offset + 1
        if committed:
            return
        self._loading = None
        for request in loading.requests:
            self.request(now_ms, request)

    def append_result(self, result: AppendResult) -> bool:
        """Where one of the host's appends will land, or why it was refused (its write is then
        answered NOT_CONTROLLER); False when ``result`` is not for one of the host's appends."""
        if result.token >= 0:
            return False
        applied = self._applied_by_token.get(result.token)
        if applied is not None and (result.error_code != Errors.NONE or result.base_offset != applied.first):
            self.log.error("node %d: append %d applied ahead at offset %d came back as %s", self.config.node_id,
                           result.token, applied.first, result)
            self._revert(self._now_ms, "an append applied ahead did not land where it was applied")
            self._barrier = True
        write = self._writes.get(result.token)
        if write is None:
            return True  # activation records and NoOps: nothing waits for them
        if result.error_code != Errors.NONE:
            del self._writes[result.token]
            if write.answer is not None:
                write.answer(self.not_controller())
        else:
            write.last_offset = result.last_offset
            if self.config.unsafe_ack_on_append and write.answer is not None:
                write.answer(None)  # TEST ONLY (KRaftConfig.unsafe_test_ack_on_append): before the commit
                write.answer = None
        return True

    def request(self, now_ms: int, request: ControllerRequest) -> None:
        """A controller RPC (one that ``server.controller.registry`` lists; raises KeyError for
        another): a read is answered at once; a write runs now, or waits behind the writes
        before it while this node is the active controller."""
        self._now_ms = now_ms
        api = find(request.body)
        if api is None:
            raise KeyError(f"not a controller RPC: {type(request.body).__name__}")
        if self._loading is not None:
            self._loading.requests.append(request)  # it runs on the whole image
            return
        refused = self._authorize(request, api)
        if refused is None and api.check is not None:
            refused = api.check(self.config, request.body, request.version)
        if refused is not None:
            self._reply(request, api.respond(request.body, request.version, refused))
            return
        if not api.write:
            self._answer_after_writes(request, api, api.respond(request.body, request.version,
                                                                self._run_read(now_ms, request, api)))
            return
        if api.on_arrival is not None:
            api.on_arrival(self.controller, request.body, now_ms)
        if (self._waiting or self._blocked()) and self.active_controller() is not None:
            self._waiting.append(request)
            return
        self._run(now_ms, request, api)

    def authorize_envelope(self, principal: str, host: str) -> bool:
        """Whether a connection of ``principal`` from ``host`` may forward requests in an
        Envelope: CLUSTER_ACTION on the cluster (``EnvelopeUtils``); always without an
        authorizer."""
        if not self.config.authorizer:
            return True
        decision = self.authorizer.authorize_cluster(self.controller.acls.bindings(), principal, host, CLUSTER_ACTION)
        if not decision.allowed:
            self.log.info("%s", audit_line(decision, principal, host, CLUSTER_ACTION, CLUSTER, CLUSTER_NAME, "Envelope"))
        return decision.allowed

    def refuse_raft_request(self, body: Message, principal: str, host: str) -> Message | None:
        """The refusal of a raft RPC whose principal lacks the cluster operation it needs
        (``server.controller.raft_access``), None when it may go to the core (always without an
        authorizer). Before the ACLs are loaded only super users pass, as Kafka answers
        everyone else with an error."""
        operation = RAFT_OPERATIONS.get(type(body))
        if not self.config.authorizer or operation is None:
            return None
        decision = self.authorizer.authorize_cluster(self.controller.acls.bindings(), principal, host, operation)
        if decision.allowed:
            return None
        name = type(body).__name__.removesuffix("Request")
        self.log.info("%s", audit_line(decision, principal, host, operation, CLUSTER, CLUSTER_NAME, name))
        return raft_refusal(body)

    def _authorize(self, request: ControllerRequest, api: ControllerApi) -> ApiError | None:
        """The request's refusal by the authorizer, None when it may go on: the operation its
        API needs on the cluster (``ControllerApis``' ``authorizeClusterOperation``); a principal
        refused only because the ACLs are not loaded yet gets UNKNOWN_SERVER_ERROR, as Kafka's
        ``AuthorizerNotReadyException`` does."""
        if not self.config.authorizer or api.cluster_operation is None:
            return None
        operation = api.cluster_operation
        decision = self.authorizer.authorize_cluster(
            self.controller.acls.bindings(), request.principal, request.client_host, operation)
        if decision.allowed:
            return None
        name = type(request.body).__name__.removesuffix("Request")
        if not decision.ready:
            self.log.error("refused %s from %s: the authorizer has not loaded the ACLs yet", name, request.principal)
            return ApiError(Errors.UNKNOWN_SERVER_ERROR, None)
        self.log.info("%s", audit_line(decision, request.principal, request.client_host, operation, CLUSTER,
                                       CLUSTER_NAME, name))
        return ApiError(Errors.CLUSTER_AUTHORIZATION_FAILED, f"Request {name} needs {ACL_OPERATIONS[operation]} permission.")

    def shutdown(self) -> None:
        """The node is stopping: it no longer claims leadership or appends NoOps."""
        self.stopping = True

    def poll(self, now_ms: int, *, run_tasks: bool = True, load: bool = True) -> ControllerOutbox:
        """Act on the raft state as it now stands (activation or renouncement), replay
        (``load``) the next slice of an image being rebuilt, run the waiting requests and
        (``run_tasks``) the periodic tasks that are due, and hand over everything to do
        (:class:`ControllerOutbox`).

        A driver passes ``run_tasks=False`` to the poll that follows the steps of the host's
        own appends: a task that runs again at once (fencing one expired broker after another,
        elections a thousand at a time) then waits for the driver's next turn, after the
        requests and raft messages that came meanwhile, as Kafka's controller queues such a
        task behind the events already in its queue. It passes ``load=False`` to the polls
        that follow a raft message or a request, and ``load=True`` when ``next_deadline_ms``
        came: the raft traffic that waits is then carried out before the next slice, not
        behind one slice each."""
        self._now_ms = now_ms
        if load and self._loading is not None:
            self._continue_loading(now_ms)
        self._follow_leadership(now_ms)
        if not self.authorizer.loaded and 0 < self.raft.high_watermark <= self.replayed_offset:
            self.authorizer.loaded = True  # Kafka's completeInitialLoad: caught up to the high watermark
        if not self._writes:
            self._barrier = False
        while self._waiting and not self._blocked() and self._loading is None:
            request = self._waiting.popleft()
            api = find(request.body)
            assert api is not None
            self._run(now_ms, request, api)
        claimed = self._claimed()
        for task in self._tasks:
            if not claimed:
                task.next_ms = None
            elif run_tasks and self._loading is None and task.next_ms is not None and now_ms >= task.next_ms:
                task.next_ms = now_ms + task.run(now_ms)
        if claimed and self._no_op.next_ms is None and self.config.max_idle_interval_ms > 0:
            self._no_op.next_ms = now_ms + self.config.max_idle_interval_ms
        out, self._out = self._out, ControllerOutbox()
        self._pending_records = 0
        due = [task.next_ms for task in self._tasks if task.next_ms is not None]
        if self._loading is not None:
            due.append(now_ms)  # the next slice
        out.next_deadline_ms = min(due) if due else None
        return out

    # ------------------------------------------------------------------ leadership

    def active_controller(self) -> QuorumController | None:
        """The controller while this node is the active one and has replayed a
        metadata.version (Kafka's active controller knows it from its first record on)."""
        controller = self.controller
        if (
            not isinstance(self.raft.state, Leader)
            or controller.active_epoch != self.raft.epoch
            or controller.metadata_version is None
        ):
            return None
        return controller

    def _claimed(self) -> bool:
        """This node leads and its controller claimed the epoch (its metadata.version may still
        be on its way: the periodic writes wait for it)."""
        return isinstance(self.raft.state, Leader) and self.controller.active_epoch == self.raft.epoch

    def not_controller(self) -> ApiError:
        """NOT_CONTROLLER naming the leader, or none while this node leads without being the
        active controller yet."""
        leader = self.raft.leader_and_epoch.leader_id
        return not_controller(None if leader == self.config.node_id and self.active_controller() is None else leader)

    def _follow_leadership(self, now_ms: int) -> None:
        """Claim the controller once this node leads and has replayed everything committed
        before its epoch's start; renounce it off the leader (every write and waiting request
        then gets NOT_CONTROLLER)."""
        state, controller = self.raft.state, self.controller
        if self._applied and not (isinstance(state, Leader) and state.epoch == self._applied[0].epoch):
            controller.renounce()
            self._revert(now_ms, "the leadership of the epoch it was appended in was lost")
            if self._writes:
                self._fail_writes()
        if not isinstance(state, Leader):
            controller.renounce()
            if self._writes:
                self._fail_writes()
            return
        if self._elected is None or self._elected[0] != state.epoch:
            self._elected = (state.epoch, now_ms, self.replayed_offset)
        if self.stopping or self._loading is not None or self.replayed_offset < state.epoch_start_offset:
            return
        if controller.active_epoch is not None and controller.active_epoch != state.epoch and self._writes:
            self._fail_writes()  # writes of an earlier epoch of ours never commit in this one
        activation = controller.activate(state.epoch, now_ms)
        if activation is None:
            return
        _, elected_ms, replayed = self._elected
        # the epoch's own first batch may have committed (and been replayed) before the host saw
        # the election, on a single voter always: nothing before the epoch start was left then
        self.log.info("node %d: the active controller of epoch %d, %d ms after its election (%d committed records "
                      "replayed meanwhile up to the epoch start offset %d)", self.config.node_id, state.epoch,
                      now_ms - elected_ms, max(0, state.epoch_start_offset - replayed), state.epoch_start_offset)
        config = self.config
        self._session_expiry.next_ms = now_ms + max(1, config.session_timeout_ms // 8)
        self._leader_balance.next_ms = (
            now_ms + config.leader_imbalance_check_interval_ms if config.auto_leader_rebalance_enable else None
        )
        self._balance_walk = None  # a pass of an earlier epoch of ours starts afresh
        self._unclean_election.next_ms = now_ms + config.unclean_leader_election_interval_ms
        self._token_sweep.next_ms = now_ms + config.tokens.expiry_check_interval_ms
        if activation.records:
            self._append(activation.records, None, drain_now=False)  # one batch: atomic activations stay whole

    # ------------------------------------------------------------------ requests and writes

    def _context(self, now_ms: int, request: ControllerRequest | None = None) -> OperationContext:
        return OperationContext(
            controller=self.controller,
            config=self.config,
            now_ms=now_ms,
            raft=self.raft,
            voter_ids=self.raft.voters.ids,
            rng=self.rng,
            log=self.log,
            listener_name="" if request is None else request.listener_name,
            leader_id=self.raft.leader_and_epoch.leader_id,
            pending_records=self._pending_records,
            logger_levels=self._logger_levels,
            authorize=None if request is None else self._resource_authorizer(request),
            principal="User:ANONYMOUS" if request is None else request.principal,
            token_requests_allowed=request is not None and request.token_requests_allowed,
        )

    def _resource_authorizer(self, request: ControllerRequest) -> Authorize | None:
        """The request's :data:`~server.controller.operations.Authorize`, None without an
        authorizer; a denial it is asked to log goes to the log as Kafka's audit line."""
        if not self.config.authorizer:
            return None
        name = type(request.body).__name__.removesuffix("Request")

        def authorize(operation: int, resource_type: int, resource_name: str, log_denied: bool = True) -> bool:
            decision = self.authorizer.authorize(self.controller.acls.bindings(), request.principal, request.client_host,
                                                 operation, resource_type, resource_name)
            if not decision.ready:
                raise ApiError(Errors.UNKNOWN_SERVER_ERROR, None)
            if not decision.allowed and log_denied:
                self.log.info("%s", audit_line(decision, request.principal, request.client_host, operation,
                                               resource_type, resource_name, name))
            return decision.allowed

        return authorize

    def _run_read(self, now_ms: int, request: ControllerRequest, api: ControllerApi) -> Any:
        try:
            return api.operation(self._context(now_ms, request), request.body, request.version).response
        except ApiError as exc:  # the authorizer not ready yet
            return exc

    def _run(self, now_ms: int, request: ControllerRequest, api: ControllerApi) -> None:
        """Run one write request on the active controller (NOT_CONTROLLER elsewhere)."""
        self.queue_times.record(now_ms - request.received_ms)
        started = self._perf_counter() if self._perf_counter is not None else None
        try:
            self._operate(now_ms, request, api)
        finally:
            if started is not None and self._perf_counter is not None:
                self.processing_times.record((self._perf_counter() - started) * 1000)

    def _operate(self, now_ms: int, request: ControllerRequest, api: ControllerApi) -> None:
        body, version = request.body, request.version
        if self.active_controller() is None:
            self._reply(request, api.respond(body, version, self.not_controller()))
            return
        try:
            result = api.operation(self._context(now_ms, request), body, version)
        except ApiError as exc:
            self._reply(request, api.respond(body, version, exc))
            return
        ahead = True
        if result.kraft_upgrade is not None:
            self._out.raft_events.append(UpgradeKRaftVersion(result.kraft_upgrade))
            ahead = False  # the control batch goes first: the offsets computed here would be off
            self._barrier = True
        if not result.records:
            self._answer_after_writes(request, api, api.respond(body, version, result.response))
            return

        def answer(error: ApiError | None) -> None:
            self._reply(request, api.respond(body, version, result.response if error is None else error))

        self._append(result.records, answer, result.on_commit, ahead=ahead)

    def _blocked(self) -> bool:
        """Requests must wait for every uncommitted write (``_barrier``)."""
        return self._barrier and bool(self._writes)

    def _answer_after_writes(self, request: ControllerRequest, api: ControllerApi, response: Message) -> None:
        """Answer ``response`` once everything the active controller has appended so far has
        committed (it may have read uncommitted records: Kafka's ``DeferredEventQueue`` at the
        last written offset), at once elsewhere or when nothing is uncommitted. Should the
        leadership be lost first, the answer is NOT_CONTROLLER."""
        if self.active_controller() is None or self._write_end <= self.replayed_offset:
            self._reply(request, response)
            return

        def answer(error: ApiError | None) -> None:
            self._reply(request, response if error is None else api.respond(request.body, request.version, error))

        token = self._next_token
        self._next_token -= 1
        self._writes[token] = _Write(answer, None, self._write_end - 1)

    def _reply(self, request: ControllerRequest, response: Message) -> None:
        self._out.replies.append((request.handle, response))

    def _append(
        self,
        records: Sequence[Record],
        answer: Callable[[ApiError | None], None] | None,
        on_commit: Callable[[int], None] | None = None,
        *,
        drain_now: bool = True,
        ahead: bool = True,
    ) -> None:
        """Hand ``records`` to the core as one batch; a write (``answer`` given, or the
        controller's own periodic writes) waits for its commit. ``drain_now``: leave without
        lingering (the writes that came meanwhile share the batch). ``ahead``: apply the
        records to the image now, at the offsets they will have (the log end offset plus
        what is still on its way to the accumulator), else when they commit."""
        token = self._next_token
        self._next_token -= 1
        values = tuple(encode_record(m, v) for m, v in records)
        offset = self.raft.next_append_offset
        assert offset is not None, "only a leader appends"
        first = offset + self._pending_records
        if ahead:
            for record_offset, value in enumerate(values, first):
                self._replay(value, record_offset, "appended")
            applied = _Applied(token, first, first + len(values) - 1, self.raft.epoch)
            self._applied.append(applied)
            self._applied_by_token[token] = applied
        self._write_end = first + len(values)
        if answer is not None or drain_now:
            self._writes[token] = _Write(answer, on_commit)
        self._out.raft_events.append(ClientAppend(token, values, drain_now=drain_now))
        self._pending_records += len(values)

    def _complete_writes(self, committed_offset: int) -> None:
        """Answer the writes committed up to ``committed_offset`` (inclusive)."""
        for token, write in list(self._writes.items()):
            if write.last_offset is None or write.last_offset > committed_offset:
                continue
            del self._writes[token]
            if write.on_commit is not None:
                write.on_commit(write.last_offset)
            if write.answer is not None:
                write.answer(None)

    def _fail_writes(self) -> None:
        """Leadership was lost: every uncommitted write is answered NOT_CONTROLLER (waiting
        requests follow at the next poll, off the active controller)."""
        writes, self._writes = self._writes, {}
        self._write_end = 0
        for write in writes.values():
            if write.answer is not None:
                write.answer(self.not_controller())

    # ------------------------------------------------------------------ periodic tasks

    def _append_no_op(self, now_ms: int) -> int:
        """``metadata.max.idle.interval.ms``: a NoOpRecord, so that the high watermark of an idle
        quorum advances and followers see that the leader lives."""
        if not self.stopping:
            self._append([(NoOpRecord(), 0)], None, drain_now=False, ahead=False)  # it changes nothing
        return self.config.max_idle_interval_ms

    def _writing_task(
        self,
        now_ms: int,
        find_records: Callable[[OperationContext], tuple[list[Record], bool]],
        interval_ms: int,
        message: str | None = None,
    ) -> int:
        """Run a task that writes (10 ms later while requests wait for every write to commit,
        or while more than :data:`MAX_UNCOMMITTED_TASK_RECORDS` records are uncommitted).
        ``find_records`` returns the records to write and whether to run again at once (it
        wrote all it may at a time, or found something to do); else the task runs again
        ``interval_ms`` later."""
        if (
            self._blocked()
            or self._waiting
            or self.active_controller() is None
            or self._write_end - self.replayed_offset > MAX_UNCOMMITTED_TASK_RECORDS
        ):
            return _RETRY_AFTER_WRITE_MS
        records, again = find_records(self._context(now_ms))
        if records:
            if message is not None:
                self.log.info(message, len(records))
            self._append(records, None)
        return 0 if again else interval_ms

    def _expire_tokens(self, now_ms: int) -> int:
        """Every ``delegation.token.expiry.check.interval.ms``: remove the delegation tokens
        whose expiry passed (``sweepExpiredDelegationTokens``)."""
        return self._writing_task(
            now_ms, lambda ctx: ctx.controller.delegation_tokens.expired(now_ms),
            self.config.tokens.expiry_check_interval_ms, "removing %d expired delegation tokens",
        )

    def _fence_stale_broker(self, now_ms: int) -> int:
        """Fence one broker whose session expired, and look again at once after one was found;
        else look again after ``broker.session.timeout.ms`` / 8 (Kafka 4.x's period) or when the
        oldest session ends, whichever comes first (Kafka 3.x's ``rescheduleMaybeFenceStaleBrokers``
        timed its check so), so that a broker is fenced as its session ends, not up to an
        eighth of the timeout later."""

        def fence(ctx: OperationContext) -> tuple[list[Record], bool]:
            records = ctx.cluster.maybe_fence_stale_broker(
                now_ms, metadata_version=ctx.metadata_version, partitions=ctx.partition_effects
            )
            if records:
                broker = next((getattr(r, "broker_id", -1) for r, _ in records if hasattr(r, "broker_id")), -1)
                self.log.info("fencing broker %d because its session has timed out (%d records)", broker, len(records))
            return (records or [], records is not None)

        interval = max(1, self.config.session_timeout_ms // 8)
        expiry = self.controller.cluster.next_session_expiry_ms()
        if expiry is not None:  # used only when no session has expired: it then lies ahead
            interval = max(1, min(interval, expiry - now_ms))
        return self._writing_task(now_ms, fence, interval)

    @staticmethod
    def _elections(elect: Callable[..., list[Record]]) -> Callable[[OperationContext], tuple[list[Record], bool]]:
        """A periodic election task: at most :data:`MAX_ELECTIONS_PER_IMBALANCE` elections,
        and at once again when it wrote that many."""

        def run(ctx: OperationContext) -> tuple[list[Record], bool]:
            records = elect(**ctx.partition_context(), max_elections=MAX_ELECTIONS_PER_IMBALANCE)
            return records, len(records) >= MAX_ELECTIONS_PER_IMBALANCE

        return run

    def _balance_leaders(self, now_ms: int) -> int:
        """Give partitions back to their preferred replicas: a pass over the imbalanced
        partitions a slice at a time (``elections.BalanceWalk``), the next slice at once, the
        next pass after ``leader.imbalance.check.interval.seconds``."""

        def run(ctx: OperationContext) -> tuple[list[Record], bool]:
            walk = self._balance_walk
            if walk is None:
                walk = self._balance_walk = elections.BalanceWalk(elections.imbalanced_partitions(ctx.image))
            records = elections.balance_partition_leaders(
                **ctx.partition_context(), max_elections=MAX_ELECTIONS_PER_IMBALANCE, walk=walk)
            if walk.done:
                self._balance_walk = None
            return records, not walk.done

        return self._writing_task(
            now_ms, run, self.config.leader_imbalance_check_interval_ms,
            "moving leadership of %d partition(s) back to their preferred replicas",
        )

    def _elect_unclean_leaders(self, now_ms: int) -> int:
        """Elect leaders for leaderless partitions of topics with unclean.leader.election.enable."""
        return self._writing_task(
            now_ms, self._elections(elections.elect_unclean_leaders), self.config.unclean_leader_election_interval_ms,
            "unclean leader election for %d leaderless partition(s)",
        )

    # ------------------------------------------------------------------ snapshots (KIP-630)

    def _maybe_snapshot(self, now_ms: int, batch: CommittedBatch) -> None:
        """Count the replayed ``batch`` toward the snapshot triggers; when one fires, snapshot
        the image as it stands after the batch behind a header holding the batch's timestamp
        and the kraft.version and voters as of its last offset (``KafkaRaftClient
        .createSnapshot``)."""
        reason = self._triggers.replayed(len(batch.data), now_ms)
        controller, raft_log = self.controller, self.raft.log
        if self._applied:
            return  # the image is ahead of the batch: the trigger stays armed
        if (
            reason is None
            or self._out.snapshot is not None
            or controller.metadata_version is None
            or controller.transaction_open
            or batch.last_offset + 1 <= raft_log.log_start_offset
        ):
            return
        snapshot_id = OffsetAndEpoch(batch.last_offset + 1, batch.epoch)
        latest = raft_log.latest_snapshot_id()
        if latest is not None and latest.offset >= snapshot_id.offset:
            return
        kraft_version, voters = self.raft.control.at_offset(batch.last_offset)
        steps = partial(
            image_snapshot_steps,
            snapshot_id,
            controller.snapshot_view(),
            last_contained_log_timestamp=RecordBatch(batch.data).max_timestamp,
            append_time_ms=now_ms,
            kraft_version=kraft_version,
            voters=voters,
        )
        self._triggers.reset(now_ms)
        self._out.snapshot = SnapshotToWrite(snapshot_id, steps, controller.image_record_estimate())
        self.log.info("node %d: creating snapshot %020d-%010d because %s", self.config.node_id, snapshot_id.offset, snapshot_id.epoch, reason)
