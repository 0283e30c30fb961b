"""Moving a request where admission sends it: :class:`RequestRouter`.

Each request the connections read goes to ``server.controller.admission`` (Kafka's
``ControllerApis``), and the router carries out its verdict: an answer at once, a connection
closed, an opened request that takes the same path as if its client had sent it here (its
answer relayed back by ``server.node.relay``), a controller RPC to the host, a raft RPC to
the core (by the id its Reply will name). It holds no policy of its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace

import trio

from kwire.wire import DecodeError
from server.config import KRaftConfig
from server.controller.admission import Caller, Forwarded, Malformed, Refused, ToController
from server.controller.host import ControllerRequest, QuorumController
from server.net import PendingRequest
from server.node.relay import relay_answer
from server.raft.events import Event, RequestReceived

__all__ = ["RequestRouter"]


class RequestRouter:
    """The requests of a node of ``config``: ``host()`` is its controller host, ``now_ms()``
    its clock, ``step(events)`` steps its core and host (the host only, with no events), and
    relays run in ``nursery``. ``pending`` holds the raft requests the core has not answered
    yet, by request id."""

    def __init__(
        self,
        config: KRaftConfig,
        host: Callable[[], QuorumController | None],
        now_ms: Callable[[], int],
        step: Callable[[list[Event]], Awaitable[None]],
        nursery: Callable[[], trio.Nursery | None],
    ) -> None:
        self.config = config
        self._host = host
        self.now_ms = now_ms
        self._step = step
        self._nursery = nursery
        self.pending: dict[int, PendingRequest] = {}
        self._next_request_id = 1
        self.host_unpolled = False
        """The host took requests since it was last polled (the driver's turn clears it): it
        may hold appends, which must reach the core before anything the core appends itself."""

    async def route(self, pending: PendingRequest, *, step_host: bool = True) -> None:
        """Move a request where admission (``server.controller.admission``) sends it: answered
        at once, the connection closed, opened into an inner request that takes the same path
        as if its client had sent it here (its answer relayed back), to the host (a controller
        RPC) or to the core. ``step_host`` False: the caller polls the host (and steps the
        core with its appends) once it handed it every request that queued."""
        host = self._host()
        assert host is not None
        request, context = pending.request, pending.context
        body, version = request.body, request.header.request_api_version
        protocol = self.config.listener_security_protocol_map.get(context.listener_name.upper(), "PLAINTEXT")
        verdict = host.admission.admit(body, version, Caller(
            context.principal, context.host, context.listener_name, protocol, context.token_authenticated,
            context.forwarded,
        ))
        if isinstance(verdict, Refused):
            pending.respond(verdict.response)
        elif isinstance(verdict, Malformed):
            pending.fail(DecodeError(verdict.reason))
        elif isinstance(verdict, Forwarded):
            inner = PendingRequest(verdict.request, replace(
                context, principal=verdict.principal, client_host=verdict.client_host,
                token_authenticated=verdict.token_authenticated))
            nursery = self._nursery()
            assert nursery is not None
            nursery.start_soon(relay_answer, pending, inner, verdict.answer)
            await self.route(inner, step_host=step_host)
        elif isinstance(verdict, ToController):
            now = self.now_ms()
            received_ms = now - round((trio.current_time() - pending.received_at) * 1000)
            host.request(now, ControllerRequest(
                pending, body, version, context.listener_name, received_ms, context.principal, context.host,
                verdict.token_requests_allowed,
            ))
            self.host_unpolled = True
            if step_host:
                await self._step([])
        else:
            if self.host_unpolled:  # the host's appends first: the core may append on this request
                await self._step([])
            request_id, self._next_request_id = self._next_request_id, self._next_request_id + 1
            self.pending[request_id] = pending
            await self._step([RequestReceived(request_id, version, body, context.listener_name)])
