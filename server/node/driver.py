"""The Trio driver that owns the KRaft core and carries out its Outboxes: :class:`Node`.

One task (:meth:`Node._drive`) owns the :class:`~server.raft.core.RaftCore`. Everything that
happens to the node reaches it as an item on one memory channel::

    server.net connections ──► ChannelDispatcher ──► PendingRequest ─┐
    outbound peer tasks (one per destination) ──► ResponseReceived / │
                                                  RequestFailed ─────┼──► _drive ──► core.step
    shutdown() ──► Resign ───────────────────────────────────────────┘      │
                     timer (next_deadline_ms) ──► Tick ─────────────────────┘

Appends that queued on the channel while the node waited on the disk or the network go to the
core together (``RaftCore.step_many``): one step, one Outbox, one batch at any linger.

Each Outbox is carried out by ``server.raft.outbox.apply`` (the one applier, with the order
of the Outbox contract); the node is its ``OutboxTarget``: the election state goes to
quorum-state (tmp + fsync + rename) first, log changes and the fsync run off the event loop,
sends go to the :class:`~server.node.peer.Peer` tasks, replies complete the pending requests,
and a loaded snapshot or committed batches update the finalized features and the listener.

Every file operation runs through ``trio.to_thread`` (DESIGN rule 3), one at a time, from the
driving task, so the log (not thread-safe) sees a single caller. A failed write, fsync or a
broken log invariant raises out of :meth:`Node.run`: the node stops without sending anything
that the failed write would have had to precede (DESIGN rule 6).
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

import trio

from kwire.errors import Errors
from kwire.negotiation import UnsupportedVersionError
from kwire.uuid import Uuid
from messages.generated.describe_cluster_request import DescribeClusterRequest
from messages.generated.describe_configs_request import DescribeConfigsRequest
from messages.generated.envelope_request import EnvelopeRequest
from messages.generated.envelope_response import EnvelopeResponse
from messages.generated.no_op_record import NoOpRecord
from messages.metadata import encode_record
from messages.protocol import Request
from server.config import KRaftConfig
from server.controller.cluster import ReplayError
from server.controller.controller import QuorumController
from server.controller.describe_configs import NodeConfigView, describe_configs
from server.controller.features import (
    CONTROLLER_REGISTRATION_LEVEL,
)
from server.net import ChannelDispatcher, PendingRequest, RunningServer, serve
from server.node.apis import api_versions, describe_cluster, supported_features
from server.node.controller_apis import (
    SECURITY_PROTOCOL_IDS,
    registration_request,
)
from server.node.controller_requests import CONTROLLER_OPS, ControllerRequests, Resume
from server.node.envelope import envelope_response, open_envelope
from server.node.features import finalized_features
from server.node.peer import Peer
from server.node.snapshots import SnapshotTriggers
from server.node.startup import load_stored_state, to_stored_election
from server.raft.control import voters_record
from server.raft.core import RaftCore
from server.raft.events import (
    AppendResult,
    ClientAppend,
    CommittedBatch,
    Event,
    FlushCompleted,
    OutboundRequest,
    Outbox,
    Reply,
    RequestFailed,
    RequestReceived,
    Resign,
    ResponseReceived,
    Tick,
)
from server.raft.outbox import apply as apply_outbox
from server.raft.outbox import apply_log_changes, flush_follows_write
from server.raft.roles import Leader, Resigned
from server.raft.types import (
    ElectionState,
    Endpoint,
    LeaderAndEpoch,
    OffsetAndEpoch,
    ReplicaIdentity,
)
from server.storage_raft_log import StorageRaftLog
from storage.log import MetadataLog
from storage.quorum_state import FileQuorumStateStore
from storage.records import RecordBatch
from storage.snapshots import SnapshotId, build_snapshot_batches, read_snapshot

__all__ = ["Node", "RaftListener"]

T = TypeVar("T")
log = logging.getLogger("kwire.node")

_REGISTRATION_BACKOFF_MS = (100, 120_000)
"""``ControllerRegistrationManager``'s resend backoff: 100 ms doubling up to 2 minutes."""


class RaftListener(Protocol):
    """A local state machine fed by the node (Kafka's ``RaftClient.Listener``). Called from the
    driving task, in order, after the Outbox that produced the news was executed; a listener
    must not block (post work to its own task instead)."""

    def handle_append_result(self, result: AppendResult) -> None:
        """Where an append made with :meth:`Node.append` will land, or why it was refused."""

    def handle_commit(self, batch: CommittedBatch) -> None:
        """One batch (control batches included) now wholly below the high watermark, each
        exactly once and in offset order."""

    def handle_leader_change(self, leader: LeaderAndEpoch) -> None:
        """The leader or epoch this node knows of changed."""


class Node:
    """A KRaft controller node serving ``config``'s listeners.

    ``await node.run(task_status=...)`` starts it (``nursery.start`` gets the node once its
    listeners are bound and the core is running) and returns after :meth:`shutdown` or
    :meth:`stop`. Raises :class:`~server.node.startup.NodeStartupError` for a directory it
    cannot start from and storage errors (``KafkaStorageError``, ``LogInvariantError``) when
    the node must stop.

    ``rng`` seeds the election timeouts; ``run_blocking`` runs file I/O off the event loop
    (default ``trio.to_thread.run_sync``); ``listener`` is told of appends, commits and
    leader changes.
    """

    def __init__(
        self,
        config: KRaftConfig,
        *,
        rng: random.Random | None = None,
        run_blocking: Callable[[Callable[[], Any]], Awaitable[Any]] | None = None,
        listener: RaftListener | None = None,
    ) -> None:
        self.config = config
        self.listener = listener
        self.rng = rng or random.Random()
        self._run_blocking = run_blocking
        self.core: RaftCore | None = None
        self.running: RunningServer | None = None
        self.cluster_id: str | None = None
        self.directory_id: Uuid | None = None
        self.metadata_log: MetadataLog | None = None
        self._raft_log: StorageRaftLog | None = None
        self._store: FileQuorumStateStore | None = None
        self._events_send, self._events_receive = trio.open_memory_channel[Any](math.inf)
        self._pending: dict[int, PendingRequest] = {}
        self._next_request_id = 1
        self._peers: dict[int, Peer] = {}
        self._in_flight = 0
        self._nursery: trio.Nursery | None = None
        self._cancel_scope = trio.CancelScope()
        self._deadline_ms: int | None = None
        self._wall_base_ms = 0
        self._trio_base = 0.0
        self.controller: QuorumController | None = None
        self._replayed_offset = 0
        """The offset after the last committed batch (or snapshot) the controller replayed."""
        self.metrics_port: int | None = None
        """The port metrics are served on, once they are (``kwire.prometheus.port``)."""
        self._snapshot_triggers: SnapshotTriggers | None = None
        self._pending_snapshot: tuple[OffsetAndEpoch, bytes] | None = None
        """A snapshot of the image, built when a trigger fired, to write off the event loop."""
        self._next_clean_ms: int | None = None
        self._held: Any = None
        """An item taken off the event channel while collecting queued appends, handled next."""
        self._flushed = False
        self._written_durably = False
        """This Outbox's log changes were fsynced with their write (:meth:`write_log`)."""
        self._features_seen = False
        """Committed data or a snapshot arrived in this Outbox: publish the features again."""
        self._dispatcher: ChannelDispatcher | None = None
        self._stopping = False
        self._resigned = trio.Event()
        self._idle = trio.Event()
        self._next_no_op_ms: int | None = None
        self._next_token = 1
        self._own_tokens: set[int] = set()
        self._known_leader: LeaderAndEpoch | None = None
        self._known_role: tuple[str, int, int | None, bool] | None = None
        self._requests = ControllerRequests(self, step=self._step, post=self._post, take_token=self._take_token)
        """The active controller's requests (``server.node.controller_requests``)."""
        self.incarnation_id = Uuid.random()
        """This run's controller incarnation (KIP-919 registration)."""
        self._registration_wakeup = trio.Event()
        self._registered_in_epoch: int | None = None
        """The leader epoch whose controller accepted this incarnation's registration: no
        resend while that epoch lasts (its record is on its way to the log)."""

    # ------------------------------------------------------------------ time

    def now_ms(self) -> int:
        """Wall-clock milliseconds that never go backwards: the wall clock at start plus the
        Trio clock since (so a test's virtual clock drives the core)."""
        # round, not truncate: a deadline converted to Trio time must read back as the same
        # millisecond when it fires, or the driver would spin on an early Tick
        return self._wall_base_ms + round((trio.current_time() - self._trio_base) * 1000)

    def _trio_time(self, at_ms: int) -> float:
        return self._trio_base + (at_ms - self._wall_base_ms) / 1000

    # ------------------------------------------------------------------ public view

    @property
    def leader_id(self) -> int | None:
        """The leader this node knows of, None before start-up or while there is none."""
        return None if self.core is None else self.core.leader_and_epoch.leader_id

    @property
    def epoch(self) -> int | None:
        """The node's current leader epoch, None before start-up."""
        return None if self.core is None else self.core.epoch

    @property
    def port(self) -> int:
        """The bound port of the first controller listener (once :meth:`run` started)."""
        assert self.running is not None
        return self.running.port(self.config.controller_listener_names[0])

    @property
    def endpoints(self) -> tuple[Endpoint, ...]:
        """The controller endpoints this node advertises, with bound ports for port 0."""
        result = []
        for listener in self.config.controller_endpoints():
            port = listener.port
            if port == 0 and self.running is not None:
                port = self.running.port(listener.name)
            result.append(Endpoint(listener.name, listener.host or "localhost", port))
        return tuple(result)

    # ------------------------------------------------------------------ running

    async def _blocking(self, fn: Callable[[], T]) -> T:
        if self._run_blocking is not None:
            result: T = await self._run_blocking(fn)
            return result
        return await trio.to_thread.run_sync(fn)

    async def run(self, *, task_status: trio.TaskStatus[Node] = trio.TASK_STATUS_IGNORED) -> None:
        """Start up, serve and drive the core until stopped (see the class docstring)."""
        self._wall_base_ms = time.time_ns() // 1_000_000
        self._trio_base = trio.current_time()
        self._snapshot_triggers = SnapshotTriggers(
            self.config.metadata_log_max_record_bytes_between_snapshots,
            self.config.metadata_log_max_snapshot_interval_ms,
            self.now_ms(),
        )
        self._next_clean_ms = self.now_ms() + self.config.metadata_log_clean_interval_ms
        stored = await self._blocking(lambda: load_stored_state(self.config))
        self.metadata_log = metadata_log = stored.metadata_log
        self._store = stored.store
        self.cluster_id = stored.cluster_id
        self.directory_id = stored.directory_id
        self.controller = QuorumController(
            bootstrap=stored.bootstrap.records,
            min_insync_replicas=self.config.min_insync_replicas,
            cluster_id=stored.cluster_id,
            session_timeout_ms=self.config.broker_session_timeout_ms,
        )
        request_send, request_receive = trio.open_memory_channel[PendingRequest](0)
        self._dispatcher = ChannelDispatcher(api_versions(), request_send, supported_features())
        try:
            with self._cancel_scope:
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    self.running = await nursery.start(serve, self.config, self._dispatcher)
                    self._raft_log = StorageRaftLog(metadata_log)
                    self.core = RaftCore(
                        identity=ReplicaIdentity(
                            node_id=self.config.node_id,
                            directory_id=stored.directory_id,
                            cluster_id=stored.cluster_id,
                            endpoints=self.endpoints,
                            supported_kraft_versions=(0, 1),
                        ),
                        log=self._raft_log,
                        voters=stored.voters,
                        rng=self.rng,
                        now_ms=self.now_ms(),
                        election=stored.election,
                        kraft_version=stored.kraft_version,
                        config=self.config.quorum_config(),
                        bootstrap_servers=[
                            Endpoint(self.config.controller_listener_names[0], b.host, b.port)
                            for b in self.config.controller_quorum_bootstrap_servers
                        ],
                    )
                    nursery.start_soon(self._forward_requests, request_receive)
                    nursery.start_soon(self._register_controller)
                    if self.config.prometheus_port is not None:
                        nursery.start_soon(self._serve_metrics)
                    # The first step writes the election state the core starts in.
                    await self._step(Tick())
                    task_status.started(self)
                    await self._drive()
        finally:
            for pending in self._pending.values():
                if not pending.done:
                    pending.fail(RuntimeError("the node stopped"))
            self._pending.clear()
            with trio.CancelScope(shield=True):
                await self._blocking(metadata_log.close)

    async def _serve_metrics(self) -> None:
        """``kwire.prometheus.port``: serve the metrics (``server.node.metrics``), a new
        snapshot of them every second, until the node stops."""
        from server.node.metrics import MetricsServer, take_snapshot

        assert self.config.prometheus_port is not None
        server = MetricsServer(self.config.prometheus_host, self.config.prometheus_port)
        self.metrics_port = server.port
        log.info("serving metrics on %s:%d", self.config.prometheus_host, server.port)
        try:
            while True:
                active = self._requests.active_controller() is not None
                events = {
                    "EventQueueTimeMs": self._requests.queue_times.summary(),
                    "EventQueueProcessingTimeMs": self._requests.processing_times.summary(),
                }
                server.update(take_snapshot(
                    self.core, self.controller, active=active, applied_offset=self._replayed_offset - 1, events=events
                ))
                await trio.sleep(1)
        finally:
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(server.close)

    async def _forward_requests(self, receive: trio.MemoryReceiveChannel[PendingRequest]) -> None:
        async for pending in receive:
            self._post(pending)

    def _post(self, item: Any) -> None:
        try:
            self._events_send.send_nowait(item)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    async def _drive(self) -> None:
        while True:
            timers = (
                self._deadline_ms, self._next_no_op_ms, self._requests.next_check_ms,
                self._requests.next_balance_ms, self._requests.next_unclean_ms, self._next_clean_ms,
            )
            due = [d for d in timers if d is not None]
            deadline = self._trio_time(min(due)) if due else math.inf
            item: Any = Tick()
            if self._held is not None:
                item, self._held = self._held, None
            else:
                with trio.move_on_at(deadline):
                    item = await self._events_receive.receive()
            if self._next_no_op_ms is not None and self.now_ms() >= self._next_no_op_ms:
                await self._append_no_op()
            check_at = self._requests.next_check_ms
            if check_at is not None and self.now_ms() >= check_at:
                await self._requests.check_sessions()
            balance_at = self._requests.next_balance_ms
            if balance_at is not None and self.now_ms() >= balance_at:
                await self._requests.balance_leaders()
            unclean_at = self._requests.next_unclean_ms
            if unclean_at is not None and self.now_ms() >= unclean_at:
                await self._requests.elect_unclean_leaders()
            if isinstance(item, PendingRequest):
                await self._on_request(item)
            elif isinstance(item, Resume):
                await self._requests.resume()
            elif isinstance(item, ClientAppend):
                await self._step_many([item, *self._queued_appends()])
            else:
                if isinstance(item, (ResponseReceived, RequestFailed)):
                    self._in_flight -= 1
                    if self._in_flight == 0:
                        self._idle.set()
                await self._step(item)
            if self._pending_snapshot is not None:
                await self._write_snapshot()
            if self._next_clean_ms is not None and self.now_ms() >= self._next_clean_ms:
                await self._clean_log()

    async def _on_request(self, pending: PendingRequest) -> None:
        request = pending.request
        body = request.body
        version = request.header.request_api_version
        if isinstance(body, DescribeClusterRequest):
            core, cluster_id, controller = self.core, self.cluster_id, self.controller
            assert core is not None and cluster_id is not None and controller is not None
            pending.respond(
                describe_cluster(
                    body,
                    version,
                    pending.context.listener_name,
                    cluster_id=cluster_id,
                    metadata_version=controller.metadata_version,
                    controllers=controller.controllers,
                    leader_id=core.leader_and_epoch.leader_id,
                )
            )
            return
        if isinstance(body, DescribeConfigsRequest):
            controller = self.controller
            assert controller is not None
            view = NodeConfigView(self.config.node_id, controller.replication, self.config.raw)
            pending.respond(describe_configs(body, view))
            return
        if isinstance(body, CONTROLLER_OPS):
            await self._requests.handle(pending)
            return
        if isinstance(body, EnvelopeRequest):
            await self._on_envelope(pending, body)
            return
        request_id = self._next_request_id
        self._next_request_id += 1
        self._pending[request_id] = pending
        await self._step(RequestReceived(request_id, version, body, pending.context.listener_name))

    async def _on_envelope(self, pending: PendingRequest, body: EnvelopeRequest) -> None:
        """A request a broker forwarded (``server.node.envelope``): answered as if the client
        had sent it here, the answer wrapped in the EnvelopeResponse."""
        assert self._dispatcher is not None and self._nursery is not None
        forwarded = open_envelope(body, self._dispatcher.api_versions())
        if not isinstance(forwarded, Request):
            pending.respond(EnvelopeResponse(error_code=forwarded))
            return
        inner = PendingRequest(forwarded, pending.context)
        self._nursery.start_soon(self._relay_envelope, pending, inner)
        await self._on_request(inner)

    @staticmethod
    async def _relay_envelope(outer: PendingRequest, inner: PendingRequest) -> None:
        try:
            response = await inner.wait()
        except Exception as exc:  # the forwarded request failed: so does its envelope
            if not outer.done:
                outer.fail(exc)
            return
        if not outer.done:
            outer.respond(envelope_response(inner.request, response))

    # ------------------------------------------------------------------ controller writes

    def _needs_registration(self) -> bool:
        """``ControllerRegistrationManager.maybeSendControllerRegistration``: metadata.version
        3.7-IV0 or later is known and this incarnation is not registered in the log yet."""
        controller = self.controller
        if controller is None or self._stopping:
            return False
        level = controller.metadata_version
        if level is None or level < CONTROLLER_REGISTRATION_LEVEL:
            return False
        current = controller.controllers.get(self.config.node_id)
        if current is not None and current.incarnation_id == self.incarnation_id:
            return False
        return self.core is not None and self.core.epoch != self._registered_in_epoch

    def _leader_address(self) -> tuple[str, int] | None:
        core = self.core
        if core is None:
            return None
        leader = core.leader_and_epoch.leader_id
        if leader is None:
            return None
        node = core.voters.get(leader)
        endpoint = None if node is None else node.endpoint(self.config.controller_listener_names[0])
        return None if endpoint is None else (endpoint.host, endpoint.port)

    async def _register_controller(self) -> None:
        """Register this controller with the active controller (KIP-919) whenever the log lacks
        this incarnation's registration, as every Kafka controller does; failures back off
        exponentially (100 ms to 2 min)."""
        from server.net.client import KafkaConnectionError, open_connection

        failures = 0
        while True:
            await self._registration_wakeup.wait()
            self._registration_wakeup = trio.Event()
            address = self._leader_address()
            if address is None or not self._needs_registration():
                continue
            assert self.core is not None
            epoch = self.core.epoch
            body = registration_request(
                self.config.node_id,
                self.incarnation_id,
                [
                    (e.name, e.host, e.port, SECURITY_PROTOCOL_IDS.get(self.config.listener_security_protocol_map.get(e.name, "PLAINTEXT"), 0))
                    for e in self.endpoints
                ],
                {f.name: (f.min_version, f.max_version) for f in supported_features()},
            )
            try:
                conn = await open_connection(address[0], address[1], client_id=f"controller-{self.config.node_id}-registration")
                try:
                    response = await conn.request(body)
                finally:
                    await conn.aclose()
                error = Errors.of(response.error_code)
            except (OSError, KafkaConnectionError, UnsupportedVersionError) as exc:
                # unreachable, gone, or a leader without ControllerRegistration: try again later
                log.debug("controller registration with %s failed: %s", address, exc)
                failures += 1
            else:
                if error == Errors.NONE:
                    failures = 0
                    self._registered_in_epoch = epoch  # registered once the record is replayed
                    continue
                log.info("controller registration answered %s", error.name)
                failures += 1
            low, high = _REGISTRATION_BACKOFF_MS
            await trio.sleep(min(high, low * 2 ** min(failures - 1, 20)) / 1000)
            self._registration_wakeup.set()

    def _queued_appends(self) -> list[ClientAppend]:
        """The appends already waiting on the channel, up to the first other item (held for the
        next turn of the loop): they queued while the node waited on the disk or the network,
        and go to the core in one step, so that they leave in one batch at any linger."""
        appends: list[ClientAppend] = []
        while True:
            try:
                item = self._events_receive.receive_nowait()
            except trio.WouldBlock:
                return appends
            if not isinstance(item, ClientAppend):
                self._held = item
                return appends
            appends.append(item)

    async def _step(self, event: Event) -> None:
        """Step the core with ``event`` and execute the Outbox, then every follow-up step (a
        completed flush) until nothing is left to do now."""
        await self._step_many([event])

    async def _step_many(self, events: list[Event]) -> None:
        """As :meth:`_step`, for ``events`` fed to the core in one step (``RaftCore.step_many``)."""
        core = self.core
        assert core is not None
        while await self._execute(core.step_many(self.now_ms(), events)):
            events = [FlushCompleted()]

    async def _execute(self, out: Outbox) -> bool:
        """Apply one Outbox through ``server.raft.outbox``; True when a flush completed."""
        self._flushed = False
        self._written_durably = False
        self._features_seen = False
        await apply_outbox(out, self)
        return self._flushed

    # ------------------------------------------------------------------ OutboxTarget

    async def persist_election(self, election: ElectionState) -> None:
        """quorum-state, written and fsynced off the event loop."""
        core, store = self.core, self._store
        assert core is not None and store is not None
        state = to_stored_election(election, core.voters)
        await self._blocking(lambda: store.write_election_state(state, core.kraft_version))

    async def write_log(self, out: Outbox) -> None:
        """The log changes, in one trip off the event loop. When the Outbox also flushes and
        sends or answers nothing in between (a follower's fetched batches), the fsync rides the
        same trip and :meth:`flush` has nothing left to do: one thread hand-off per batch."""
        raft_log = self._raft_log
        assert raft_log is not None
        if flush_follows_write(out):
            def write_and_flush() -> None:
                apply_log_changes(raft_log, out)
                raft_log.flush()

            await self._blocking(write_and_flush)
            self._written_durably = True
            return
        await self._blocking(lambda: apply_log_changes(raft_log, out))

    def send(self, request: OutboundRequest) -> None:
        """Hand the request to the destination's peer task (started on first use)."""
        peer = self._peers.get(request.destination_id)
        if peer is None:
            client_id = f"raft-client-{self.config.node_id}"
            peer = Peer(request.destination_id, self._post, client_id)
            self._peers[request.destination_id] = peer
            assert self._nursery is not None
            self._nursery.start_soon(peer.run)
        self._in_flight += 1
        peer.send.send_nowait(request)

    def reply(self, reply: Reply) -> None:
        """Answer the pending request, unless its connection went away."""
        pending = self._pending.pop(reply.request_id, None)
        if pending is not None and not pending.done:
            pending.respond(reply.response)

    async def flush(self) -> None:
        """fsync the log off the event loop (unless :meth:`write_log` already did); the core
        hears of it in a FlushCompleted step."""
        raft_log = self._raft_log
        assert raft_log is not None
        if not self._written_durably:
            await self._blocking(raft_log.flush)
        self._flushed = True

    async def load_snapshot(self, snapshot_id: OffsetAndEpoch) -> None:
        """The controller starts again from the snapshot's records."""
        metadata_log, controller = self.metadata_log, self.controller
        assert metadata_log is not None and controller is not None
        snapshot = SnapshotId(snapshot_id.offset, snapshot_id.epoch)
        content = await self._blocking(lambda: read_snapshot(metadata_log.dir, snapshot))
        controller.reset(content.data_records(), snapshot_id.offset - 1)
        self._replayed_offset = snapshot_id.offset
        self._pending_snapshot = None  # of an image the loaded one replaces
        assert self._snapshot_triggers is not None
        self._snapshot_triggers.reset(self.now_ms())
        self._features_seen = True
        self._maybe_notify_leader()

    def commit(self, batch: CommittedBatch) -> None:
        """The controller replays the batch's records, then the listener hears of it."""
        controller = self.controller
        assert controller is not None
        if not batch.is_control:
            for offset, value in enumerate(RecordBatch(batch.data).iter_values(), batch.base_offset):
                try:
                    controller.replay(value, offset)
                except ReplayError as exc:  # Kafka's controller counts a metadata fault
                    log.error("skipped a committed record at offset %d: %s", offset, exc)
        self._replayed_offset = batch.last_offset + 1
        self._maybe_prepare_snapshot(batch)
        self._features_seen = True
        if self._requests.writes:
            self._requests.finish_writes(batch.last_offset)
        self._maybe_notify_leader()
        if self.listener is not None:
            self.listener.handle_commit(batch)

    # ------------------------------------------------------------------ snapshots (KIP-630)

    def _maybe_prepare_snapshot(self, batch: CommittedBatch) -> None:
        """Count the replayed ``batch`` toward the snapshot triggers (``server.node.snapshots``);
        when one fires, build the snapshot of the image as it stands after the batch: the
        controller's records (``QuorumController.snapshot_records``) behind a header holding the
        batch's timestamp, with the kraft.version and voters as of its last offset
        (``KafkaRaftClient.createSnapshot``). None while one waits to be written, without a
        metadata.version, inside a metadata transaction, or at or below the log start."""
        triggers, controller, core, raft_log = self._snapshot_triggers, self.controller, self.core, self._raft_log
        assert triggers is not None and controller is not None and core is not None and raft_log is not None
        reason = triggers.replayed(len(batch.data), self.now_ms())
        if (
            reason is None
            or self._pending_snapshot is not None
            or controller.metadata_version is None
            or controller.transaction_open
            or batch.last_offset + 1 <= raft_log.log_start_offset
        ):
            return
        snapshot_id = OffsetAndEpoch(batch.last_offset + 1, batch.epoch)
        latest = raft_log.latest_snapshot_id()
        if latest is not None and latest.offset >= snapshot_id.offset:
            return
        kraft_version, voters = core.control.at_offset(batch.last_offset)
        records = [encode_record(record, version) for record, version in controller.snapshot_records()]
        data = b"".join(
            build_snapshot_batches(
                SnapshotId(snapshot_id.offset, snapshot_id.epoch),
                last_contained_log_timestamp=RecordBatch(batch.data).max_timestamp,
                records=records,
                append_time_ms=self.now_ms(),
                kraft_version=kraft_version,
                voters=voters_record(voters) if kraft_version >= 1 else None,
            )
        )
        triggers.reset(self.now_ms())
        self._pending_snapshot = (snapshot_id, data)
        log.info(
            "node %d: creating snapshot %s because %s",
            self.config.node_id, SnapshotId(snapshot_id.offset, snapshot_id.epoch).file_stem, reason,
        )

    async def _write_snapshot(self) -> None:
        """Write and freeze the built snapshot off the event loop (fsync, rename); a storage
        failure stops the node."""
        pending, raft_log = self._pending_snapshot, self._raft_log
        assert pending is not None and raft_log is not None
        self._pending_snapshot = None
        snapshot_id, data = pending
        if snapshot_id.offset <= raft_log.log_start_offset:
            return  # a snapshot from the leader replaced the log meanwhile
        await self._blocking(lambda: raft_log.create_snapshot(snapshot_id, data))

    async def _clean_log(self) -> None:
        """Enforce ``metadata.max.retention.bytes`` and ``metadata.max.retention.ms``
        (``StorageRaftLog.maybe_clean``), then wait ``kwire.metadata.log.clean.interval.ms``
        (Kafka's 60 s) again."""
        raft_log = self._raft_log
        assert raft_log is not None
        now = self.now_ms()
        self._next_clean_ms = now + self.config.metadata_log_clean_interval_ms
        before = raft_log.log_start_offset
        await self._blocking(
            lambda: raft_log.maybe_clean(
                retention_bytes=self.config.metadata_max_retention_bytes,
                retention_ms=self.config.metadata_max_retention_ms,
                now_ms=now,
            )
        )
        if raft_log.log_start_offset != before:
            log.info("node %d: log start offset %d -> %d (retention)", self.config.node_id, before, raft_log.log_start_offset)

    def append_result(self, result: AppendResult) -> None:
        """The node's own appends (NoOps, activation, controller writes) stay here; others go
        to the listener."""
        if self._requests.append_result(result):
            return
        if result.token in self._own_tokens:
            self._own_tokens.discard(result.token)
            return
        self._maybe_notify_leader()
        if self.listener is not None:
            self.listener.handle_append_result(result)

    def schedule(self, deadline_ms: int | None) -> None:
        """The core's next deadline; then the news of this Outbox as a whole: finalized
        features, the leader, NoOp scheduling, a resignation to wait for."""
        self._maybe_notify_leader()
        self._log_transition()
        if self._features_seen:
            self._features_seen = False
            self._publish_features()
        self._deadline_ms = deadline_ms
        self._maybe_activate()
        self._schedule_no_op()
        if self._needs_registration():
            self._registration_wakeup.set()
        core = self.core
        if core is not None and isinstance(core.state, Resigned):
            self._resigned.set()

    def _log_transition(self) -> None:
        """Log each change of role, epoch or known leader at INFO, as Kafka's ``QuorumState``
        logs its completed transitions."""
        core = self.core
        if core is None:
            return
        state = core.state
        role = (state.name, state.epoch, state.leader_id, core.quorum.is_voter)
        if role != self._known_role:
            self._known_role = role
            log.info(
                "node %d: %s in epoch %d (leader %s, %s)",
                self.config.node_id, state.name, state.epoch,
                "none" if state.leader_id is None else state.leader_id,
                "voter" if role[3] else "observer",
            )

    def _maybe_notify_leader(self) -> None:
        core, listener = self.core, self.listener
        if core is None or listener is None:
            return
        leader = core.leader_and_epoch
        if leader != self._known_leader:
            self._known_leader = leader
            listener.handle_leader_change(leader)

    def _publish_features(self) -> None:
        if self._dispatcher is None or self.core is None or self.controller is None:
            return
        self._dispatcher.finalized = finalized_features(
            self.controller.feature_levels, self.core.high_watermark, self.core.kraft_version
        )

    def _maybe_activate(self) -> None:
        """Claim the controller once this node leads and has replayed everything committed
        before its epoch's start (``QuorumController`` claims when ``KafkaRaftClient`` reports
        its own leadership, at that same point), and append the activation records: the
        bootstrap records on a log without metadata.version. A node that is not the leader
        renounces."""
        core, controller = self.core, self.controller
        if core is None or controller is None:
            return
        state = core.state
        if not isinstance(state, Leader):
            controller.renounce()
            if self._requests.writes:
                self._requests.finish_writes(None)
            return
        if self._stopping or self._replayed_offset < state.epoch_start_offset:
            return
        activation = controller.activate(state.epoch, self.now_ms())
        if activation is None:
            return
        self._requests.activated()
        if not activation.records:
            return
        # one ClientAppend is one batch: atomic activations stay whole
        token = self._take_token()
        self._own_tokens.add(token)
        self._post(ClientAppend(token, tuple(encode_record(m, v) for m, v in activation.records)))

    # ------------------------------------------------------------------ appends

    def _schedule_no_op(self) -> None:
        """An active controller appends a NoOpRecord every ``metadata.max.idle.interval.ms``
        (``QuorumController.maybeScheduleNextWriteNoOpRecord``), once activated, so that the
        high watermark of an idle quorum keeps advancing and followers see that the leader is
        alive."""
        core = self.core
        interval = self.config.metadata_max_idle_interval_ms
        controller = self.controller
        if (
            core is None
            or controller is None
            or interval <= 0
            or not isinstance(core.state, Leader)
            or controller.active_epoch != core.epoch
        ):
            self._next_no_op_ms = None
        elif self._next_no_op_ms is None:
            self._next_no_op_ms = self.now_ms() + interval

    async def _append_no_op(self) -> None:
        self._next_no_op_ms = None
        core = self.core
        if core is None or not isinstance(core.state, Leader) or self._stopping:
            return
        token = self._take_token()
        self._own_tokens.add(token)
        await self._step(ClientAppend(token, (encode_record(NoOpRecord(), 0),)))

    def _take_token(self) -> int:
        token = self._next_token
        self._next_token += 1
        return token

    def append(self, values: tuple[bytes, ...]) -> int:
        """Ask the leader in this node to append ``values`` (non-empty byte strings, at most
        one batch of ``controller.quorum``'s 8 MiB together) as data records; returns the token the listener's
        ``handle_append_result`` will carry. Never blocks; the records linger for
        ``controller.quorum.append.linger.ms`` (Kafka's ``RaftClient.prepareAppend`` +
        ``schedulePreparedAppend``)."""
        token = self._take_token()
        self._post(ClientAppend(token, tuple(values)))
        return token

    # ------------------------------------------------------------------ stopping

    async def shutdown(self, timeout_ms: int | None = None) -> None:
        """Graceful stop (``KafkaRaftClient.shutdown``): a leader resigns and sends
        EndQuorumEpoch to the other voters; the node stops once those are answered or after
        ``timeout_ms`` (default ``controller.quorum.request.timeout.ms``)."""
        if self._stopping:
            return
        self._stopping = True
        if timeout_ms is None:
            timeout_ms = self.config.controller_quorum_request_timeout_ms
        core = self.core
        if core is not None and isinstance(core.state, Leader):
            # a fresh event: the one a restart in Resigned set (a former leader starts so)
            # must not pass for this resignation
            self._resigned = trio.Event()
            self._post(Resign())
            with trio.move_on_after(timeout_ms / 1000):
                await self._resigned.wait()
                while self._in_flight > 0:
                    self._idle = trio.Event()
                    await self._idle.wait()
        self.stop()

    def stop(self) -> None:
        """Stop at once: listeners close, outstanding requests fail."""
        self._cancel_scope.cancel()
