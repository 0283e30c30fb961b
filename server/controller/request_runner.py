"""Running one controller RPC on the image and answering it: Kafka's ``QuorumController``
``ControllerReadEvent`` and ``ControllerWriteEvent``.

A request that passed admission (``server.controller.admission``) runs as its registry entry
(``server.controller.registry``) says:

* **A read** runs at once on the image as it stands, on any controller. On the active
  controller it may have seen records not committed yet, so its answer waits until everything
  appended so far has committed (Kafka's ``DeferredEventQueue`` at the last written offset);
  elsewhere, or with nothing uncommitted, it leaves at once.
* **A write** runs on the active controller only (NOT_CONTROLLER elsewhere), on the image with
  every write before it applied, committed or not. Its records go to the core as one batch,
  applied ahead of their commit unless it asks for a kraft.version upgrade (the control batch
  goes first and would move their offsets: the write barrier goes up). Its answer leaves when
  its batch commits; one that wrote nothing is answered after the writes before it. While the
  barrier holds, or requests already wait, a write that arrives on the active controller waits
  in arrival order (the host runs it from its poll).

Should the leadership be lost before the commit, the answer is NOT_CONTROLLER. Each write's
queue time (arrival to handling) and processing time are recorded for the
``ControllerEventManager`` metrics. Sans-IO: it reads the host's state through
:class:`RunnerHost` at each call and answers through the host's ``OutboxWriter``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from messages.runtime import Message
from server.controller.controller import ControlManagers
from server.controller.errors import ApiError
from server.controller.event_times import EventTimes
from server.controller.offset_control import OffsetControl
from server.controller.operation_context import ControllerConfig, ControllerLog, OperationContext
from server.controller.outbox import OutboxWriter, RaftView
from server.controller.registry import ControllerApi
from server.controller.write_queue import DeferredWriteQueue

if TYPE_CHECKING:
    import random

    from server.controller.admission import Admission

__all__ = ["ControllerRequest", "ControllerSeat", "RequestRunner", "RunnerHost"]


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


class RunnerHost(Protocol):
    """What the runner reads of the host, at each call (``QuorumController`` fits)."""

    config: ControllerConfig
    raft: RaftView
    controller: ControlManagers
    rng: random.Random
    log: ControllerLog
    admission: Admission
    replayed_offset: int
    """The offset after the last committed batch (or snapshot) replayed."""


class ControllerSeat(Protocol):
    """Whether this node is the active controller (``server.controller.leadership.Leadership``
    fits)."""

    def active_controller(self) -> ControlManagers | None:
        """The controller while it is the active one with a metadata.version, else None."""

    def not_controller(self) -> ApiError:
        """The NOT_CONTROLLER error naming the leader."""


class RequestRunner:
    """Runs the requests of one host (module docstring): ``seat`` says whether it is the
    active controller, ``offsets``, ``queue`` and ``writer`` are the host's; ``logger_levels``
    lists the node's loggers for DescribeConfigs; ``perf_counter`` (seconds) times each write's
    processing for the metric only (None: not timed)."""

    def __init__(self, host: RunnerHost, seat: ControllerSeat, offsets: OffsetControl,
                 queue: DeferredWriteQueue[ControllerRequest], writer: OutboxWriter, *,
                 logger_levels: Callable[[], Mapping[str, str]] = dict,
                 perf_counter: Callable[[], float] | None = None) -> None:
        self._host = host
        self._seat = seat
        self._offsets = offsets
        self._queue = queue
        self._writer = writer
        self._logger_levels = logger_levels
        self._perf_counter = perf_counter
        self.queue_times = EventTimes()
        """``ControllerEventManager`` EventQueueTimeMs: arrival to the start of handling."""
        self.processing_times = EventTimes()
        """``ControllerEventManager`` EventQueueProcessingTimeMs: the handling itself."""

    def arrived(self, now_ms: int, request: ControllerRequest, api: ControllerApi) -> None:
        """``request`` (served by ``api``) arrived on a whole image: refused whole by
        admission, answered (a read), run now (a write), or left waiting behind the writes
        before it in the queue's ``waiting`` while this node is the active controller."""
        host = self._host
        refused = host.admission.refusal(request, api)
        if refused is not None:
            self._writer.reply(request.handle, api.respond(request.body, request.version, refused))
            return
        if not api.write:
            self.answer_after_writes(request, api, api.respond(request.body, request.version,
                                                               self._run_read(now_ms, request, api)))
            return
        if api.on_arrival is not None:
            api.on_arrival(host.controller, request.body, now_ms)
        if (self._queue.waiting or self._queue.blocked) and self._seat.active_controller() is not None:
            self._queue.waiting.append(request)
            return
        self.run(now_ms, request, api)

    def context(self, now_ms: int, request: ControllerRequest | None = None) -> OperationContext:
        """What an operation sees at ``now_ms``: ``request``'s, or (None) a periodic task's."""
        host = self._host
        return OperationContext(
            controller=host.controller,
            config=host.config,
            now_ms=now_ms,
            raft=host.raft,
            voter_ids=host.raft.voters.ids,
            rng=host.rng,
            log=host.log,
            listener_name="" if request is None else request.listener_name,
            leader_id=host.raft.leader_and_epoch.leader_id,
            pending_records=self._offsets.pending_records,
            logger_levels=self._logger_levels,
            authorize=None if request is None else host.admission.resource_authorizer(request),
            principal="User:ANONYMOUS" if request is None else request.principal,
            token_requests_allowed=request is not None and request.token_requests_allowed,
        )

    def _run_read(self, now_ms: int, request: ControllerRequest, api: ControllerApi) -> Any:
        try:
            return api.operation(self.context(now_ms, request), request.body, request.version).response
        except ApiError as exc:  # the authorizer not ready yet
            return exc

    def run(self, now_ms: int, request: ControllerRequest, api: ControllerApi) -> None:
        """Run one write request on the active controller (NOT_CONTROLLER elsewhere), timed."""
        self.queue_times.record(now_ms - request.received_ms)
        started = self._perf_counter() if self._perf_counter is not None else None
        try:
            self._operate(now_ms, request, api)
        finally:
            if started is not None and self._perf_counter is not None:
                self.processing_times.record((self._perf_counter() - started) * 1000)

    def _operate(self, now_ms: int, request: ControllerRequest, api: ControllerApi) -> None:
        body, version = request.body, request.version
        if self._seat.active_controller() is None:
            self._writer.reply(request.handle, api.respond(body, version, self._seat.not_controller()))
            return
        try:
            result = api.operation(self.context(now_ms, request), body, version)
        except ApiError as exc:
            self._writer.reply(request.handle, api.respond(body, version, exc))
            return
        ahead = True
        if result.kraft_upgrade is not None:
            self._writer.upgrade(result.kraft_upgrade)
            ahead = False  # the control batch goes first: the offsets computed here would be off
            self._queue.barrier = True
        if not result.records:
            self.answer_after_writes(request, api, api.respond(body, version, result.response))
            return

        def answer(error: ApiError | None) -> None:
            self._writer.reply(request.handle, api.respond(body, version, result.response if error is None else error))

        self._writer.append(result.records, answer, result.on_commit, ahead=ahead)

    def answer_after_writes(self, request: ControllerRequest, api: ControllerApi, response: Message) -> None:
        """Answer ``response`` once everything the active controller has appended so far has
        committed (it may have read uncommitted records), at once elsewhere or when nothing is
        uncommitted; NOT_CONTROLLER (built by ``api``) should the leadership be lost first."""
        if self._seat.active_controller() is None or self._offsets.uncommitted(self._host.replayed_offset) <= 0:
            self._writer.reply(request.handle, response)
            return

        def answer(error: ApiError | None) -> None:
            reply = response if error is None else api.respond(request.body, request.version, error)
            self._writer.reply(request.handle, reply)

        self._queue.add(self._writer.token(), answer, last_offset=self._offsets.write_end - 1)
