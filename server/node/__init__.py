"""The KRaft controller node: the Trio process around the sans-IO core.

One module per concern:

* :mod:`server.node.driver`: :class:`Node`, the task that owns the core, steps it with every
  event (requests, responses, timers) and carries out its Outboxes; :class:`RaftListener`,
  the local state machine it feeds (Kafka's ``RaftClient.Listener``).
* :mod:`server.node.startup`: what start-up reads from disk (meta.properties, the metadata
  log, quorum-state, the bootstrap voters) and :class:`NodeStartupError`.
* :mod:`server.node.peer`: the outbound side towards one peer.
* :mod:`server.node.features`: the finalized features read from committed records.
* :mod:`server.node.apis`: what the node advertises in ApiVersions.
* :mod:`server.node.registration`: the node's own KIP-919 registration.
* :mod:`server.node.log_cleaner`: snapshot writing and log retention.
* :mod:`server.node.metrics`: the Prometheus endpoint.

The controller the node hosts is sans-IO: ``server.controller.host``.

``server.node`` re-exports what callers use, so they need not know the split.
"""

from __future__ import annotations

from server.controller.describe_cluster import CONTROLLER_ENDPOINT_TYPE
from server.controller.features import MAX_METADATA_VERSION_LEVEL, supported_features
from server.node.apis import api_versions
from server.node.driver import Node, RaftListener
from server.node.startup import NodeStartupError

__all__ = [
    "CONTROLLER_ENDPOINT_TYPE",
    "MAX_METADATA_VERSION_LEVEL",
    "Node",
    "NodeStartupError",
    "RaftListener",
    "api_versions",
    "supported_features",
]
