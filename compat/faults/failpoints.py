"""Nemeses built from kwire's failpoints (``server.failpoints``): a controller that misbehaves in
its logic rather than in its process or network -- it replays commits late, refuses some of its
own appends, answers NOT_CONTROLLER, drops fetches, or answers broker heartbeats late.

A run whose plan holds one of these starts its kwire nodes with
:data:`KWIRE_EXTRA` (``kwire.unsafe.test.failpoints=true`` and the metrics endpoint on
:data:`METRICS_PORT`; each node has a network namespace of its own, so one port serves all). A
round arms its point on every kwire node of the quorum -- whichever leads, and whichever comes
to lead during the round -- through ``/failpoints`` beside ``/metrics``
(:func:`tools.failpoint_cmd.call`, from the client host), holds it, and the heal disarms every
node; the round's figure ``fired`` is how many times the points fired (a round whose point never
fired raises: it tested nothing).

Stock Kafka has no such switch: only a quorum of kwire nodes alone takes these nemeses (on a
mixed one a stock node may lead, and the points armed on its kwire followers would not fire),
and the soak's table says :data:`NOT_IN_STOCK` (or :data:`NOT_IN_MIXED`) for them instead of
leaving them out.

The nemeses (:data:`FAILPOINT_NEMESES`):

* ``slow-commit``: ``controller.commit`` ``delay(1000)``: every committed batch reaches the
  controller a second late (in order), so each write is answered a second late and the
  controller's image lags the high watermark;
* ``append-refused``: ``raft.append`` ``error(6)`` (NOT_LEADER_OR_FOLLOWER) for a third of the
  controller's appends: the host reverts what it applied ahead and answers the writes
  NOT_CONTROLLER (Kafka's controller on a failed ``scheduleAppend``);
* ``not-controller``: ``controller.request`` ``error(41)`` (NOT_CONTROLLER) for half the
  controller RPCs as they arrive: clients and brokers look for the active controller again;
* ``fetch-drop``: ``raft.fetch`` ``drop`` for a third of the followers' fetches: a follower waits
  a request timeout for the answer, and one that fetches nothing for
  ``controller.quorum.fetch.timeout.ms`` starts an election;
* ``heartbeat-delay`` (runs with brokers): ``controller.heartbeat`` held
  ``broker.session.timeout.ms`` plus 6 s: the brokers' sessions expire and the controller fences
  them (figure ``fenced_s``, once the other brokers stop listing one); the heal waits until every
  broker lists every broker again (``rejoined_s``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from compat.faults import cluster as _cluster
from compat.harness import wait_until
from tools.failpoint_cmd import call

__all__ = ["BROKER_FAILPOINT_NEMESES", "FAILPOINT_NEMESES", "KWIRE_EXTRA", "METRICS_PORT", "NOT_IN_MIXED", "NOT_IN_STOCK",
           "FailpointNemesis", "arm"]

METRICS_PORT = 9404
"""Each kwire node's metrics and ``/failpoints`` port, in its own network namespace."""
KWIRE_EXTRA = f"kwire.unsafe.test.failpoints=true\nkwire.prometheus.port={METRICS_PORT}\n"
"""The kwire nodes' extra properties in a run with failpoint nemeses."""
NOT_IN_STOCK = "n/a (no failpoints in stock Kafka)"
"""What the table and the report say for a failpoint nemesis on a quorum without kwire nodes."""
NOT_IN_MIXED = "n/a (no failpoints in stock Kafka, which may lead this quorum)"
"""... and on a mixed quorum: a stock leader appends, answers the fetches and the brokers, so
points armed on its kwire followers would not fire."""
HEARTBEAT_DELAY_MS = _cluster.SESSION_TIMEOUT_MS + 6000
FENCE_BOUND_S = (HEARTBEAT_DELAY_MS + _cluster.SESSION_TIMEOUT_MS // 8) / 1000 + 10.0
"""From arming ``heartbeat-delay`` until a broker is fenced: a session, one period of the
controller's expiry check, and a margin for the fencing to reach the brokers."""
REJOIN_BOUND_S = HEARTBEAT_DELAY_MS / 1000 + 30.0
"""From the heal until every broker lists every broker: the heartbeats still held when the point
was cleared are let in only when their delay has passed."""


@dataclass(frozen=True)
class FailpointNemesis:
    """One failpoint nemesis: the point, its action (``server.failpoints.parse_action``'s text
    form) and the probability a hit fires."""

    point: str
    action: str
    probability: float = 1.0


FAILPOINT_NEMESES: dict[str, FailpointNemesis] = {
    "slow-commit": FailpointNemesis("controller.commit", "delay(1000)"),
    "append-refused": FailpointNemesis("raft.append", "error(6)", 0.33),
    "not-controller": FailpointNemesis("controller.request", "error(41)", 0.5),
    "fetch-drop": FailpointNemesis("raft.fetch", "drop", 0.33),
}
"""The failpoint nemeses of a quorum alone (module docstring)."""
BROKER_FAILPOINT_NEMESES: dict[str, FailpointNemesis] = {
    "heartbeat-delay": FailpointNemesis("controller.heartbeat", f"delay({HEARTBEAT_DELAY_MS})"),
}
"""The failpoint nemeses of a run with stock brokers (module docstring)."""


class _Run(Protocol):
    """What :func:`arm` needs of :class:`compat.faults.rounds.Run`."""

    quorum: Any
    network: Any
    brokers: Any
    rounds: list[Any]


def endpoints(run: _Run) -> list[str]:
    """``host:port`` of every kwire node's ``/failpoints``."""
    quorum = run.quorum
    return [f"{quorum.hosts[i]}:{METRICS_PORT}" for i in sorted(quorum.kwire_ids)]


def _on_every_node(run: _Run, method: str, name: str | None = None,
                   body: dict[str, Any] | None = None) -> list[Any]:
    return run.network.call("client", lambda: [call(e, method, name, body) for e in endpoints(run)])


def fired(run: _Run, point: str) -> int:
    """How many times ``point`` fired on the kwire nodes since it was armed."""
    return sum(int(answer[point].get("fired", 0)) for answer in _on_every_node(run, "GET"))


def arm(run: _Run, nemesis: str) -> Callable[[], None]:
    """Arm ``nemesis``'s point on every kwire node of ``run``; returns the heal, which notes
    the round's figure ``fired``, disarms every node, and raises AssertionError when the point
    never fired. ``heartbeat-delay`` first waits until a broker is fenced (raising after
    :data:`FENCE_BOUND_S`, disarmed)."""
    spec = FAILPOINT_NEMESES.get(nemesis) or BROKER_FAILPOINT_NEMESES[nemesis]
    if set(run.quorum.ports) - set(run.quorum.kwire_ids):
        raise ValueError(f"{nemesis}: {NOT_IN_STOCK if not run.quorum.kwire_ids else NOT_IN_MIXED}")
    if nemesis in BROKER_FAILPOINT_NEMESES and run.brokers is None:
        raise ValueError(f"{nemesis} needs a run with brokers")
    this = run.rounds[-1]
    _on_every_node(run, "PUT", spec.point, {"action": spec.action, "probability": spec.probability})
    armed_at = time.monotonic()

    def heal() -> None:
        try:
            this.figures["fired"] = fired(run, spec.point)
        finally:
            _on_every_node(run, "DELETE")
        assert this.figures["fired"] > 0, f"{nemesis}: {spec.point} never fired"
        if nemesis == "heartbeat-delay":
            healed = time.monotonic()
            brokers = run.brokers
            run.network.call("client", lambda: brokers.wait_listed(set(brokers.nodes), REJOIN_BOUND_S))
            this.figures["rejoined_s"] = round(time.monotonic() - healed, 1)

    if nemesis == "heartbeat-delay":
        try:
            wait_until("a broker fenced while its heartbeats are held", lambda: _some_fenced(run), FENCE_BOUND_S)
        except BaseException:
            _on_every_node(run, "DELETE")
            raise
        this.figures["fenced_s"] = round(time.monotonic() - armed_at, 1)
    return heal


def _some_fenced(run: _Run) -> bool:
    """Whether some answering broker leaves a broker out of its Metadata (a fenced one)."""
    brokers = run.brokers
    views = run.network.call("client", lambda: [brokers.listed_by(i, timeout_s=3.0) for i in brokers.nodes])
    return any(v is not None and v != set(brokers.nodes) for v in views)
