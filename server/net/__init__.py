"""Trio networking: the listeners that serve Kafka's protocol (:func:`serve`) and the seam to
the node (:class:`Dispatcher`). Outbound connections are ``server.net.client``."""

from server.net.api_versions import ApiVersionsResponder
from server.net.dispatcher import (
    ChannelDispatcher,
    Dispatcher,
    FinalizedFeatures,
    Handler,
    HandlerTable,
    PendingRequest,
    RequestContext,
)
from server.net.server import BoundListener, RunningServer, serve

__all__ = [
    "ApiVersionsResponder",
    "BoundListener",
    "ChannelDispatcher",
    "Dispatcher",
    "FinalizedFeatures",
    "Handler",
    "HandlerTable",
    "PendingRequest",
    "RequestContext",
    "RunningServer",
    "serve",
]
