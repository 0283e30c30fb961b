"""The KRaft controller node: the Trio process around the sans-IO core.

One module per concern:

* :mod:`server.node.driver`: :class:`Node`, the task that owns the core and the host, steps
  them with every event (requests, responses, timers) through
  ``server.controller.stepping.steps`` and carries out their outboxes; :class:`RaftListener`,
  the local state machine it feeds (Kafka's ``RaftClient.Listener``).
* :mod:`server.node.fairness`: which item the driving task takes next, and when it pauses.
* :mod:`server.node.linger`: appends held for ``controller.quorum.append.linger.ms``.
* :mod:`server.node.requests`: each request moved where admission
  (``server.controller.admission``) sends it; :mod:`server.node.relay` answers an opened
  request's outer one.
* :mod:`server.node.snapshot_files`: the snapshot file pipeline (build, defer, write, freeze).
* :mod:`server.node.blocking`: file I/O off (or on) the event loop, with a WARN when it holds
  the driving task.
* :mod:`server.node.raft_target`: how the driver carries out a core Outbox.
* :mod:`server.node.startup`: what start-up reads from disk (meta.properties, the metadata
  log, quorum-state, the bootstrap voters) and :class:`NodeStartupError`.
* :mod:`server.node.peer`: the outbound side towards one peer.
* :mod:`server.node.features`: the finalized features read from committed records.
* :mod:`server.node.apis`: what the node advertises in ApiVersions.
* :mod:`server.node.security`: the TLS and SASL settings of the listeners.
* :mod:`server.node.registration`: the node's own KIP-919 registration.
* :mod:`server.node.log_cleaner`: log retention.
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
