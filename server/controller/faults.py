"""The failpoints of the controller host (``server.failpoints``): what an armed point does to a
request as it arrives and to a committed batch as it is handed to the controller, and what it
holds back meanwhile. Sans-IO: a held item is released by the host's ``poll`` once ``now_ms``
reaches its release time, and the earliest such time joins the host's ``next_deadline_ms``, so
the event loop never waits.

Points (``server.failpoints.POINTS``):

* ``controller.request`` (any controller RPC) and ``controller.heartbeat`` (BrokerHeartbeat),
  as the request arrives, before admission: ``error`` answers the RPC's error response with the
  code, ``drop`` answers nothing, ``delay`` holds the request (then it arrives as any other);
* ``controller.commit``, the commit callback (Kafka's ``RaftClient.Listener.handleCommit``):
  ``delay`` holds the batch, and the ones committed after it queue behind it, so the
  controller replays them in offset order, late; writes are answered late with them.

A ``halt`` anywhere raises out of :meth:`Failpoints.hit` (``FailpointHalt`` by default).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable, Iterator

from kwire.errors import Errors
from messages.generated.broker_heartbeat_request import BrokerHeartbeatRequest
from messages.runtime import Message
from server.controller.errors import ApiError
from server.controller.registry import ControllerApi, find
from server.controller.request_runner import ControllerRequest
from server.failpoints import Failpoints
from server.raft.events import CommittedBatch

__all__ = ["HostFaults"]


class HostFaults:
    """The host's failpoints (module docstring). The host checks ``failpoints.armed or
    holding`` before calling in, so that nothing armed costs one attribute test."""

    def __init__(self, failpoints: Failpoints) -> None:
        self.failpoints = failpoints
        self.holding = False
        """Requests or batches are held back."""
        self._requests: list[tuple[int, int, ControllerRequest]] = []
        """(release time ms, arrival order, request), a heap."""
        self._commits: deque[tuple[int, CommittedBatch]] = deque()
        """(release time ms, batch) in offset order; release times never decrease."""
        self._arrivals = 0

    def on_request(self, now_ms: int, request: ControllerRequest, api: ControllerApi) -> Message | bool:
        """What an armed point does to ``request`` (served by ``api``): the error answer to send,
        True when it is dropped or held (nothing to send now), False to go on as usual."""
        points = self.failpoints
        action = points.hit("controller.request")
        if action is None and isinstance(request.body, BrokerHeartbeatRequest):
            action = points.hit("controller.heartbeat")
        if action is None:
            return False
        if action.kind == "error":
            return api.respond(request.body, request.version, ApiError(Errors(action.value), "failpoint"))
        if action.kind == "delay":
            self._arrivals += 1
            heapq.heappush(self._requests, (now_ms + action.value, self._arrivals, request))
            self.holding = True
        return True  # drop: no answer

    def taken(
        self, now_ms: int, request: ControllerRequest, api: ControllerApi, reply: Callable[[object, Message], None],
    ) -> bool:
        """Whether an armed point took ``request``: answered it by ``reply(handle, answer)`` (an
        error), dropped it, or holds it (a delay); False to go on as usual."""
        fault = self.on_request(now_ms, request, api)
        if fault is False:
            return False
        if fault is not True:
            reply(request.handle, fault)
        return True

    def hold_commit(self, now_ms: int, batch: CommittedBatch) -> bool:
        """Whether ``batch`` is held back: a ``controller.commit`` delay fired, or batches
        before it are held (it then waits behind them)."""
        action = self.failpoints.hit("controller.commit") if self.failpoints.armed else None
        release = now_ms if action is None else now_ms + action.value
        if not self._commits and release <= now_ms:
            return False
        if self._commits:
            release = max(release, self._commits[-1][0])
        self._commits.append((release, batch))
        self.holding = True
        return True

    def drop_commits_before(self, offset: int) -> None:
        """A snapshot up to ``offset`` (exclusive) replaces the image: the held batches below it
        are in it already."""
        self._commits = deque((r, b) for r, b in self._commits if b.base_offset >= offset)
        self._update_holding()

    def due_requests(self, now_ms: int) -> Iterator[ControllerRequest]:
        """The held requests whose delay passed, in release order."""
        while self._requests and self._requests[0][0] <= now_ms:
            yield heapq.heappop(self._requests)[2]
        self._update_holding()

    def due_commits(self, now_ms: int) -> Iterator[CommittedBatch]:
        """The held batches whose delay passed, in offset order."""
        while self._commits and self._commits[0][0] <= now_ms:
            yield self._commits.popleft()[1]
        self._update_holding()

    def release(
        self, now_ms: int, deliver: Callable[[int, CommittedBatch], None],
        arrive: Callable[[int, ControllerRequest, ControllerApi], None],
    ) -> None:
        """Hand the held batches whose delay passed to ``deliver``, in offset order, then the
        held requests whose delay passed to ``arrive`` with their RPC, in release order."""
        for batch in self.due_commits(now_ms):
            deliver(now_ms, batch)
        for request in self.due_requests(now_ms):
            api = find(request.body)
            assert api is not None  # it was found as it first arrived
            arrive(now_ms, request, api)

    def next_deadline_ms(self, due: int | None) -> int | None:
        """``due`` or the earliest release time, whichever comes first."""
        times = [t for t in (due, self._requests[0][0] if self._requests else None,
                             self._commits[0][0] if self._commits else None) if t is not None]
        return min(times) if times else None

    def _update_holding(self) -> None:
        self.holding = bool(self._requests or self._commits)
