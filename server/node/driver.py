"""The Trio driver that owns the KRaft core and the controller host and carries out their
outboxes: :class:`Node`.

One task (:meth:`Node._drive`) owns the :class:`~server.raft.core.RaftCore` and the
:class:`~server.controller.host.ControllerHost`. Everything that happens to the node reaches it
as an item on one memory channel::

    server.net connections ──► ChannelDispatcher ──► PendingRequest ─┐
    outbound peer tasks (one per destination) ──► ResponseReceived / │
                                                  RequestFailed ─────┼──► _drive ──► core.step
    shutdown() ──► Resign ───────────────────────────────────────────┤           └─► host.poll
    Node.append() ──► ClientAppend ──────────────────────────────────┘
                     timer (the earliest deadline) ──► Tick

Raft RPCs go to the core, controller RPCs (``server.controller.registry``) to the host,
Envelopes are opened and their forwarded request takes the same path. Appends that queued on
the channel while the node waited on the disk or the network go to the core together
(``RaftCore.step_many``): one step, one Outbox, one batch at any linger.

Each core Outbox is carried out by ``server.raft.outbox.apply`` (the one applier, with the
order of the Outbox contract); the node is its ``OutboxTarget``: the election state goes to
quorum-state (tmp + fsync + rename) first, log changes and the fsync run off the event loop,
sends go to the :class:`~server.node.peer.Peer` tasks, replies complete the pending requests,
and a loaded snapshot or committed batches go to the host and the listener. Then the host is
polled: its appends step the core at once, its replies complete requests, its snapshot is
written.

Every file operation runs through ``trio.to_thread``, one at a time, from the driving task, so
the log (not thread-safe) sees a single caller. A failed write, fsync or a broken log invariant
raises out of :meth:`Node.run`: the node stops without sending anything that the failed write
would have had to precede.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

import trio

from kwire.uuid import Uuid
from messages.generated.envelope_request import EnvelopeRequest
from messages.generated.envelope_response import EnvelopeResponse
from messages.protocol import Request
from server.config import KRaftConfig
from server.controller import registry
from server.controller.controller import QuorumController
from server.controller.features import supported_features
from server.controller.host import ControllerHost, ControllerOutbox, ControllerRequest
from server.net import ChannelDispatcher, PendingRequest, RunningServer, serve
from server.node.apis import api_versions
from server.node.envelope import open_envelope, relay_answer
from server.node.features import finalized_features
from server.node.log_cleaner import LogCleaner, write_snapshot
from server.node.logger_levels import python_logger_levels
from server.node.peer import Peer
from server.node.registration import (
    SECURITY_PROTOCOL_IDS,
    ControllerRegistrationManager,
    registration_request,
)
from server.node.startup import controller_config, load_stored_state, to_stored_election
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
from storage.snapshots import SnapshotId, read_snapshot

__all__ = ["Node", "RaftListener"]

T = TypeVar("T")
log = logging.getLogger("kwire.node")


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

    ``rng`` seeds the election timeouts, replica placement and topic ids; ``run_blocking``
    runs file I/O off the event loop (default ``trio.to_thread.run_sync``); ``listener`` is
    told of appends, commits and leader changes.
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
        self.host: ControllerHost | None = None
        self.running: RunningServer | None = None
        self.cluster_id: str | None = None
        self.directory_id: Uuid | None = None
        self.metadata_log: MetadataLog | None = None
        self.metrics_port: int | None = None
        """The port metrics are served on, once they are (``kwire.prometheus.port``)."""
        self.incarnation_id = Uuid.random()
        """This run's controller incarnation (KIP-919 registration)."""
        self._raft_log: StorageRaftLog | None = None
        self._store: FileQuorumStateStore | None = None
        self._cleaner: LogCleaner | None = None
        self._registration: ControllerRegistrationManager | None = None
        self._events_send, self._events_receive = trio.open_memory_channel[Any](math.inf)
        self._pending: dict[int, PendingRequest] = {}
        self._next_request_id = 1
        self._peers: dict[int, Peer] = {}
        self._in_flight = 0
        self._nursery: trio.Nursery | None = None
        self._cancel_scope = trio.CancelScope()
        self._deadline_ms: int | None = None
        self._host_deadline_ms: int | None = None
        self._wall_base_ms = 0
        self._trio_base = 0.0
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
        self._next_token = 1
        self._known_leader: LeaderAndEpoch | None = None
        self._known_role: tuple[str, int, int | None, bool] | None = None

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
    def controller(self) -> QuorumController | None:
        """The quorum controller's replayed state, None before start-up."""
        return None if self.host is None else self.host.controller

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
        """Start up, serve and drive the core and the host until stopped (class docstring)."""
        self._wall_base_ms = time.time_ns() // 1_000_000
        self._trio_base = trio.current_time()
        config = self.config
        stored = await self._blocking(lambda: load_stored_state(config))
        self.metadata_log = metadata_log = stored.metadata_log
        self._store = stored.store
        self.cluster_id = stored.cluster_id
        self.directory_id = stored.directory_id
        request_send, request_receive = trio.open_memory_channel[PendingRequest](0)
        self._dispatcher = ChannelDispatcher(api_versions(), request_send, supported_features())
        try:
            with self._cancel_scope:
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    self.running = await nursery.start(serve, config, self._dispatcher)
                    self._raft_log = StorageRaftLog(metadata_log)
                    self.core = core = RaftCore(
                        identity=ReplicaIdentity(
                            node_id=config.node_id,
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
                        config=config.quorum_config(),
                        bootstrap_servers=[
                            Endpoint(config.controller_listener_names[0], b.host, b.port)
                            for b in config.controller_quorum_bootstrap_servers
                        ],
                    )
                    self.host = host = ControllerHost(
                        controller_config(config, stored.cluster_id),
                        bootstrap=stored.bootstrap.records,
                        raft=core,
                        now_ms=self.now_ms(),
                        rng=self.rng,
                        log=logging.getLogger("kwire.controller"),
                        logger_levels=python_logger_levels,
                        perf_counter=time.perf_counter,
                    )
                    self._cleaner = LogCleaner(config, self._raft_log, self.now_ms())
                    self._registration = ControllerRegistrationManager(
                        config.node_id, self.incarnation_id, request=self._registration_request, leader=self._leader_address
                    )
                    nursery.start_soon(self._forward_requests, request_receive)
                    nursery.start_soon(self._registration.run, lambda: host.controller, lambda: core.epoch)
                    if config.prometheus_port is not None:
                        nursery.start_soon(self._serve_metrics, config.prometheus_host, config.prometheus_port)
                    # The first step writes the election state the core starts in.
                    await self._step([Tick()])
                    task_status.started(self)
                    await self._drive()
        finally:
            for pending in self._pending.values():
                if not pending.done:
                    pending.fail(RuntimeError("the node stopped"))
            self._pending.clear()
            with trio.CancelScope(shield=True):
                await self._blocking(metadata_log.close)

    async def _serve_metrics(self, host: str, port: int) -> None:
        """``kwire.prometheus.port``: the metrics (``server.node.metrics``), a new snapshot of
        them every second, until the node stops."""
        from server.node.metrics import serve_metrics, take_snapshot

        def snapshot() -> Any:
            controller_host = self.host
            assert controller_host is not None
            return take_snapshot(
                self.core, controller_host.controller, active=controller_host.active_controller() is not None,
                applied_offset=controller_host.replayed_offset - 1,
                events={
                    "EventQueueTimeMs": controller_host.queue_times.summary(),
                    "EventQueueProcessingTimeMs": controller_host.processing_times.summary(),
                },
            )

        def bound(actual: int) -> None:
            self.metrics_port = actual
            log.info("serving metrics on %s:%d", host, actual)

        await serve_metrics(host, port, snapshot, on_bound=bound)

    async def _forward_requests(self, receive: trio.MemoryReceiveChannel[PendingRequest]) -> None:
        async for pending in receive:
            self._post(pending)

    def _post(self, item: Any) -> None:
        try:
            self._events_send.send_nowait(item)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    async def _drive(self) -> None:
        cleaner = self._cleaner
        assert cleaner is not None
        while True:
            due = [d for d in (self._deadline_ms, self._host_deadline_ms, cleaner.next_ms) if d is not None]
            item: Any = Tick()
            if self._held is not None:
                item, self._held = self._held, None
            else:
                with trio.move_on_at(self._trio_time(min(due))):
                    item = await self._events_receive.receive()
            if isinstance(item, PendingRequest):
                await self._on_request(item)
            elif isinstance(item, ClientAppend):
                await self._step([item, *self._queued_appends()])
            else:
                if isinstance(item, (ResponseReceived, RequestFailed)):
                    self._in_flight -= 1
                    if self._in_flight == 0:
                        self._idle.set()
                await self._step([item])
            await cleaner.maybe_clean(self.now_ms(), self._blocking)

    async def _on_request(self, pending: PendingRequest) -> None:
        """A raft RPC goes to the core, a controller RPC to the host, an Envelope is opened."""
        request = pending.request
        body = request.body
        version = request.header.request_api_version
        if isinstance(body, EnvelopeRequest):
            await self._on_envelope(pending, body)
            return
        if registry.find(body) is not None:
            host = self.host
            assert host is not None
            now = self.now_ms()
            received_ms = now - round((trio.current_time() - pending.received_at) * 1000)
            host.request(now, ControllerRequest(pending, body, version, pending.context.listener_name, received_ms))
            await self._step([])
            return
        request_id = self._next_request_id
        self._next_request_id += 1
        self._pending[request_id] = pending
        await self._step([RequestReceived(request_id, version, body, pending.context.listener_name)])

    async def _on_envelope(self, pending: PendingRequest, body: EnvelopeRequest) -> None:
        """A request a broker forwarded (``server.node.envelope``): answered as if the client
        had sent it here, the answer wrapped in the EnvelopeResponse."""
        assert self._dispatcher is not None and self._nursery is not None
        forwarded = open_envelope(body, self._dispatcher.api_versions())
        if not isinstance(forwarded, Request):
            pending.respond(EnvelopeResponse(error_code=forwarded))
            return
        inner = PendingRequest(forwarded, pending.context)
        self._nursery.start_soon(relay_answer, pending, inner)
        await self._on_request(inner)

    # ------------------------------------------------------------------ the node's registration (KIP-919)

    def _registration_request(self) -> Any:
        config = self.config
        listeners = [
            (e.name, e.host, e.port, SECURITY_PROTOCOL_IDS.get(config.listener_security_protocol_map.get(e.name, "PLAINTEXT"), 0))
            for e in self.endpoints
        ]
        return registration_request(
            config.node_id, self.incarnation_id, listeners,
            {f.name: (f.min_version, f.max_version) for f in supported_features()},
        )

    def _leader_address(self) -> tuple[str, int, int] | None:
        """The known leader's controller endpoint and the epoch, None without one."""
        core = self.core
        if core is None or core.leader_and_epoch.leader_id is None:
            return None
        node = core.voters.get(core.leader_and_epoch.leader_id)
        endpoint = None if node is None else node.endpoint(self.config.controller_listener_names[0])
        return None if endpoint is None else (endpoint.host, endpoint.port, core.epoch)

    # ------------------------------------------------------------------ stepping

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

    async def _step(self, events: list[Event]) -> None:
        """Step the core with ``events`` (none: only the host has news) in one step and carry
        out the Outbox and every follow-up step (a completed flush); then poll the host and
        carry out its outbox, whose appends step the core at once, one step each, until
        neither has anything left to do now."""
        core, host = self.core, self.host
        assert core is not None and host is not None
        queue = deque([events] if events else [])
        while True:
            while queue:
                out = core.step_many(self.now_ms(), queue.popleft())
                while await self._execute(out):
                    out = core.step(self.now_ms(), FlushCompleted())
            host_out = host.poll(self.now_ms())
            await self._carry_out(host_out)
            if not host_out.raft_events:
                return
            queue.extend([event] for event in host_out.raft_events)

    async def _carry_out(self, out: ControllerOutbox) -> None:
        """The host's replies, its snapshot, its next deadline; and the node's registration."""
        host, core, raft_log, registration = self.host, self.core, self._raft_log, self._registration
        assert host is not None and core is not None and raft_log is not None and registration is not None
        for pending, response in out.replies:
            if not pending.done:
                pending.respond(response)
        if out.snapshot is not None:
            snapshot_id = out.snapshot.snapshot_id
            log.info("node %d: writing snapshot %s", self.config.node_id, SnapshotId(snapshot_id.offset, snapshot_id.epoch).file_stem)
            await write_snapshot(raft_log, out.snapshot, self._blocking)
        self._host_deadline_ms = out.next_deadline_ms
        if not self._stopping:
            registration.maybe_register(host.controller, core.epoch)

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
        metadata_log, host = self.metadata_log, self.host
        assert metadata_log is not None and host is not None
        snapshot = SnapshotId(snapshot_id.offset, snapshot_id.epoch)
        content = await self._blocking(lambda: read_snapshot(metadata_log.dir, snapshot))
        host.load_snapshot(self.now_ms(), snapshot_id, content.data_records())
        self._features_seen = True
        self._maybe_notify_leader()

    def commit(self, batch: CommittedBatch) -> None:
        """The controller replays the batch, then the listener hears of it."""
        host = self.host
        assert host is not None
        host.commit(self.now_ms(), batch)
        self._features_seen = True
        self._maybe_notify_leader()
        if self.listener is not None:
            self.listener.handle_commit(batch)

    def append_result(self, result: AppendResult) -> None:
        """The host's own appends stay with it; others go to the listener."""
        host = self.host
        assert host is not None
        if host.append_result(result):
            return
        self._maybe_notify_leader()
        if self.listener is not None:
            self.listener.handle_append_result(result)

    def schedule(self, deadline_ms: int | None) -> None:
        """The core's next deadline; then the news of this Outbox as a whole: finalized
        features, the leader, a resignation to wait for."""
        self._maybe_notify_leader()
        self._log_transition()
        if self._features_seen:
            self._features_seen = False
            self._publish_features()
        self._deadline_ms = deadline_ms
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
        if self._dispatcher is None or self.core is None or self.host is None:
            return
        self._dispatcher.finalized = finalized_features(
            self.host.controller.feature_levels, self.core.high_watermark, self.core.kraft_version
        )

    # ------------------------------------------------------------------ appends and stopping

    def append(self, values: tuple[bytes, ...]) -> int:
        """Ask the leader in this node to append ``values`` (non-empty byte strings, at most
        one batch of ``controller.quorum``'s 8 MiB together) as data records; returns the token the listener's
        ``handle_append_result`` will carry. Never blocks; the records linger for
        ``controller.quorum.append.linger.ms`` (Kafka's ``RaftClient.prepareAppend`` +
        ``schedulePreparedAppend``)."""
        token = self._next_token
        self._next_token += 1
        self._post(ClientAppend(token, tuple(values)))
        return token

    async def shutdown(self, timeout_ms: int | None = None) -> None:
        """Graceful stop (``KafkaRaftClient.shutdown``): a leader resigns and sends
        EndQuorumEpoch to the other voters; the node stops once those are answered or after
        ``timeout_ms`` (default ``controller.quorum.request.timeout.ms``)."""
        if self._stopping:
            return
        self._stopping = True
        if self.host is not None:
            self.host.shutdown()
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
