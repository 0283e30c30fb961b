"""The node's metrics in Prometheus' text format, under Kafka's metric names.

With ``kwire.prometheus.port`` set (``kwire.prometheus.host``, default all interfaces), the node
serves ``/metrics`` through ``prometheus_client``'s HTTP server (a daemon thread). What it serves
is a snapshot the node takes once a second on its own Trio task (:func:`take_snapshot`), so the
server thread never reads the live image. Names follow the JMX names Kafka's controller
registers, with ``.``, ``:``, ``=`` and ``-`` as ``_``:

* ``kafka_controller_KafkaController_<Name>`` (``QuorumControllerMetrics``,
  ``ControllerMetadataMetrics``): ActiveControllerCount, GlobalTopicCount,
  GlobalPartitionCount, OfflinePartitionsCount, PreferredReplicaImbalanceCount,
  ActiveBrokerCount, FencedBrokerCount, LastAppliedRecordOffset, LastCommittedRecordOffset;
* ``kafka_controller_ControllerEventManager_<Name>`` (``QuorumControllerMetrics``): the
  summaries EventQueueTimeMs and EventQueueProcessingTimeMs of the controller requests
  (``server.controller.event_times``): quantiles 0.5 to 0.999 of the recent ones, ``_count`` and
  ``_sum``;
* ``kafka_server_raft_metrics_<name>`` (``KafkaRaftMetrics``, group ``raft-metrics``):
  current_leader, current_epoch, high_watermark, log_end_offset, and current_state as a
  ``state`` label of value 1 (leader, follower, candidate, prospective, unattached, resigned).

The same server answers ``/failpoints`` (``server.failpoints``) when the node was started with
``kwire.unsafe.test.failpoints=true`` (404 otherwise), in JSON:

* ``GET /failpoints``: every point, ``{name: {"where", "action", "probability", "fired"}}``;
* ``PUT`` or ``POST /failpoints/NAME`` with ``{"action": "delay(MS)" | "error(CODE)" | "drop" |
  "halt", "probability": P}`` (P defaults to 1): arms it, answers its entry (400 on a bad
  name or action);
* ``DELETE /failpoints/NAME`` (or ``/failpoints``: all): disarms, ``{"cleared": bool}``.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

import trio
from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import ThreadingWSGIServer
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from server.controller.event_times import EventTimesSummary
from server.failpoints import Failpoints, parse_action

__all__ = ["MetricsServer", "Snapshot", "host_snapshot", "serve_metrics", "take_snapshot"]

_CONTROLLER = "kafka_controller_KafkaController_"
_RAFT = "kafka_server_raft_metrics_"
_EVENTS = "kafka_controller_ControllerEventManager_"


@dataclass(frozen=True)
class Snapshot:
    """The values one scrape reports (controller gauges by Kafka name, raft gauges by name)."""

    controller: dict[str, float] = field(default_factory=dict)
    raft: dict[str, float] = field(default_factory=dict)
    state: str = "unattached"
    events: dict[str, EventTimesSummary] = field(default_factory=dict)
    """ControllerEventManager timer name -> its summary."""


def take_snapshot(
    core: Any, controller: Any, *, active: bool, applied_offset: int, events: dict[str, EventTimesSummary] | None = None
) -> Snapshot:
    """The metrics of a node whose core and controller are ``core`` and ``controller``
    (either None before start-up); ``active`` when it is the active controller,
    ``applied_offset`` the last offset its controller replayed (-1: none); ``events`` the
    ControllerEventManager timers by Kafka name."""
    values: dict[str, float] = {"ActiveControllerCount": 1.0 if active else 0.0}
    if controller is not None:
        image = controller.replication
        registrations = controller.cluster.registrations.values()
        values.update(
            GlobalTopicCount=len(image.topics),
            GlobalPartitionCount=sum(len(topic.partitions) for topic in image.topics.values()),
            OfflinePartitionsCount=len(image.partitions_without_leader()),
            PreferredReplicaImbalanceCount=image.imbalanced_count(),
            ActiveBrokerCount=sum(1 for r in registrations if not r.fenced),
            FencedBrokerCount=sum(1 for r in registrations if r.fenced),
            LastAppliedRecordOffset=applied_offset,
        )
    raft: dict[str, float] = {}
    state = "unattached"
    if core is not None:
        leader = core.leader_and_epoch.leader_id
        hwm = core.high_watermark
        values["LastCommittedRecordOffset"] = hwm - 1
        raft = {
            "current_leader": -1 if leader is None else leader,
            "current_epoch": core.epoch,
            "high_watermark": hwm,
            "log_end_offset": core.log.log_end_offset,
        }
        state = type(core.state).__name__.lower()
    return Snapshot(values, raft, state, dict(events or {}))


def host_snapshot(core: Any, host: Any) -> Snapshot:
    """The metrics of a node whose core and controller host (``server.controller.host``) are
    ``core`` and ``host``: the host's controller, whether it is active, its last replayed
    offset and its request timers."""
    return take_snapshot(
        core, host.controller, active=host.active_controller() is not None, applied_offset=host.replayed_offset - 1,
        events={
            "EventQueueTimeMs": host.queue_times.summary(),
            "EventQueueProcessingTimeMs": host.processing_times.summary(),
        },
    )


class _Collector(Collector):
    def __init__(self, server: MetricsServer) -> None:
        self.server = server

    def collect(self) -> Iterator[Metric]:
        snapshot = self.server.snapshot
        for name, summary in sorted(snapshot.events.items()):
            metric = Metric(_EVENTS + name, f"kafka.controller:type=ControllerEventManager,name={name}", "summary")
            for quantile, value in summary.quantiles.items():
                metric.add_sample(_EVENTS + name, {"quantile": str(quantile)}, value)
            metric.add_sample(_EVENTS + name + "_count", {}, summary.count)
            metric.add_sample(_EVENTS + name + "_sum", {}, summary.sum_ms)
            yield metric
        for name, value in sorted(snapshot.controller.items()):
            yield GaugeMetricFamily(_CONTROLLER + name, f"kafka.controller:type=KafkaController,name={name}", value=value)
        for name, value in sorted(snapshot.raft.items()):
            yield GaugeMetricFamily(_RAFT + name, f"kafka.server:type=raft-metrics,{name.replace('_', '-')}", value=value)
        state = GaugeMetricFamily(_RAFT + "current_state", "kafka.server:type=raft-metrics,current-state", labels=["state"])
        state.add_metric([snapshot.state], 1.0)
        yield state


_Start = Callable[[str, list[tuple[str, str]]], Any]


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        """No access log."""


def _failpoints_app(failpoints: Failpoints | None, environ: dict[str, Any], start: _Start) -> Iterable[bytes]:
    """``/failpoints`` (module docstring)."""

    def answer(status: str, body: object) -> list[bytes]:
        start(status, [("Content-Type", "application/json")])
        return [json.dumps(body, sort_keys=True).encode() + b"\n"]

    if failpoints is None:
        return answer("404 Not Found", {"error": "failpoints are off (kwire.unsafe.test.failpoints=false)"})
    method = environ["REQUEST_METHOD"]
    name = environ.get("PATH_INFO", "")[len("/failpoints"):].strip("/")
    try:
        if method == "GET" and not name:
            return answer("200 OK", failpoints.list())
        if method == "DELETE":
            return answer("200 OK", {"cleared": failpoints.clear(name or None)})
        if method in ("PUT", "POST") and name:
            length = int(environ.get("CONTENT_LENGTH") or 0)
            spec = json.loads(environ["wsgi.input"].read(length) or b"{}")
            if not isinstance(spec, dict) or not isinstance(spec.get("action"), str):
                raise ValueError('the body must be {"action": "...", "probability": P}')
            failpoints.arm(name, parse_action(spec["action"], float(spec.get("probability", 1.0))))
            return answer("200 OK", {name: failpoints.list()[name]})
    except (ValueError, TypeError) as exc:
        return answer("400 Bad Request", {"error": str(exc)})
    return answer("405 Method Not Allowed", {"error": f"{method} {environ.get('PATH_INFO')}"})


class MetricsServer:
    """``/metrics`` on ``host``:``port`` (port 0: any free one; :attr:`port` tells which), serving
    the latest :attr:`snapshot`, and ``/failpoints`` over ``failpoints`` (None: 404)."""

    def __init__(self, host: str, port: int, failpoints: Failpoints | None = None) -> None:
        self.snapshot = Snapshot()
        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector(self))
        metrics = make_wsgi_app(registry)

        def app(environ: dict[str, Any], start: _Start) -> Iterable[bytes]:
            path = environ.get("PATH_INFO", "")
            if path == "/failpoints" or path.startswith("/failpoints/"):
                return _failpoints_app(failpoints, environ, start)
            return metrics(environ, start)  # type: ignore[no-any-return]

        class Server(ThreadingWSGIServer):
            address_family = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM)[0][0]

        self._server = make_server(host, port, app, Server, handler_class=_Quiet)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        self.port: int = self._server.server_address[1]

    def update(self, snapshot: Snapshot) -> None:
        """Serve ``snapshot`` from now on (a reference swap: scrapes see one whole snapshot)."""
        self.snapshot = snapshot

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()


async def serve_metrics(
    host: str, port: int, snapshot: Callable[[], Snapshot], *, on_bound: Callable[[int], None] | None = None,
    failpoints: Failpoints | None = None,
) -> None:
    """Serve ``/metrics`` on ``host``:``port`` with a new ``snapshot()`` every second until
    cancelled, and ``/failpoints`` over ``failpoints`` (None: 404); ``on_bound`` hears the
    bound port first."""
    server = MetricsServer(host, port, failpoints)
    if on_bound is not None:
        on_bound(server.port)
    try:
        while True:
            server.update(snapshot())
            await trio.sleep(1)
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(server.close)
