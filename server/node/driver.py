"""The Trio driver that owns the KRaft core and the controller host and carries out their
outboxes: :class:`Node`.

One task (:meth:`Node._drive`) owns the :class:`~server.raft.core.RaftCore` and the
:class:`~server.controller.host.ControllerHost`. Everything that happens to the node reaches it
as an item on one memory channel::

    server.net connections ──► ChannelDispatcher ──► PendingRequest ─┐
    outbound peer tasks (one per destination) ──► ResponseReceived / │
                                                  RequestFailed ─────┼──► _drive ──► core.step
    shutdown() ──► Resign ───────────────────────────────────────────┤           └─► host.poll
    Node.append() ──► held appends (the first of a linger: a wake) ──┘
                     timer (the earliest deadline) ──► Tick

Raft RPCs go to the core, controller RPCs (``server.controller.registry``) to the host,
Envelopes are opened and their forwarded request takes the same path.

:meth:`Node.append` does not wake the driving task for each call. Like Kafka's
``RaftClient.prepareAppend``, which only adds to the accumulator the raft thread drains, it
holds the append, with the time it was made, until the next step of any kind or until the
first held append's ``append.linger.ms`` ends (at once at linger 0, or when the held appends
fill a batch). The core then takes them all in one step (``RaftCore.step_many``), ahead of
that step's other events, and its accumulator lingers from the first one's time
(``ClientAppend.appended_ms``). The batches are the ones an append-per-step driver would
make. A load generator appending every millisecond then costs one turn of the driving task
per linger, not one per append. Appends made while the node waited on the disk or the network
go to the core together too: one step, one Outbox, one batch at linger 0.

Each core Outbox is carried out by ``server.raft.outbox.apply`` (the one applier, with the
order of the Outbox contract) on the node's target (``server.node.raft_target``: quorum-state,
the log and its fsync off the event loop, the peers, the replies, the host and the listener).
Then the host is polled: its appends step the core at once, its replies complete requests, its
snapshot is built by a forked child at a lower priority (``server.node.forked``: 6-20 s of CPU
at a million partitions, none of it the event loop's), or, for an image of fewer than
:data:`FORK_MIN_IMAGE_RECORDS` records (cheaper than the fork) or with
``kwire.metadata.snapshot.build.in.child=false``, a step at a time on the event loop; once
built, its file is opened by the driving task, written and frozen on a thread of its own, and
taken by the log back on the driving task. Retention runs from the driving task
(``server.node.log_cleaner``). One snapshot is built and written at a time; one the host takes
meanwhile is skipped, and its triggers count afresh.

Every operation on the log runs through ``trio.to_thread``, one at a time, from the driving
task, so the log (not thread-safe) sees a single caller; a snapshot's own file is the one thing
written beside it. A failed write, fsync or a broken log invariant
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
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeVar

import trio

from kwire.errors import Errors
from kwire.uuid import Uuid
from kwire.wire import DecodeError
from messages.generated.envelope_request import EnvelopeRequest
from messages.generated.envelope_response import EnvelopeResponse
from messages.generated.sasl_authenticate_request import SaslAuthenticateRequest
from messages.generated.sasl_authenticate_response import SaslAuthenticateResponse
from messages.generated.sasl_handshake_request import SaslHandshakeRequest
from messages.generated.sasl_handshake_response import SaslHandshakeResponse
from messages.protocol import Request
from server.config import KRaftConfig
from server.controller import registry
from server.controller.controller import QuorumController
from server.controller.features import supported_features
from server.controller.host import (
    ControllerHost,
    ControllerOutbox,
    ControllerRequest,
    SnapshotToWrite,
)
from server.controller.scram import MECHANISMS as SCRAM_MECHANISMS
from server.net import ChannelDispatcher, PendingRequest, RunningServer, serve
from server.net.dispatcher import RequestContext
from server.net.sasl import SaslServerConfig
from server.node.apis import api_versions
from server.node.envelope import forwarded_client, open_envelope, relay_answer
from server.node.forked import BuildFailed, build_in_child, can_fork
from server.node.heap import AGE_AFTER_RECORDS, age_heap, tune_allocator
from server.node.log_cleaner import LogCleaner
from server.node.logger_levels import python_logger_levels
from server.node.peer import Peers
from server.node.raft_target import NodeTarget, RaftListener
from server.node.registration import ControllerRegistrationManager
from server.node.security import tls_listeners
from server.node.stall import StallWatch
from server.node.startup import controller_config, load_stored_state, new_core
from server.raft.accumulator import MAX_BATCH_SIZE_BYTES, records_size_upper_bound
from server.raft.core import RaftCore
from server.raft.events import (
    ClientAppend,
    Event,
    FlushCompleted,
    RequestFailed,
    RequestReceived,
    Resign,
    ResponseReceived,
    Tick,
)
from server.raft.outbox import apply as apply_outbox
from server.raft.roles import Leader
from server.raft.types import Endpoint, OffsetAndEpoch
from server.storage_raft_log import StorageRaftLog
from storage.log import MetadataLog
from storage.scram import ScramCredential
from storage.snapshots import SnapshotId

__all__ = ["Node", "RaftListener"]

T = TypeVar("T")
log = logging.getLogger("kwire.node")

BUSY_STEP_S = 0.01
"""A deadline's step (s) past which the driving task pauses, a tenth of the step and at most
``MAX_BUSY_PAUSE_S``, before its next turn when that turn would be more of the same work (an
image being loaded, committed batches still to deliver), so that the connection tasks read
what came meanwhile."""

MAX_BUSY_PAUSE_S = 0.02

LOAD_SLICE_S = 0.05
"""How long one slice of an image being rebuilt (a snapshot loaded, or the committed image
gone back to) should hold the event loop. The node sizes the host's slices
(``ControllerHost.load_records_per_poll``) to it from the time the last slice's step took,
between :data:`MIN_LOAD_SLICE_RECORDS` and the host's default. At a million partitions that
default, 20,000 records, holds the loop 0.4 s on an idle core and over a second on a busy
machine: a loading leader then answers no Fetch, and a loading follower sends none, for that
long, and a few such pauses in a row cost the quorum its leader."""

MIN_LOAD_SLICE_RECORDS = 500

SNAPSHOT_FLUSH_BYTES = 8 << 20
"""A snapshot file is written and fsynced this many bytes at a time (``RawSnapshotWriter.flush``):
written whole, a million partitions' 120 MB were still being written out to the disk when the
log's next fsync came, and the driving task waited for that fsync."""

FORK_MIN_IMAGE_RECORDS = 2_000
"""Images of fewer records (``SnapshotToWrite.image_records``) are built on the event loop even
where snapshots are built in a child: a fork of a node of 150 MB costs 13-14 ms of CPU before
the child does anything (page tables copied, then torn down, 6 and 7.5 ms), and its pages the
node writes afterwards are copied; encoding a partition's record costs about 12 us, so below
this many records the build is the cheaper, and it pauses every 1,000 records. A quorum
writing 160,000 records/s fires the byte trigger (20 MiB) twice a second on every node: three
nodes' forks cost 0.7 CPU-s per million records, 8% of the commit path's."""

MAX_EVENTS_BEFORE_DUE_DEADLINE = 64
"""Events the driving task takes off its channel, while a deadline is already due, before it
acts on the deadline: what waits goes first, but a steady stream of requests must not hold
back the next slice of an image being loaded or the core's timers for ever."""


def load_slice_records(records: int, took_s: float, most: int) -> int:
    """The records of an image's next slice, given that the last one of ``records`` took
    ``took_s`` seconds: what takes :data:`LOAD_SLICE_S` at that pace, between
    :data:`MIN_LOAD_SLICE_RECORDS` (or ``most``, if less) and ``most``."""
    if took_s <= 0:
        return records
    return max(min(MIN_LOAD_SLICE_RECORDS, most), min(most, int(records * LOAD_SLICE_S / took_s)))


@dataclass(frozen=True, slots=True)
class _AppendsWaiting:
    """``Node.append`` held the first append of a linger: the driving task's next deadline
    moved."""


@dataclass(frozen=True, slots=True)
class _SnapshotBuilt:
    """A snapshot's bytes, built in ``build_s`` seconds, to write."""

    snapshot_id: OffsetAndEpoch
    data: bytes
    build_s: float


@dataclass(frozen=True, slots=True)
class _SnapshotFrozen:
    """A snapshot's file, written and frozen off the driving task, for the log to take."""

    snapshot_id: OffsetAndEpoch


class Node:
    """A KRaft controller node serving ``config``'s listeners.

    ``await node.run(task_status=...)`` starts it (``nursery.start`` gets the node once its
    listeners are bound and the core is running) and returns after :meth:`shutdown` or
    :meth:`stop`. Raises :class:`~server.node.startup.NodeStartupError` for a directory it
    cannot start from and storage errors (``KafkaStorageError``, ``LogInvariantError``) when
    the node must stop.

    ``rng`` seeds the election timeouts, replica placement and topic ids; ``run_blocking``
    runs file I/O (default: off the event loop in ``trio.to_thread.run_sync``, a small log
    write and its fsync on it; see :meth:`_blocking`); ``listener`` is told of appends,
    commits and leader changes.
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
        """The port ``kwire.prometheus.port`` metrics are served on, once they are."""
        self.incarnation_id = Uuid.random()
        """This run's controller incarnation (KIP-919 registration)."""
        self._nursery: trio.Nursery | None = None
        self._target: NodeTarget | None = None
        self._cleaner: LogCleaner | None = None
        self._registration = ControllerRegistrationManager(config, self.incarnation_id, lambda: self.endpoints)
        self._events_send, self._events_receive = trio.open_memory_channel[Any](math.inf)
        self._pending: dict[int, PendingRequest] = {}
        self._next_request_id = 1
        self._cancel_scope = trio.CancelScope()
        self._host_deadline_ms: int | None = None
        self._overdue_turns = 0
        """Events taken in a row while a deadline was due (``MAX_EVENTS_BEFORE_DUE_DEADLINE``)."""
        self._aged_at_offset = 0
        """The log end offset at the last :func:`age_heap` for growth (``AGE_AFTER_RECORDS``)."""
        self._most_slice_records = 1
        """The host's own slice of an image being rebuilt: the most :data:`LOAD_SLICE_S` sizes it to."""
        self._wall_base_ms = 0
        self._trio_base = 0.0
        self._held: Any = None
        """An item taken off the event channel while collecting queued appends, handled next."""
        self._stopping = False
        self._building_snapshot: OffsetAndEpoch | None = None
        """The snapshot being built, None when none is."""
        self._deferred_snapshot: SnapshotToWrite | None = None
        """The newest snapshot the host asked for while another was being built."""
        self._next_token = 1
        self._appends: list[ClientAppend] = []
        """Appends held until the linger of the first ends or the next step (:meth:`append`)."""
        self._held_bytes = 0
        """Their size as the accumulator counts it (``records_size_upper_bound``)."""
        self._host_unpolled = False
        """The host took requests since it was last polled: it may hold appends (see :meth:`_step`)."""
        self._asleep_until_ms: int | None = None
        """While the driving task waits for an item: until when (its earliest deadline)."""

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

    async def _blocking(self, fn: Callable[[], T], *, on_loop: bool = False) -> T:
        """Run ``fn`` (an operation on the log or the quorum-state file) and wait for it: off
        the event loop in a worker thread, or with ``on_loop`` on the event loop itself (the
        log write and fsync of the commit path, at most
        ``server.node.raft_target.ON_LOOP_LOG_BYTES``: Kafka's ``KafkaRaftClient`` appends and
        flushes on its one polling thread too, and a thread hand-off each way cost a follower
        a fifth of its CPU at 20,000 records/s). The driving task does nothing else meanwhile
        either way: one that waits for half of ``controller.quorum.fetch.timeout.ms`` or more
        is logged at WARN with where ``fn`` was written (an fsync queued behind a disk busy
        with a snapshot's 100 MB was one). A ``run_blocking`` given to the node runs both
        kinds."""
        started = trio.current_time()
        if self._run_blocking is not None:
            result: T = await self._run_blocking(fn)
        elif on_loop:
            result = fn()
        else:
            result = await trio.to_thread.run_sync(fn)
        took = trio.current_time() - started
        if took * 2000 >= self.config.controller_quorum_fetch_timeout_ms:
            code = getattr(fn, "__code__", None)
            where = f"{code.co_filename}:{code.co_firstlineno}" if code is not None else repr(fn)
            log.warning("node %d: the driving task waited %d ms for %s (%s)", self.config.node_id, took * 1000,
                        getattr(fn, "__qualname__", "a call"), where)
        return result

    async def run(self, *, task_status: trio.TaskStatus[Node] = trio.TASK_STATUS_IGNORED) -> None:
        """Start up, serve and drive the core and the host until stopped (module docstring)."""
        tune_allocator()  # large buffers' pages reused (server.node.heap)
        self._wall_base_ms = time.time_ns() // 1_000_000
        self._trio_base = trio.current_time()
        config = self.config
        stored = await self._blocking(lambda: load_stored_state(config))
        self.metadata_log = metadata_log = stored.metadata_log
        self.cluster_id = stored.cluster_id
        self.directory_id = stored.directory_id
        request_send, request_receive = trio.open_memory_channel[PendingRequest](0)
        dispatcher = ChannelDispatcher(api_versions(), request_send, supported_features())
        try:
            with self._cancel_scope:
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    self.running = await nursery.start(partial(
                        serve, config, dispatcher, sasl=self._sasl_listeners(), tls=tls_listeners(config)))
                    self.core = core = new_core(config, stored, self.endpoints, self.rng, self.now_ms())
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
                    self._most_slice_records = host.load_records_per_poll
                    assert isinstance(core.log, StorageRaftLog)
                    self._target = NodeTarget(
                        config.node_id, core=core, host=host, raft_log=core.log, store=stored.store,
                        peers=Peers(nursery, self._post, f"raft-client-{config.node_id}", self._registration.sasl,
                                    self._registration.ssl_context),
                        pending=self._pending,
                        dispatcher=dispatcher, listener=self.listener, blocking=self._blocking, now_ms=self.now_ms,
                    )
                    self._cleaner = LogCleaner(config, core.log, self.now_ms())
                    nursery.start_soon(self._forward_requests, request_receive)
                    nursery.start_soon(StallWatch(config.controller_quorum_fetch_timeout_ms / 2000, log=log).run)
                    nursery.start_soon(self._registration.run, core, host)
                    if config.prometheus_port is not None:
                        nursery.start_soon(self._serve_metrics, config.prometheus_host, config.prometheus_port)
                    # The first step writes the election state the core starts in.
                    await self._step([Tick()])
                    task_status.started(self)
                    await self._drive(dispatcher)
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
        from server.node.metrics import host_snapshot, serve_metrics

        def bound(actual: int) -> None:
            self.metrics_port = actual
            log.info("serving metrics on %s:%d", host, actual)

        await serve_metrics(host, port, lambda: host_snapshot(self.core, self.host), on_bound=bound)

    async def _forward_requests(self, receive: trio.MemoryReceiveChannel[PendingRequest]) -> None:
        async for pending in receive:
            self._post(pending)
    def _post(self, item: Any) -> None:
        try:
            self._events_send.send_nowait(item)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    async def _drive(self, dispatcher: ChannelDispatcher) -> None:
        target, cleaner = self._target, self._cleaner
        assert target is not None and cleaner is not None
        while True:
            due = [d for d in (target.deadline_ms, self._host_deadline_ms, cleaner.next_ms, self._appends_due_ms())
                   if d is not None]
            item: Any = Tick()
            if self._held is not None:
                item, self._held = self._held, None
            else:
                overdue = bool(due) and min(due) <= self.now_ms()
                try:  # what is waiting goes first (a due deadline must not starve it), up to a point
                    if overdue and self._overdue_turns >= MAX_EVENTS_BEFORE_DUE_DEADLINE:
                        raise trio.WouldBlock
                    item = self._events_receive.receive_nowait()
                    self._overdue_turns = self._overdue_turns + 1 if overdue else 0
                except trio.WouldBlock:
                    self._overdue_turns = 0
                    self._asleep_until_ms = min(due)
                    try:
                        with trio.move_on_at(self._trio_time(self._asleep_until_ms)):
                            item = await self._events_receive.receive()
                    finally:
                        self._asleep_until_ms = None
            if isinstance(item, PendingRequest):
                # the requests that queued meanwhile run together, and their writes share a batch
                for pending in [item, *self._queued(PendingRequest)]:
                    await self._on_request(pending, dispatcher, step_host=False)
                await self._step([])
            elif isinstance(item, _SnapshotBuilt):
                await self._write_snapshot(item)
            elif isinstance(item, _SnapshotFrozen):
                await self._take_snapshot(item)
            elif isinstance(item, _AppendsWaiting):
                due_ms = self._appends_due_ms()
                if due_ms is not None and due_ms <= self.now_ms():
                    await self._step([])
            elif isinstance(item, Tick):
                started = time.perf_counter()
                await self._step([item], load=True)
                busy = time.perf_counter() - started
                assert self.core is not None and self.host is not None
                if self.host.loading:
                    age_heap()  # the slice just replayed is long-lived: out of the collector's walks
                    self.host.load_records_per_poll = load_slice_records(
                        self.host.load_records_per_poll, busy, self._most_slice_records)
                if busy > BUSY_STEP_S and (self.host.loading or self.core.delivery_pending):
                    # A deadline's step that ran long (a slice of an image being loaded, committed
                    # batches replayed) may come again at once. Trio runs each task once per turn,
                    # and each read of a socket ends a turn: without a pause the connections read
                    # 64 KiB of a Fetch response per busy step, and a catch-up takes minutes.
                    await trio.sleep(min(busy / 10, MAX_BUSY_PAUSE_S))
            else:
                if isinstance(item, (ResponseReceived, RequestFailed)):
                    target.peers.answered()
                await self._step([item])
            end = self.core.log.log_end_offset if self.core is not None else 0
            if not 0 <= end - self._aged_at_offset < AGE_AFTER_RECORDS:
                self._aged_at_offset = end
                age_heap()  # what the records since made is long-lived: out of the collector's walks
            await cleaner.maybe_clean(self.now_ms(), self._blocking)

    def _token_requests_allowed(self, context: RequestContext) -> bool:
        """``ControllerApis.allowTokenRequests``: not from a token-authenticated principal, and a
        request sent directly (not forwarded) needs an authenticated channel (SASL, or TLS with a
        client certificate)."""
        if context.token_authenticated:
            return False
        if context.forwarded:
            return True
        protocol = self.config.listener_security_protocol_map.get(context.listener_name.upper(), "PLAINTEXT")
        return protocol != "PLAINTEXT" and not (protocol == "SSL" and context.principal == "User:ANONYMOUS")

    def _sasl_listeners(self) -> dict[str, SaslServerConfig]:
        """The SASL settings of each SASL listener (``server.net.sasl``): its mechanisms, its
        PLAIN users, and SCRAM credentials from the controller's image."""
        out = {}
        for listener in self.config.listeners:
            settings = self.config.sasl_settings(listener.name)
            if settings is not None:
                out[listener.name] = SaslServerConfig(settings.mechanisms, settings.plain_users, self._scram_credential,
                                                      settings.max_reauth_ms)
        return out

    def _scram_credential(self, mechanism: str, user: str) -> ScramCredential | None:
        """``user``'s SCRAM credential for ``mechanism`` as the replayed metadata holds it."""
        host = self.host
        code = next((c for c, (name, _) in SCRAM_MECHANISMS.items() if name == mechanism), None)
        if host is None or code is None:
            return None
        return host.controller.scram.credentials.get((user, code))

    async def _on_request(self, pending: PendingRequest, dispatcher: ChannelDispatcher, *, step_host: bool = True) -> None:
        """A raft RPC goes to the core, a controller RPC to the host. An Envelope's forwarded
        request (``server.node.envelope``) takes the same path, as if the client had sent it
        here; its answer goes back wrapped in the EnvelopeResponse. ``step_host`` False: the
        caller polls the host (and steps the core with its appends) once it handed it every
        request that queued."""
        request = pending.request
        body, version = request.body, request.header.request_api_version
        if isinstance(body, SaslHandshakeRequest):  # authenticated already, or not a SASL listener
            pending.respond(SaslHandshakeResponse(error_code=Errors.ILLEGAL_SASL_STATE, mechanisms=[]))
        elif isinstance(body, SaslAuthenticateRequest):
            pending.respond(SaslAuthenticateResponse(
                error_code=Errors.ILLEGAL_SASL_STATE, auth_bytes=b"",
                error_message="SaslAuthenticate request received after successful authentication",
            ))
        elif isinstance(body, EnvelopeRequest):
            assert self.host is not None
            context = pending.context
            if not self.host.authorize_envelope(context.principal, context.host):
                pending.respond(EnvelopeResponse(error_code=Errors.CLUSTER_AUTHORIZATION_FAILED))
                return
            forwarded = open_envelope(body, dispatcher.api_versions())
            if not isinstance(forwarded, Request):
                pending.respond(EnvelopeResponse(error_code=forwarded))
                return
            principal, client_host, token = forwarded_client(body)
            inner = PendingRequest(forwarded, replace(context, principal=principal, client_host=client_host,
                                                      token_authenticated=token))
            assert self._nursery is not None
            self._nursery.start_soon(relay_answer, pending, inner)
            await self._on_request(inner, dispatcher, step_host=step_host)
        elif (api := registry.find(body)) is not None:
            assert self.host is not None
            reason = None if api.malformed is None else api.malformed(body, version)
            if reason is not None:
                pending.fail(DecodeError(reason))
                return
            now = self.now_ms()
            received_ms = now - round((trio.current_time() - pending.received_at) * 1000)
            context = pending.context
            self.host.request(now, ControllerRequest(
                pending, body, version, context.listener_name, received_ms, context.principal, context.host,
                self._token_requests_allowed(context),
            ))
            self._host_unpolled = True
            if step_host:
                await self._step([])
        else:
            host = self.host
            refusal = None if host is None else host.refuse_raft_request(body, pending.context.principal, pending.context.host)
            if refusal is not None:
                pending.respond(refusal)
                return
            if self._host_unpolled:  # the host's appends first: the core may append on this request
                await self._step([])
            request_id, self._next_request_id = self._next_request_id, self._next_request_id + 1
            self._pending[request_id] = pending
            await self._step([RequestReceived(request_id, version, body, pending.context.listener_name)])

    # ------------------------------------------------------------------ stepping

    def _queued(self, kind: type[T]) -> list[T]:
        """The items of ``kind`` waiting on the channel up to the first other item (held for
        the next turn): appends that queued while the node waited go to the core in one step
        (one batch); controller requests reach the host before it is polled, so that their
        writes share a batch too."""
        items: list[T] = []
        while True:
            try:
                item = self._events_receive.receive_nowait()
            except trio.WouldBlock:
                return items
            if not isinstance(item, kind):
                self._held = item
                return items
            items.append(item)

    async def _step(self, events: list[Event], *, load: bool = False) -> None:
        """Step the core with ``events`` (none: only the host has news) in one step and carry
        out the Outbox and every follow-up step (a completed flush); then poll the host and
        carry out its outbox, whose appends step the core at once (consecutive appends in one
        step, so they leave as one batch; a kraft.version upgrade in a step of its own), until
        neither has anything left to do now; then the appends :meth:`append` held, after the
        host's, whose offsets the host chose on the core as it stood (a broker's epoch is the
        offset of its registration). ``load``: the host may replay the next slice of an image
        being rebuilt (on the turn of a due deadline, not behind each raft message)."""
        core, host, target = self.core, self.host, self._target
        assert core is not None and host is not None and target is not None
        held, self._appends, self._held_bytes = self._appends, [], 0
        queue = deque([events] if events else [])
        run_tasks = True
        while True:
            while queue:
                out = core.step_many(self.now_ms(), queue.popleft())
                while True:
                    target.begin()
                    await apply_outbox(out, target)
                    if not target.flushed:
                        break
                    out = core.step(self.now_ms(), FlushCompleted())
            host_out = host.poll(self.now_ms(), run_tasks=run_tasks, load=load)
            run_tasks = load = self._host_unpolled = False  # its tasks wait for the next turn
            await self._carry_out(host_out)
            if not host_out.raft_events:
                if not held:
                    return
                host_out.raft_events, held = list(held), []  # one step, after every append of the host's
            for event in host_out.raft_events:
                if isinstance(event, ClientAppend) and queue and isinstance(queue[-1][-1], ClientAppend):
                    queue[-1].append(event)
                else:
                    queue.append([event])

    async def _carry_out(self, out: ControllerOutbox) -> None:
        """The host's replies, its snapshot, its next deadline; and the node's registration."""
        host, core = self.host, self.core
        assert host is not None and core is not None and isinstance(core.log, StorageRaftLog)
        for pending, response in out.replies:
            if not pending.done:
                pending.respond(response)
        if out.snapshot is not None:
            snapshot_id = out.snapshot.snapshot_id
            stem = SnapshotId(snapshot_id.offset, snapshot_id.epoch).file_stem
            if self._building_snapshot is not None:
                # its view holds the image as of now: built once the one in progress is done, so
                # that the newest trigger is never lost when no batch follows it
                building = self._building_snapshot
                log.info("node %d: deferring snapshot %s: snapshot %s is still being built", self.config.node_id,
                         stem, SnapshotId(building.offset, building.epoch).file_stem)
                self._deferred_snapshot = out.snapshot
            else:
                self._start_snapshot(out.snapshot)
        if out.loaded is not None:
            age_heap()  # the loaded image is long-lived: out of the cyclic collector's walks
        self._host_deadline_ms = out.next_deadline_ms
        if not self._stopping and not host.loading:  # registered once the image is whole, as Kafka's
            self._registration.maybe_register(host.controller, core.epoch)  # publisher waits for it

    def _start_snapshot(self, snapshot: SnapshotToWrite) -> None:
        age_heap()  # the image up to the snapshot is long-lived (server.node.heap)
        snapshot_id = snapshot.snapshot_id
        log.info("node %d: building snapshot %s", self.config.node_id,
                 SnapshotId(snapshot_id.offset, snapshot_id.epoch).file_stem)
        self._building_snapshot = snapshot_id
        assert self._nursery is not None
        self._nursery.start_soon(self._build_snapshot, snapshot)

    def _snapshot_done(self) -> None:
        """The snapshot being built was taken by the log, or given up: the newest one deferred
        meanwhile (if any) is built next."""
        self._building_snapshot = None
        deferred, self._deferred_snapshot = self._deferred_snapshot, None
        if deferred is not None and not self._stopping:
            self._start_snapshot(deferred)

    async def _build_snapshot(self, snapshot: SnapshotToWrite) -> None:
        """Build ``snapshot``'s bytes and hand them to the driving task: in a forked child at
        a lower priority (``server.node.forked``; ``kwire.metadata.snapshot.build.in.child``)
        when the image holds :data:`FORK_MIN_IMAGE_RECORDS` records or more, else a step at a
        time on the event loop, letting every other task run between two steps (a worker
        thread would hold the GIL against the event loop). A failed child's snapshot is
        skipped, logged at ERROR; a deferred one, or the next trigger, takes another."""
        started = time.perf_counter()
        if self.config.snapshot_build_in_child and can_fork() and snapshot.image_records >= FORK_MIN_IMAGE_RECORDS:
            try:
                data = await build_in_child(snapshot.build)
            except BuildFailed as exc:
                log.error("node %d: snapshot %s not built: %s", self.config.node_id,
                          SnapshotId(snapshot.snapshot_id.offset, snapshot.snapshot_id.epoch).file_stem, exc)
                self._snapshot_done()
                return
        else:
            steps = snapshot.steps()
            while True:
                try:
                    next(steps)
                except StopIteration as done:
                    data = done.value
                    break
                await trio.sleep(0)
        self._post(_SnapshotBuilt(snapshot.snapshot_id, data, time.perf_counter() - started))

    async def _write_snapshot(self, built: _SnapshotBuilt) -> None:
        """Open a built snapshot's file on the driving task (the log's one caller), then write
        and freeze it (fsync, rename) on a thread of its own while the node goes on: an fsync
        of 100 MB awaited here would hold up the raft traffic for seconds. The log takes the
        file once it is frozen (:class:`_SnapshotFrozen`); a storage failure stops the node."""
        core = self.core
        assert core is not None and isinstance(core.log, StorageRaftLog) and self._nursery is not None
        raft_log, snapshot_id = core.log, built.snapshot_id
        writer = await self._blocking(lambda: raft_log.open_snapshot_writer(snapshot_id))
        if writer is None:  # there already, or the log moved past it
            self._snapshot_done()
            return
        log.info("node %d: writing snapshot %s (%d bytes, built in %.1f s)", self.config.node_id,
                 SnapshotId(snapshot_id.offset, snapshot_id.epoch).file_stem, len(built.data), built.build_s)

        def write_and_freeze() -> None:
            data = memoryview(built.data)
            with writer:
                for start in range(0, len(data), SNAPSHOT_FLUSH_BYTES):
                    writer.append(data[start:start + SNAPSHOT_FLUSH_BYTES])
                    writer.flush()  # a piece at a time: the log's own fsyncs never queue behind it all
                writer.freeze()

        async def freeze() -> None:
            await trio.to_thread.run_sync(write_and_freeze)
            self._post(_SnapshotFrozen(snapshot_id))

        self._nursery.start_soon(freeze)

    async def _take_snapshot(self, frozen: _SnapshotFrozen) -> None:
        """The log takes a frozen snapshot (or deletes it, when it meanwhile moved past it);
        the next snapshot may be built."""
        core = self.core
        assert core is not None and isinstance(core.log, StorageRaftLog)
        raft_log = core.log
        await self._blocking(lambda: raft_log.snapshot_frozen(frozen.snapshot_id))
        self._snapshot_done()

    # ------------------------------------------------------------------ appends and stopping

    def append(self, values: tuple[bytes, ...], epoch: int) -> int:
        """Ask this node, as leader of ``epoch``, to append ``values`` (non-empty byte strings, at
        most one 8 MiB batch together) as data records; returns the token the listener's
        ``handle_append_result`` will carry (refused when the node no longer leads ``epoch``).
        Never blocks; the records linger for ``controller.quorum.append.linger.ms``
        (``RaftClient.prepareAppend``)."""
        token, self._next_token = self._next_token, self._next_token + 1
        values = tuple(values)
        self._appends.append(ClientAppend(token, values, epoch=epoch, appended_ms=self.now_ms()))
        self._held_bytes += records_size_upper_bound(values)
        asleep_until = self._asleep_until_ms
        if asleep_until is not None:  # a driving task that is busy looks at the appends before it waits
            due = self._appends_due_ms()
            assert due is not None
            if due < asleep_until:
                self._asleep_until_ms = None  # one wake is enough
                self._post(_AppendsWaiting())
        return token

    def _appends_due_ms(self) -> int | None:
        """When the held appends must reach the core: as the first one's linger ends (at once
        at linger 0), or at once when they fill a batch, if no step took them before."""
        if not self._appends:
            return None
        first = self._appends[0]
        assert first.appended_ms is not None
        if self._held_bytes >= MAX_BATCH_SIZE_BYTES:
            return first.appended_ms
        return first.appended_ms + self.config.controller_quorum_append_linger_ms

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
        core, target = self.core, self._target
        if core is not None and target is not None and isinstance(core.state, Leader):
            # a fresh event: the one a restart in Resigned set (a former leader starts so)
            # must not pass for this resignation
            target.resigned = trio.Event()
            self._post(Resign())
            with trio.move_on_after(timeout_ms / 1000):
                await target.resigned.wait()
                await target.peers.wait_idle()
        self.stop()

    def stop(self) -> None:
        """Stop at once: listeners close, outstanding requests fail."""
        self._cancel_scope.cancel()
