"""Trio networking: the listeners that serve Kafka's protocol (:func:`serve`) and the seam to
the node (:class:`Dispatcher`). Outbound connections are ``kwire.connection``."""

from server.net.api_versions import ApiVersionsResponder
from server.net.dispatcher import (
    Dispatcher,
    FinalizedFeatures,
    Handler,
    HandlerTable,
    RequestContext,
)
from server.net.server import BoundListener, RunningServer, serve

__all__ = [
    "ApiVersionsResponder",
    "BoundListener",
    "Dispatcher",
    "FinalizedFeatures",
    "Handler",
    "HandlerTable",
    "RequestContext",
    "RunningServer",
    "serve",
]
