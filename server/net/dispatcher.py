"""The seam between the network layer and whatever answers requests.

:class:`Dispatcher` is what :func:`server.net.serve` needs: the API keys and version ranges to
advertise and accept, the feature levels for ApiVersions, and ``handle`` to answer one decoded
request. :class:`HandlerTable` is a small concrete dispatcher built from a dict of handlers, used
by tests and by tools that serve a fixed set of APIs.

A connection hands one request at a time to ``handle`` and writes its response before reading
the next request (Kafka mutes a channel while a request is in flight), so responses on one
connection always go out in request order.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import trio

from messages.generated.api_versions_response import FinalizedFeatureKey, SupportedFeatureKey
from messages.protocol import Request
from messages.runtime import Message

__all__ = [
    "ChannelDispatcher",
    "Dispatcher",
    "FinalizedFeatures",
    "Handler",
    "HandlerTable",
    "PendingRequest",
    "RequestContext",
]


@dataclass(slots=True)
class RequestContext:
    """Where a request came from; one per connection, shared by its requests.

    ``listener_name`` is the configured listener name (e.g. ``CONTROLLER``: DescribeCluster
    answers with the endpoints of that listener), ``peer`` the remote ``(host, port)``,
    ``connection_id`` a number unique within the server's lifetime.
    """

    listener_name: str
    peer: tuple[str, int]
    connection_id: int
    principal: str = "User:ANONYMOUS"
    """Who the requests are made by, ``Type:name``: ``User:ANONYMOUS`` on a PLAINTEXT
    listener; inside an Envelope, the forwarded client's."""
    client_host: str | None = None
    """The client's address where it is not the peer's (inside an Envelope)."""
    token_authenticated: bool = False
    """The principal logged in with a delegation token (as an Envelope forwards it)."""

    @property
    def forwarded(self) -> bool:
        """The requests came inside an Envelope from a broker (KIP-590)."""
        return self.client_host is not None

    @property
    def host(self) -> str:
        """The client's address, as authorization matches it."""
        return self.client_host if self.client_host is not None else self.peer[0]

    @property
    def peer_text(self) -> str:
        """The peer as ``host:port`` for logs, an IPv6 host in brackets (``[::1]:9093``)."""
        host, port = self.peer
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass(frozen=True, slots=True)
class FinalizedFeatures:
    """The finalized feature levels as ApiVersions v3+ reports them; ``epoch`` -1 if unknown."""

    epoch: int = -1
    features: Sequence[FinalizedFeatureKey] = ()


class Dispatcher(Protocol):
    """What the network layer needs from the node.

    ``api_versions()`` is read once when the server starts: API key -> inclusive
    ``(min_version, max_version)``. ApiVersions (18) itself is answered by the network layer and
    must not be listed. The features are read on every ApiVersions request, so they may change.
    ``handle`` returns the response body for the request's version; raising closes the
    connection (the error is logged).
    """

    def api_versions(self) -> Mapping[int, tuple[int, int]]:
        """API key -> inclusive ``(min_version, max_version)`` to accept and advertise, without
        ApiVersions (18); read once at start."""
        ...

    def supported_features(self) -> Sequence[SupportedFeatureKey]:
        """SupportedFeatures for ApiVersions v3+ (name, inclusive level range); read on every
        ApiVersions request."""
        ...

    def finalized_features(self) -> FinalizedFeatures:
        """Finalized feature levels and their epoch for ApiVersions v3+; read on every
        ApiVersions request."""
        ...

    async def handle(self, request: Request, context: RequestContext) -> Message:
        """Answer one decoded request: the response body at the request's version. Raising closes
        the connection."""
        ...


Handler = Callable[[Request, RequestContext], Awaitable[Message]]


@dataclass
class HandlerTable:
    """A :class:`Dispatcher` from a table: ``handlers[api_key] = ((min, max), handler)``."""

    handlers: dict[int, tuple[tuple[int, int], Handler]] = field(default_factory=dict)
    supported: Sequence[SupportedFeatureKey] = ()
    finalized: FinalizedFeatures = field(default_factory=FinalizedFeatures)

    def register(self, api_key: int, versions: tuple[int, int], handler: Handler) -> None:
        """Serve ``api_key`` at ``versions`` (inclusive ``(min, max)``) with ``handler``,
        replacing any earlier entry."""
        self.handlers[int(api_key)] = (versions, handler)

    def api_versions(self) -> Mapping[int, tuple[int, int]]:
        """The registered API keys and their version ranges."""
        return {key: versions for key, (versions, _) in self.handlers.items()}

    def supported_features(self) -> Sequence[SupportedFeatureKey]:
        """The ``supported`` field."""
        return self.supported

    def finalized_features(self) -> FinalizedFeatures:
        """The ``finalized`` field."""
        return self.finalized

    async def handle(self, request: Request, context: RequestContext) -> Message:
        """Await the handler registered for the request's API key."""
        _, handler = self.handlers[request.header.request_api_key]
        return await handler(request, context)


class PendingRequest:
    """A request waiting for the node's answer (see :class:`ChannelDispatcher`).

    The node calls :meth:`respond` with the response body, or :meth:`fail` with an exception,
    exactly once, from any task; later calls raise RuntimeError.
    """

    __slots__ = ("_done", "_error", "_response", "context", "received_at", "request")

    def __init__(self, request: Request, context: RequestContext) -> None:
        self.request = request
        self.context = context
        self.received_at = trio.current_time()
        """Trio time (s) at which the request was decoded."""
        self._done = trio.Event()
        self._response: Message | None = None
        self._error: BaseException | None = None

    @property
    def done(self) -> bool:
        """True once :meth:`respond` or :meth:`fail` was called."""
        return self._done.is_set()

    def respond(self, response: Message) -> None:
        """Complete with ``response``, the body at the request's version; RuntimeError if already
        completed."""
        if self._done.is_set():
            raise RuntimeError("request already completed")
        self._response = response
        self._done.set()

    def fail(self, error: BaseException) -> None:
        """Complete without a response: the connection is closed and ``error`` logged."""
        if self._done.is_set():
            raise RuntimeError("request already completed")
        self._error = error
        self._done.set()

    async def wait(self) -> Message:
        """Wait for completion: return the response, or raise the error given to :meth:`fail`."""
        await self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._response is not None
        return self._response


@dataclass
class ChannelDispatcher:
    """A :class:`Dispatcher` that hands every request to one consuming task (the node) over a
    Trio memory channel, as :class:`PendingRequest` objects, and waits for its answer.

    The node may answer requests from different connections in any order; each connection still
    answers its own requests in order. ``supported`` and ``finalized`` may be reassigned at any
    time (e.g. when a new metadata.version is committed). If the receiving side is closed, the
    request fails and its connection is closed.
    """

    versions: Mapping[int, tuple[int, int]]
    send_channel: trio.MemorySendChannel[PendingRequest]
    supported: Sequence[SupportedFeatureKey] = ()
    finalized: FinalizedFeatures = field(default_factory=FinalizedFeatures)

    def api_versions(self) -> Mapping[int, tuple[int, int]]:
        """The fixed ``versions`` table."""
        return self.versions

    def supported_features(self) -> Sequence[SupportedFeatureKey]:
        """The current ``supported`` value."""
        return self.supported

    def finalized_features(self) -> FinalizedFeatures:
        """The current ``finalized`` value."""
        return self.finalized

    async def handle(self, request: Request, context: RequestContext) -> Message:
        """Send the request to the node as a :class:`PendingRequest` and wait for its answer;
        RuntimeError (closing the connection) if the node no longer receives."""
        pending = PendingRequest(request, context)
        try:
            await self.send_channel.send(pending)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise RuntimeError("the node is no longer accepting requests") from None
        return await pending.wait()
