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

from messages.generated.api_versions_response import FinalizedFeatureKey, SupportedFeatureKey
from messages.protocol import Request
from messages.runtime import Message

__all__ = ["Dispatcher", "FinalizedFeatures", "Handler", "HandlerTable", "RequestContext"]


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

    @property
    def peer_text(self) -> str:
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

    def api_versions(self) -> Mapping[int, tuple[int, int]]: ...

    def supported_features(self) -> Sequence[SupportedFeatureKey]: ...

    def finalized_features(self) -> FinalizedFeatures: ...

    async def handle(self, request: Request, context: RequestContext) -> Message: ...


Handler = Callable[[Request, RequestContext], Awaitable[Message]]


@dataclass
class HandlerTable:
    """A :class:`Dispatcher` from a table: ``handlers[api_key] = ((min, max), handler)``."""

    handlers: dict[int, tuple[tuple[int, int], Handler]] = field(default_factory=dict)
    supported: Sequence[SupportedFeatureKey] = ()
    finalized: FinalizedFeatures = field(default_factory=FinalizedFeatures)

    def register(self, api_key: int, versions: tuple[int, int], handler: Handler) -> None:
        self.handlers[int(api_key)] = (versions, handler)

    def api_versions(self) -> Mapping[int, tuple[int, int]]:
        return {key: versions for key, (versions, _) in self.handlers.items()}

    def supported_features(self) -> Sequence[SupportedFeatureKey]:
        return self.supported

    def finalized_features(self) -> FinalizedFeatures:
        return self.finalized

    async def handle(self, request: Request, context: RequestContext) -> Message:
        _, handler = self.handlers[request.header.request_api_key]
        return await handler(request, context)
