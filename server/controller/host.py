"""The controller host (:class:`QuorumController`): the sans-IO object that runs a node's quorum
controller beside its KRaft core, driven by the node (``server.node.driver``) and by the deterministic simulation alike.

It is what Kafka's ``QuorumController`` is around its managers: a facade that wires the jobs
below to the raft listener's events. It reads no clock and draws no randomness it is not
handed, opens no socket and touches no file. Events go in as calls; what the driver must do
comes out of :meth:`QuorumController.poll` as a :class:`ControllerOutbox`::

    driver ── commit(now, batch) ───────────────┐
           ── load_snapshot(now, id, records) ──┤
           ── append_result(result) ────────────┼──► QuorumController ── poll(now) ──► ControllerOutbox
           ── request(now, ControllerRequest) ──┘                                       raft_events, replies,
                                                                                        snapshot, next_deadline_ms

The driver calls :meth:`~QuorumController.poll` after every core Outbox it carried out (that is
where the host sees leadership change) and when ``next_deadline_ms`` comes; it steps the core
with ``raft_events`` in order before it feeds the core anything else, since a write's offsets
are computed from where those appends land. The jobs, each with its own rules:

* ``write_queue``: writes waiting for their commit, answers after writes, the write barrier
  (``DeferredEventQueue``);
* ``offset_control``: the next write offset, the records applied ahead of their commit and
  when to go back to the committed image (``OffsetControlManager``);
* ``image_loader``: a snapshot load or a revert, a slice at a time;
* ``periodic_tasks``: the NoOp, fencing, elections and token expiry, and their write gate
  (``PeriodicTaskControlManager``);
* ``snapshots``: when to snapshot the image (``SnapshotGenerator``);
* ``outbox``: the host's appends and replies for the driver;
* ``leadership``: claiming the epoch once everything before it is replayed, and renouncing it
  (``ControlManagers.claim`` / ``renounce``); the host appends the activation records;
* ``request_runner``: a request run on the image, answered at once or after the writes it saw
  (``ControllerReadEvent`` / ``ControllerWriteEvent``).

The host keeps the wiring of loads and reverts: committed batches, snapshot loads and going
back to the committed image go through it, in order, to the image and to the parts above.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kwire.errors import Errors
from messages.generated.no_op_record import NoOpRecord
from server.controller.admission import Admission
from server.controller.authorizer import StandardAuthorizer
from server.controller.cluster import ReplayError
from server.controller.controller import ControlManagers
from server.controller.errors import ApiError
from server.controller.event_times import EventTimes
from server.controller.faults import HostFaults
from server.controller.image_loader import (
    SNAPSHOT_LOAD_RECORDS_PER_POLL,
    ImageLoad,
    Revert,
    SnapshotLoad,
)
from server.controller.leadership import Leadership
from server.controller.offset_control import OffsetControl
from server.controller.operation_context import ControllerConfig, ControllerLog
from server.controller.outbox import ControllerOutbox, OutboxWriter, RaftView
from server.controller.periodic_tasks import MAX_ELECTIONS_PER_IMBALANCE, PeriodicTasks, may_write
from server.controller.registry import ControllerApi, find
from server.controller.request_runner import ControllerRequest, RequestRunner
from server.controller.result import Record
from server.controller.snapshots import SnapshotGenerator, SnapshotToWrite
from server.controller.write_queue import DeferredWriteQueue
from server.failpoints import Failpoints
from server.raft.events import AppendResult, CommittedBatch
from server.raft.types import OffsetAndEpoch

if TYPE_CHECKING:
    import random

__all__ = [
    "MAX_ELECTIONS_PER_IMBALANCE",
    "ControllerOutbox",
    "ControllerRequest",
    "QuorumController",
    "RaftView",
    "SnapshotToWrite",
]


class _SilentLog:
    def info(self, msg: str, *args: Any) -> None:
        pass

    def error(self, msg: str, *args: Any) -> None:
        pass


class QuorumController:
    """The controller of one node (module docstring).

    ``config`` holds the node's settings, ``bootstrap`` the formatted bootstrap records
    (``(record, version)``, metadata.version among them), ``raft`` the core it sits beside,
    ``now_ms`` the time it starts at. ``rng`` places replicas and draws topic ids; ``log``
    takes its INFO and ERROR lines; ``logger_levels`` lists the node's loggers for
    DescribeConfigs; ``perf_counter`` (seconds) times each request's processing for the
    EventQueueProcessingTimeMs metric only (None: not timed). ``failpoints`` holds the points
    armed on this node (``server.failpoints``; default: none armed, drawing from ``rng``).
    """

    def __init__(
        self,
        config: ControllerConfig,
        *,
        bootstrap: Sequence[Record],
        raft: RaftView,
        now_ms: int,
        rng: random.Random,
        log: ControllerLog | None = None, logger_levels: Callable[[], Mapping[str, str]] = dict,
        perf_counter: Callable[[], float] | None = None, failpoints: Failpoints | None = None,
    ) -> None:
        self.config = config
        self.failpoints = failpoints if failpoints is not None else Failpoints(rng.random)
        """The failpoints armed on this node (``server.controller.faults``)."""
        self._faults = HostFaults(self.failpoints)
        self.raft = raft
        self.rng = rng
        self.log: ControllerLog = log if log is not None else _SilentLog()
        self.controller = ControlManagers(bootstrap=bootstrap, min_insync_replicas=config.min_insync_replicas,
                                           cluster_id=config.cluster_id, session_timeout_ms=config.session_timeout_ms)
        self.replayed_offset = 0
        """The offset after the last committed batch (or snapshot) replayed."""
        self.authorizer = StandardAuthorizer(config.super_users, config.allow_everyone_if_no_acl_found)
        """Decides requests on the ACLs when ``authorizer.class.name`` is set
        (``server.controller.authorizer``)."""
        self.admission = Admission(config, self.authorizer, lambda: self.controller.acls.bindings(), self.log)
        """What a request meets before its operation (``server.controller.admission``)."""
        self.stopping = False
        """The node is stopping: no activation and no NoOps any more."""
        self._snapshots = SnapshotGenerator(config.node_id, config.snapshot_max_bytes, config.snapshot_max_interval_ms,
                                            now_ms, self.log)
        self._queue: DeferredWriteQueue[ControllerRequest] = DeferredWriteQueue()
        """Uncommitted writes and the answers and requests waiting for them."""
        self._offsets = OffsetControl()
        """The next write offset and the records applied ahead of their commit."""
        self._now_ms = now_ms
        """The time of the latest call that gave one."""
        self._loading: ImageLoad | None = None
        """The image being rebuilt a slice at a time (a snapshot load, or a revert)."""
        self.load_records_per_poll = SNAPSHOT_LOAD_RECORDS_PER_POLL
        """Records :meth:`load_snapshot`, a revert and each :meth:`poll` replay at most."""
        self._writer = OutboxWriter(raft, self._offsets, self._queue, self._replay)
        self._leadership = Leadership(config.node_id, raft, self.controller, self, self._offsets, self._queue,
                                      revert=self._revert)
        self._runner = RequestRunner(self, self._leadership, self._offsets, self._queue, self._writer,
                                     logger_levels=logger_levels, perf_counter=perf_counter)
        self.queue_times: EventTimes = self._runner.queue_times
        """``ControllerEventManager`` EventQueueTimeMs: arrival to the start of handling."""
        self.processing_times: EventTimes = self._runner.processing_times
        """``ControllerEventManager`` EventQueueProcessingTimeMs: the handling itself."""
        self._tasks = PeriodicTasks(config, self.controller, self.log, gate=self._may_write, context=self._runner.context,
                                    write=lambda records: self._writer.append(records, None), write_no_op=self._append_no_op)
        if config.unsafe_ack_on_append:
            self.log.error("kwire.unsafe.test.ack.on.append=true: writes are acknowledged before they commit "
                           "(TEST ONLY; acknowledged writes can be lost)")

    # ------------------------------------------------------------------ events

    def commit(self, now_ms: int, batch: CommittedBatch) -> None:
        """A batch now wholly committed, in offset order: its data records are replayed (a
        record that does not fit the image is logged at ERROR and skipped, as Kafka's controller
        counts a metadata fault), then the snapshot triggers and the writes it completes."""
        self._now_ms = now_ms
        if (self.failpoints.armed or self._faults.holding) and self._faults.hold_commit(now_ms, batch):
            return
        self._deliver(now_ms, batch)

    def _deliver(self, now_ms: int, batch: CommittedBatch) -> None:
        if self._loading is not None:
            self._loading.committed.append(batch)  # after the whole snapshot
            return
        self._commit(now_ms, batch)

    def _commit(self, now_ms: int, batch: CommittedBatch) -> None:
        """Replay ``batch`` on the image as it stands (a batch held during a load comes here
        from the loader, not through :meth:`commit`)."""
        offsets = self._offsets
        if offsets.speculating and not offsets.still_ours(self._leadership.leader_epoch(), batch):
            self._revert(now_ms, f"batch {batch.base_offset}-{batch.last_offset} of epoch {batch.epoch} committed")
            if self._loading is not None:
                self._loading.committed.append(batch)  # after the committed image is whole again
                return
        if not batch.is_control:
            offsets.replay_committed(batch, self._replay)
        self.replayed_offset = batch.last_offset + 1
        snapshot = self._snapshots.replayed(now_ms, batch, self.controller, self.raft.log, self.raft.control,
                                            hold=offsets.speculating or self._writer.out.snapshot is not None)
        if snapshot is not None:
            self._writer.out.snapshot = snapshot
        if self._queue.pending:
            self._queue.complete_up_to(batch.last_offset)

    def _replay(self, value: bytes | None, offset: int, how: str = "committed") -> None:
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
        return self._offsets.speculating

    def _revert(self, now_ms: int, reason: str) -> None:
        """Go back to the committed image: the records applied ahead of their commit may never
        commit (Kafka's ``ControlManagers.renounce`` reverts its timeline data structures to
        the last committed offset). The image is rebuilt from the latest snapshot and the
        committed log after it, up to ``replayed_offset``, a slice at a time as a loaded
        snapshot is (:meth:`load_snapshot`); sessions start afresh if this node is still the
        active controller then."""
        end = self.replayed_offset
        self.log.info("node %d: going back to the committed image at offset %d: %s", self.config.node_id, end, reason)
        self._offsets.clear()
        controller = self.controller
        sessions = controller.cluster.heartbeats is not None
        controller.cluster.deactivate()
        assert self._loading is None, "nothing is applied ahead while an image is rebuilt"
        self._loading = Revert.from_log(self.raft.log, end, now_ms, reactivate=sessions)
        controller.reset((), self._loading.snapshot_id.offset - 1)
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
        self._faults.drop_commits_before(snapshot_id.offset)
        self.controller.reset((), snapshot_id.offset - 1)
        self.replayed_offset = 0
        self._offsets.clear()  # a leader never loads one: nothing was applied ahead
        self._writer.out.snapshot = None  # of an image the loaded one replaces
        self._snapshots.loaded(now_ms)
        held = self._loading.requests if self._loading is not None else ()
        self._loading = SnapshotLoad(snapshot_id, record_values, now_ms, requests=held)
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
        load = self._loading
        assert load is not None
        budget = self.load_records_per_poll
        if not load.whole:
            left = load.replay_slice(budget, self.controller.replay, self._replay)
            self.replayed_offset = load.replayed_offset
            if left is None:
                return
            budget, load.whole = left, True
            self.log.info("node %d: %s at offset %d: %d records in %d ms", self.config.node_id, load.describe,
                          self.replayed_offset, load.replayed, now_ms - load.started_ms)
            if isinstance(load, SnapshotLoad):
                self._writer.out.loaded = load.snapshot_id
            if isinstance(load, Revert) and load.reactivate and self._leadership.claimed():
                self.controller.cluster.activate(now_ms)
        for batch in load.take_held(budget):
            self._commit(now_ms, batch)
            if self._loading is not load:
                return  # it went back to the committed image: the rest waits for that one
        if load.committed:
            return
        self._loading = None
        for request in load.requests:
            self._arrived(now_ms, request, find(request.body))  # type: ignore[arg-type]

    def append_result(self, result: AppendResult) -> bool:
        """Where one of the host's appends will land, or why it was refused (its write is then
        answered NOT_CONTROLLER); False when ``result`` is not for one of the host's appends."""
        if result.token >= 0:
            return False
        applied = self._offsets.misplaced(result)
        if applied is not None:
            self.log.error("node %d: append %d applied ahead at offset %d came back as %s", self.config.node_id,
                           result.token, applied.first, result)
            self._revert(self._now_ms, "an append applied ahead did not land where it was applied")
            self._queue.barrier = True
        if result.error_code != Errors.NONE:
            self._queue.refused(result.token, self._leadership.not_controller())
        else:  # TEST ONLY (KRaftConfig.unsafe_test_ack_on_append): answered before the commit
            self._queue.landed(result.token, result.last_offset, ack=self.config.unsafe_ack_on_append)
        return True  # activation records and NoOps: nothing waits for them

    def request(self, now_ms: int, request: ControllerRequest) -> None:
        """A controller RPC (one that ``server.controller.registry`` lists; raises KeyError for
        another): a read is answered at once; a write runs now, or waits behind the writes
        before it while this node is the active controller."""
        self._now_ms = now_ms
        api = find(request.body)
        if api is None:
            raise KeyError(f"not a controller RPC: {type(request.body).__name__}")
        if self.failpoints.armed and self._faults.taken(now_ms, request, api, self._writer.reply):
            return
        self._arrived(now_ms, request, api)

    def _arrived(self, now_ms: int, request: ControllerRequest, api: ControllerApi) -> None:
        if self._loading is not None:
            self._loading.requests.append(request)  # it runs on the whole image
            return
        self._runner.arrived(now_ms, request, api)

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
        if self._faults.holding:
            self._faults.release(now_ms, self._deliver, self._arrived)
        self._queue.lower_barrier_if_idle()
        while self._loading is None and (request := self._queue.next_waiting()) is not None:
            api = find(request.body)
            assert api is not None
            self._runner.run(now_ms, request, api)
        self._tasks.poll(now_ms, claimed=self._leadership.claimed(), run=run_tasks and self._loading is None)
        out = self._writer.take()
        due = self._tasks.next_deadline_ms()
        if self._loading is not None:
            due = now_ms if due is None else min(due, now_ms)  # the next slice
        out.next_deadline_ms = self._faults.next_deadline_ms(due) if self._faults.holding else due
        return out

    # ------------------------------------------------------------------ leadership

    def active_controller(self) -> ControlManagers | None:
        """The controller while this node is the active one and has replayed a
        metadata.version (``Leadership.active_controller``)."""
        return self._leadership.active_controller()

    def not_controller(self) -> ApiError:
        """NOT_CONTROLLER naming the leader, or none while this node leads without being the
        active controller yet."""
        return self._leadership.not_controller()

    def _follow_leadership(self, now_ms: int) -> None:
        """Claim or renounce (``Leadership.follow``); a claim starts the periodic tasks and
        appends the activation records as one batch (atomic activations stay whole)."""
        activation = self._leadership.follow(now_ms)
        if activation is None:
            return
        self._tasks.activate(now_ms)
        if activation.records:
            self._writer.append(activation.records, None, drain_now=False)

    # ------------------------------------------------------------------ periodic tasks

    def _append_no_op(self) -> None:
        """A NoOpRecord (``metadata.max.idle.interval.ms``), so that the high watermark of an idle
        quorum advances and followers see that the leader lives; none once the node stops."""
        if not self.stopping:
            self._writer.append([(NoOpRecord(), 0)], None, drain_now=False, ahead=False)  # it changes nothing

    def _may_write(self) -> bool:
        """The periodic tasks' write gate (``server.controller.periodic_tasks.may_write``)."""
        return may_write(blocked=self._queue.blocked, requests_waiting=bool(self._queue.waiting),
                         active=self._leadership.active_controller() is not None,
                         uncommitted=self._offsets.uncommitted(self.replayed_offset))
