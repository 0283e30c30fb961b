"""Stock brokers under a controller that misbehaves in its logic: three stock brokers of the newest
pinned release on three kwire controllers (static voters, ``compat.release_cluster``) whose
failpoints (``server.failpoints``) are armed on every controller through ``/failpoints``
beside ``/metrics`` while a kafka-python producer (idempotent, ``acks=all``) writes to a topic of
3 partitions, replication factor 3 and ``min.insync.replicas=2``:

(a) ``controller.heartbeat`` ``delay(broker.session.timeout.ms + 6 s)``: each BrokerHeartbeat
    is held longer than the brokers' sessions, so the active controller fences the brokers
    (Kafka's ``ClusterControlManager`` session expiry: a ``BrokerRegistrationChangeRecord`` with
    ``fenced`` 1), the other brokers stop listing a fenced one, and the held heartbeats unfence
    them when they are let in. Asserted: a broker seen fenced while armed, the controller's log
    holding a fence and as many unfences after the arming, every broker listed by every broker
    again after the point is cleared, and records acknowledged after that;
(b) ``controller.request`` ``error(41)`` (NOT_CONTROLLER) for half of every controller RPC for
    :data:`NOT_CONTROLLER_WINDOW_S`: each broker's channel to the controller
    (``NodeToControllerRequestThread``) drops its connection on such an answer, looks the
    active controller up again ("Recorded new KRaft controller" in its log) and resends; the
    brokers keep working. Asserted: the point fired, the brokers logged a rediscovery, a topic
    created through a broker meanwhile (a forwarded CreateTopics) exists, records acknowledged
    within the window, and every broker listed by every broker after it.

At the end every acknowledged record is read back (0 acknowledged writes lost). The figures --
records acknowledged and consumed, the fenced windows each broker went through, the time from
arming to the first fence and from the clear to every broker listed, rediscoveries -- are
printed (``-s``). Cost, in ``make test``: three broker JVMs and three kwire processes for 50-66 s,
19-22 CPU-s (``/usr/bin/time`` of this file alone, twice: user 17.0 s and system 1.9 s, then
18.9 s and 2.9 s).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from compat.clients import Load, read_all
from compat.faults.history import committed_messages
from compat.harness import ELECTION_BOUND_S, free_port, newest_pinned_release, wait_until
from compat.kafka import release_facts, require_kafka
from compat.release_cluster import BROKER_START_TIMEOUT_S, SESSION_TIMEOUT_MS, ReleaseCluster
from messages.generated.broker_registration_change_record import BrokerRegistrationChangeRecord
from tools.failpoint_cmd import call

pytestmark = [pytest.mark.compat, pytest.mark.slow]

BROKER_IDS = (101, 102, 103)
TOPIC = "under-failpoints"
HEARTBEAT_DELAY_MS = SESSION_TIMEOUT_MS + 6000
FENCE_BOUND_S = (HEARTBEAT_DELAY_MS + SESSION_TIMEOUT_MS // 8) / 1000 + 10.0
"""From arming until a broker is seen fenced: a held heartbeat's delay, one period of the
controller's expiry check and a margin (a session expires before the delay has passed)."""
RECOVER_BOUND_S = HEARTBEAT_DELAY_MS / 1000 + 30.0
"""From the clear until every broker lists every broker: heartbeats held before the clear are
let in only when their delay has passed, then the broker's next heartbeat unfences it."""
NOT_CONTROLLER_WINDOW_S = 15.0
RECORDS_PER_S = 200
REDISCOVERED = "Recorded new KRaft controller"
"""What a stock broker's ``NodeToControllerRequestThread`` logs (INFO) when it has looked the
active controller up again."""


def test_stock_brokers_under_a_misbehaving_kwire_controller(tmp_path: Path) -> None:
    kafka = newest_pinned_release()
    require_kafka(kafka.version)
    brokers = dict.fromkeys(BROKER_IDS, kafka.version)
    with ReleaseCluster(tmp_path, release_facts(kafka.version).metadata_version, brokers) as cluster:
        endpoints = _enable_failpoints(cluster)
        cluster.start()
        cluster.wait_listed(set(BROKER_IDS), BROKER_START_TIMEOUT_S)
        _create(cluster.bootstrap, TOPIC, {"min.insync.replicas": "2"})
        cluster.wait_in_sync(TOPIC, set(BROKER_IDS), 3)
        load = Load(cluster.bootstrap, TOPIC, RECORDS_PER_S)
        load.start()
        figures: dict[str, object] = {}
        try:
            with _watching(cluster) as watch:
                # (a) heartbeats answered later than the sessions last
                _, _, from_offset = cluster.quorum.wait_leader(ELECTION_BOUND_S)
                armed = time.monotonic()
                _arm(endpoints, "controller.heartbeat", f"delay({HEARTBEAT_DELAY_MS})")
                try:
                    wait_until("a broker fenced while its heartbeats are held", watch.some_fenced, FENCE_BOUND_S,
                               interval_s=0.25)
                    figures["first_fence_s"] = round(time.monotonic() - armed, 1)
                finally:
                    figures["heartbeats_held"] = _clear(endpoints, "controller.heartbeat")
                cleared = time.monotonic()
                cluster.wait_listed(set(BROKER_IDS), RECOVER_BOUND_S)
                figures["recovered_s"] = round(time.monotonic() - cleared, 1)
                acked_then = len(load.acked)
                wait_until("records acknowledged after the brokers are back", lambda: len(load.acked) > acked_then,
                           30.0)
                figures["fenced_windows"] = watch.windows(since=armed)
                # (b) NOT_CONTROLLER for half the controller RPCs
                logged_before = _rediscoveries(cluster)
                acked_before = len(load.acked)
                started = time.monotonic()
                _arm(endpoints, "controller.request", "error(41)", 0.5)
                try:
                    _create(cluster.bootstrap, "created-under-not-controller")
                    time.sleep(max(0.0, NOT_CONTROLLER_WINDOW_S - (time.monotonic() - started)))
                finally:
                    figures["not_controller_answers"] = _clear(endpoints, "controller.request")
                figures["acked_in_window"] = len(load.acked) - acked_before
                figures["rediscoveries"] = _rediscoveries(cluster) - logged_before
                cluster.wait_listed(set(BROKER_IDS), RECOVER_BOUND_S)
                figures["fenced_in_window"] = watch.windows(since=started)
                assert "created-under-not-controller" in _topics(cluster.bootstrap)
                leader, _, to_offset = cluster.quorum.wait_leader(ELECTION_BOUND_S)
        finally:
            load.stop()
        acked = list(load.acked)
        back = read_all(cluster.bootstrap, TOPIC, len(acked))
    # the fencing as the active controller committed it from the arming to the end of (b),
    # read once it has stopped (the brokers' shutdown at the end changes their registrations too)
    records = [m for offset, m in committed_messages(tmp_path / "controllers" / f"data{leader}", to_offset)
               if offset >= from_offset and isinstance(m, BrokerRegistrationChangeRecord)]
    lost = sorted(set(acked) - set(back))
    fences, unfences = sum(r.fenced == 1 for r in records), sum(r.fenced == -1 for r in records)
    figures.update(acked=len(acked), consumed=sum(back.values()), lost=len(lost), send_errors=len(load.failed),
                   fence_records=fences, unfence_records=unfences)
    print(f"stock {kafka.version} brokers under kwire controller failpoints: "
          + ", ".join(f"{k} {v}" for k, v in figures.items()))
    assert not lost, f"{len(lost)} acknowledged records not read back, e.g. {lost[:3]}"
    assert figures["heartbeats_held"] and fences, figures
    assert unfences >= fences, f"a fenced broker was not unfenced: {figures}"
    assert figures["not_controller_answers"] and figures["rediscoveries"], figures
    assert figures["acked_in_window"], figures


def _enable_failpoints(cluster: ReleaseCluster) -> list[str]:
    """Give each kwire controller ``kwire.unsafe.test.failpoints=true`` and a metrics port on
    localhost (before it starts); returns their ``host:port``."""
    endpoints = []
    for i in cluster.quorum.ports:
        port = free_port()
        with (cluster.quorum.root / f"{i}.properties").open("a", encoding="utf-8") as props:
            props.write(f"kwire.unsafe.test.failpoints=true\nkwire.prometheus.host=127.0.0.1\n"
                        f"kwire.prometheus.port={port}\n")
        endpoints.append(f"127.0.0.1:{port}")
    return endpoints


def _arm(endpoints: list[str], point: str, action: str, probability: float = 1.0) -> None:
    for endpoint in endpoints:
        call(endpoint, "PUT", point, {"action": action, "probability": probability})


def _clear(endpoints: list[str], point: str) -> int:
    """Disarm ``point`` on every controller; how many times it fired there."""
    fired = sum(int(call(e, "GET")[point].get("fired", 0)) for e in endpoints)
    for endpoint in endpoints:
        call(endpoint, "DELETE", point)
    return fired


def _create(bootstrap: str, topic: str, configs: dict[str, str] | None = None) -> None:
    """Create ``topic`` (3 partitions, replication factor 3) through a broker with kafka-python's
    admin, which the broker forwards to the active controller."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kwire-failpoints", request_timeout_ms=30_000)
    try:
        admin.create_topics([NewTopic(topic, 3, 3, topic_configs=configs or {})], timeout_ms=30_000)
    finally:
        admin.close()


def _topics(bootstrap: str) -> set[str]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kwire-failpoints", request_timeout_ms=30_000)
    try:
        return set(admin.list_topics())
    finally:
        admin.close()


def _rediscoveries(cluster: ReleaseCluster) -> int:
    """How many times the brokers have logged looking the active controller up again."""
    return sum(node.stdout_path.read_text(encoding="utf-8", errors="replace").count(REDISCOVERED)
               for group in cluster.groups.values() for node in group.nodes.values())


class _Watch:
    """Which brokers each broker lists, every quarter second, in a thread."""

    def __init__(self, cluster: ReleaseCluster) -> None:
        self.cluster = cluster
        self.samples: list[tuple[float, int, set[int]]] = []
        """``(time.monotonic(), asked broker, brokers it listed)``, answers only."""
        self.stopped = threading.Event()

    def run(self) -> None:
        group = next(iter(self.cluster.groups.values()))
        while not self.stopped.is_set():
            for broker in BROKER_IDS:
                listed = group.listed_by(broker, timeout_s=2.0)
                if listed is not None:
                    self.samples.append((time.monotonic(), broker, listed))
            self.stopped.wait(0.25)

    def some_fenced(self) -> bool:
        recent = self.samples[-len(BROKER_IDS):]
        return any(listed != set(BROKER_IDS) for _, _, listed in recent)

    def windows(self, since: float) -> list[tuple[int, float, float]]:
        """``(broker, from s, to s)``: each stretch, after ``since``, in which an answering
        broker did not list ``broker`` (it was fenced), times from ``since``."""
        out: list[tuple[int, float, float]] = []
        open_at: dict[int, float] = {}
        for at, _, listed in (s for s in self.samples if s[0] >= since):
            for broker in BROKER_IDS:
                if broker not in listed and broker not in open_at:
                    open_at[broker] = at
                elif broker in listed and broker in open_at:
                    out.append((broker, round(open_at.pop(broker) - since, 1), round(at - since, 1)))
        out += [(b, round(a - since, 1), -1.0) for b, a in open_at.items()]  # -1: still fenced
        return sorted(out)


@contextmanager
def _watching(cluster: ReleaseCluster) -> Iterator[_Watch]:
    watch = _Watch(cluster)
    thread = threading.Thread(target=watch.run, daemon=True)
    thread.start()
    try:
        yield watch
    finally:
        watch.stopped.set()
        thread.join(timeout=30)
