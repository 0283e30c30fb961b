"""The Trio driver that owns the KRaft core and the controller host and moves bytes between
them and the world: :class:`Node`.

One task (:meth:`Node._drive`) owns the :class:`~server.raft.core.RaftCore` and the
:class:`~server.controller.host.QuorumController`. Everything that happens to the node reaches it
as an item on one memory channel::

    server.net connections ──► ChannelDispatcher ──► PendingRequest ─┐
    outbound peer tasks (one per destination) ──► ResponseReceived / │
                                                  RequestFailed ─────┤
    snapshot pipeline (server.node.snapshot_files) ──► built/frozen ─┼──► _drive ──► steps(core, host)
    shutdown() ──► Resign ───────────────────────────────────────────┤
    Node.append() ──► held appends (server.node.linger): a wake ─────┘
                     timer (the earliest deadline) ──► Tick

Which item goes next is ``server.node.fairness``'s rule. A request goes where admission
(``server.controller.admission``, Kafka's ``ControllerApis``) sends it: answered at once, to
the host, or to the core; an opened request takes the same path and its answer is relayed
(``server.node.relay``). The core and the host are stepped together by
``server.controller.stepping.steps``, the one stepping function the simulation and the host's
tests use too; the driver carries out each outbox: the core's by ``server.raft.outbox.apply``
on the node's target (``server.node.raft_target``: quorum-state, the log and its fsync off the
event loop, the peers, the replies, the host and the listener), the host's replies, its
snapshot (``server.node.snapshot_files``) and its next deadline. Retention runs from the
driving task (``server.node.log_cleaner``).

Every operation on the log runs through ``trio.to_thread``, one at a time, from the driving
task, so the log (not thread-safe) sees a single caller; a snapshot's own file is the one thing
written beside it. A failed write, fsync or a broken log invariant raises out of
:meth:`Node.run`: the node stops without sending anything that the failed write would have had
to precede.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

import trio

from kwire.uuid import Uuid
from server.config import KRaftConfig
from server.controller.controller import ControlManagers
from server.controller.features import supported_features
from server.controller.host import (
    ControllerOutbox,
    QuorumController,
)
from server.controller.stepping import load_slice_records, steps
from server.net import ChannelDispatcher, PendingRequest, RunningServer, serve
from server.node.apis import api_versions
from server.node.blocking import Blocking
from server.node.fairness import Turns, forward_requests
from server.node.heap import AGE_AFTER_RECORDS, age_heap, tune_allocator
from server.node.linger import AppendLinger, AppendsWaiting
from server.node.log_cleaner import LogCleaner
from server.node.logger_levels import python_logger_levels
from server.node.peer import Peers
from server.node.raft_target import NodeTarget, RaftListener
from server.node.registration import ControllerRegistrationManager
from server.node.requests import RequestRouter
from server.node.security import sasl_listeners, tls_listeners
from server.node.snapshot_files import SnapshotBuilt, SnapshotFiles, SnapshotFrozen
from server.node.stall import StallWatch
from server.node.startup import controller_config, load_stored_state, new_core
from server.raft.core import RaftCore
from server.raft.events import (
    Event,
    RequestFailed,
    Resign,
    ResponseReceived,
    Tick,
)
from server.raft.outbox import apply as apply_outbox
from server.raft.roles import Leader
from server.raft.types import Endpoint
from server.storage_raft_log import StorageRaftLog
from storage.log import MetadataLog

__all__ = ["Node", "RaftListener"]

T = TypeVar("T")
log = logging.getLogger("kwire.node")

class Node:
    """A KRaft controller node serving ``config``'s listeners.

    ``await node.run(task_status=...)`` starts it (``nursery.start`` gets the node once its
    listeners are bound and the core is running) and returns after :meth:`shutdown` or
    :meth:`stop`. Raises :class:`~server.node.startup.NodeStartupError` for a directory it
    cannot start from and storage errors (``KafkaStorageError``, ``LogInvariantError``) when
    the node must stop.

    ``rng`` seeds the election timeouts, replica placement and topic ids; ``run_blocking``
    runs file I/O (default: off the event loop in ``trio.to_thread.run_sync``, a small log
    write and its fsync on it; ``server.node.blocking``); ``listener`` is told of appends,
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
        self._blocking = Blocking(config.node_id, config.controller_quorum_fetch_timeout_ms, run_blocking)
        self.core: RaftCore | None = None
        self.host: QuorumController | None = None
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
        self._requests = RequestRouter(config, lambda: self.host, self.now_ms, self._step, lambda: self._nursery)
        self._pending = self._requests.pending
        self._cancel_scope = trio.CancelScope()
        self._host_deadline_ms: int | None = None
        self._aged_at_offset = 0
        """The log end offset at the last :func:`age_heap` for growth (``AGE_AFTER_RECORDS``)."""
        self._most_slice_records = 1
        """The host's own slice of an image being rebuilt: the most :data:`LOAD_SLICE_S` sizes it to."""
        self._wall_base_ms = 0
        self._trio_base = 0.0
        self._stopping = False
        self._linger = AppendLinger(config.controller_quorum_append_linger_ms, self.now_ms,
                                    lambda: self._post(AppendsWaiting()))
        """Appends held until the linger of the first ends or the next step (:meth:`append`)."""
        self._turns = Turns(self._events_receive, self.now_ms, self._trio_time, self._linger)
        self._snapshots: SnapshotFiles | None = None

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
    def controller(self) -> ControlManagers | None:
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
                        serve, config, dispatcher, sasl=sasl_listeners(config, lambda: self.host), tls=tls_listeners(config)))
                    self.core = core = new_core(config, stored, self.endpoints, self.rng, self.now_ms())
                    self.host = host = QuorumController(
                        controller_config(config, stored.cluster_id, guard_plugins=True),
                        bootstrap=stored.bootstrap.records,
                        raft=core,
                        now_ms=self.now_ms(), rng=self.rng, log=logging.getLogger("kwire.controller"),
                        logger_levels=python_logger_levels, perf_counter=time.perf_counter, failpoints=core.failpoints,
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
                    self._snapshots = SnapshotFiles(
                        config.node_id, core.log, nursery=nursery, post=self._post, blocking=self._blocking,
                        build_in_child=config.snapshot_build_in_child, stopping=lambda: self._stopping,
                        failpoints=core.failpoints)
                    nursery.start_soon(forward_requests, request_receive, self._post)
                    nursery.start_soon(StallWatch(config.controller_quorum_fetch_timeout_ms / 2000, log=log).run)
                    nursery.start_soon(self._registration.run, core, host)
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
            if self.host is not None:
                self.host.config.plugins.close()  # ControllerServer.shutdown closes the policies
            with trio.CancelScope(shield=True):
                await self._blocking(metadata_log.close)

    async def _serve_metrics(self, host: str, port: int) -> None:
        """``kwire.prometheus.port``: the metrics (``server.node.metrics``), a new snapshot of
        them every second, until the node stops."""
        from server.node.metrics import host_snapshot, serve_metrics

        def bound(actual: int) -> None:
            self.metrics_port = actual
            log.info("serving metrics on %s:%d", host, actual)

        points = self.host.failpoints if self.host is not None and self.config.unsafe_test_failpoints else None
        await serve_metrics(host, port, lambda: host_snapshot(self.core, self.host), on_bound=bound, failpoints=points)

    def _post(self, item: Any) -> None:
        try:
            self._events_send.send_nowait(item)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            pass

    async def _drive(self) -> None:
        target, cleaner, snapshots = self._target, self._cleaner, self._snapshots
        assert target is not None and cleaner is not None and snapshots is not None
        while True:
            item = await self._turns.next([
                d for d in (target.deadline_ms, self._host_deadline_ms, cleaner.next_ms, self._linger.due_ms())
                if d is not None
            ])
            if isinstance(item, PendingRequest):
                # the requests that queued meanwhile run together, and their writes share a batch
                for pending in [item, *self._turns.queued(PendingRequest)]:
                    await self._requests.route(pending, step_host=False)
                await self._step([])
            elif isinstance(item, (SnapshotBuilt, SnapshotFrozen)):
                await snapshots.handle(item)
            elif isinstance(item, AppendsWaiting):
                due_ms = self._linger.due_ms()
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
                await self._turns.pause_after(busy, self.host.loading or self.core.delivery_pending)
            else:
                if isinstance(item, (ResponseReceived, RequestFailed)):
                    target.peers.answered()
                await self._step([item])
            end = self.core.log.log_end_offset if self.core is not None else 0
            if not 0 <= end - self._aged_at_offset < AGE_AFTER_RECORDS:
                self._aged_at_offset = end
                age_heap()  # what the records since made is long-lived: out of the collector's walks
            await cleaner.maybe_clean(self.now_ms(), self._blocking)

    # ------------------------------------------------------------------ stepping

    async def _step(self, events: list[Event], *, load: bool = False) -> None:
        """One turn of the core and the host (``server.controller.stepping.steps``) with ``events``
        (none: only the host has news) and the held appends (first, in the same step; after
        the host's own appends when it took requests since its last poll, whose records it
        applied at offsets computed without them), carrying out each outbox: the core's on the
        node's target (its fsync on the event loop completes at once, and the core then takes
        ``FlushCompleted``), the host's by :meth:`_carry_out`. ``load``: the
        host may replay the next slice of an image being rebuilt (on the turn of a due
        deadline, not behind each raft message)."""
        core, host, target = self.core, self.host, self._target
        assert core is not None and host is not None and target is not None
        held = self._linger.take()
        if held and not self._requests.host_unpolled:
            # nothing the host applied ahead waits: held first, to meet this step's drain
            events, held = [*held, *events], []
        self._requests.host_unpolled = False  # this turn polls it
        stepping = steps(core, host, events, self.now_ms, load=load, held=held)
        sent: bool | None = None
        while True:
            try:
                out = stepping.send(sent)
            except StopIteration:
                return
            if isinstance(out, ControllerOutbox):
                await self._carry_out(out)
                sent = None
            else:
                target.begin()
                await apply_outbox(out, target)
                sent = target.flushed

    async def _carry_out(self, out: ControllerOutbox) -> None:
        """The host's replies, its snapshot, its next deadline; and the node's registration."""
        host, core = self.host, self.core
        assert host is not None and core is not None and isinstance(core.log, StorageRaftLog)
        for pending, response in out.replies:
            if not pending.done:
                pending.respond(response)
        if out.snapshot is not None:
            assert self._snapshots is not None
            self._snapshots.offer(out.snapshot)
        if out.loaded is not None:
            age_heap()  # the loaded image is long-lived: out of the cyclic collector's walks
        self._host_deadline_ms = out.next_deadline_ms
        if not self._stopping and not host.loading:  # registered once the image is whole, as Kafka's
            self._registration.maybe_register(host.controller, core.epoch)  # publisher waits for it

    # ------------------------------------------------------------------ appends and stopping

    def append(self, values: tuple[bytes, ...], epoch: int) -> int:
        """Ask this node, as leader of ``epoch``, to append ``values`` (non-empty byte strings, at
        most one 8 MiB batch together) as data records; returns the token the listener's
        ``handle_append_result`` will carry (refused when the node no longer leads ``epoch``).
        Never blocks; the records linger for ``controller.quorum.append.linger.ms``
        (``RaftClient.prepareAppend``)."""
        return self._linger.append(values, epoch)

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
