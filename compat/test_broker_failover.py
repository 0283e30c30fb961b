"""Stock brokers under load while the active kwire controller is killed, again and again
(KIP-631; issue "stock Kafka brokers run on a kwire quorum").

Three kwire controllers (a dynamic quorum), three stock brokers of a pinned release, a topic of
6 partitions and replication factor 3, and a kafka-python producer (idempotent, acks=all)
writing numbered records to it without pause. ``FAILOVERS`` times: kill -9 of the active
controller, a new one elected, a new topic created through kafka-python's admin client and a
record written to it and read back, the killed controller restarted and caught up. Asserted:

* no broker process exits and every broker is still listed (unfenced) by every broker at the
  end: the new active controller gives each broker a fresh session;
* every topic created after a failover takes a record and gives it back;
* every record the producer saw acknowledged is read back from the loaded topic, and none
  twice (the idempotent producer's sequence numbers, over producer ids from
  AllocateProducerIds).

Cost: ~5 s per failover. ``make test`` runs 10 failovers on the newest release and 3 on 3.9.2;
``make nightly`` runs 10 on both (``KWIRE_FAILOVERS``).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from compat.conftest import KafkaRelease
from compat.test_mixed_quorum import ELECTION_BOUND_S, START_TIMEOUT_S, Quorum
from compat.test_storage_interop import CLUSTER_ID, _free_port
from tools.stock_brokers import StockBrokers

pytestmark = pytest.mark.compat

BROKER_IDS = (101, 102, 103)
BROKER_START_TIMEOUT_S = 90.0
TOPIC_TIMEOUT_S = 60.0


def _failovers(kafka: KafkaRelease) -> int:
    configured = os.environ.get("KWIRE_FAILOVERS")
    if configured:
        return int(configured)
    return 10 if kafka.version.startswith("4.") else 3


class Load:
    """A kafka-python producer (idempotent, acks=all) writing ``topic-<n>`` values to ``topic``
    in a thread until stopped; ``acked`` holds the values the brokers acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from kafka import KafkaProducer

        self.topic = topic
        self.producer = KafkaProducer(
            bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5,
            delivery_timeout_ms=120_000, request_timeout_ms=30_000,
        )
        self.acked: list[str] = []
        self.failed: list[str] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="load", daemon=True)

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            value = f"{self.topic}-{n:08d}"
            n += 1
            future = self.producer.send(self.topic, value.encode())
            future.add_callback(lambda _meta, value=value: self._note(self.acked, value))
            future.add_errback(lambda exc, value=value: self._note(self.failed, f"{value}: {exc!r}"))
            if n % 100 == 0:
                time.sleep(0.01)  # about 10,000 records/s at most

    def _note(self, into: list[str], value: str) -> None:
        with self._lock:
            into.append(value)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.producer.flush(timeout=120)
        self.producer.close()


def _read_all(bootstrap: str, topic: str, at_least: int, timeout_s: float = 120.0) -> Counter[str]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest")
    seen: Counter[str] = Counter()
    deadline = time.monotonic() + timeout_s
    try:
        while sum(seen.values()) < at_least and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=1000).values():
                seen.update(record.value.decode() for record in batch)
    finally:
        consumer.close()
    return seen


def _new_topic_works(bootstrap: str, topic: str) -> None:
    """Create ``topic`` (6 partitions, replication factor 3) with kafka-python's admin client,
    write one record to it and read it back."""
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kwire-failover", request_timeout_ms=30_000)
    try:
        admin.create_topics([NewTopic(topic, 6, 3)], timeout_ms=30_000)
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    try:
        producer.send(topic, b"after-failover").get(timeout=TOPIC_TIMEOUT_S)
    finally:
        producer.close()
    back = _read_all(bootstrap, topic, 1, TOPIC_TIMEOUT_S)
    assert back == Counter({"after-failover": 1}), back


def test_brokers_ride_out_active_controller_kills_under_load(kafka: KafkaRelease, tmp_path: Path) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    failovers = _failovers(kafka)
    quorum = Quorum(kafka, tmp_path, {1, 2, 3}, dynamic=True)
    bootstrap_controllers = ",".join(f"localhost:{p}" for p in quorum.ports.values())
    brokers = StockBrokers.create(
        tmp_path / "brokers", kafka.version, cluster_id=CLUSTER_ID, bootstrap_controllers=bootstrap_controllers,
        ports={i: _free_port() for i in BROKER_IDS},
    )
    load: Load | None = None
    timings: list[str] = []
    try:
        for i in quorum.ports:
            quorum.start(i)
        quorum.wait_leader(START_TIMEOUT_S)
        brokers.start()
        brokers.wait_listed(set(BROKER_IDS), BROKER_START_TIMEOUT_S)
        bootstrap = brokers.bootstrap_servers
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kwire-failover")
        try:
            admin.create_topics([NewTopic("load", 6, 3)], timeout_ms=30_000)
        finally:
            admin.close()
        load = Load(bootstrap, "load")
        load.start()
        for round_ in range(failovers):
            quorum.settled_high_watermark()  # every controller up and caught up
            leader, _, _ = quorum.wait_leader(ELECTION_BOUND_S)
            acked_before = len(load.acked)
            killed_at = time.monotonic()
            quorum.procs[leader].send_signal(signal.SIGKILL)
            quorum.procs[leader].wait(30)
            new_leader, epoch, _ = quorum.wait_leader(ELECTION_BOUND_S, excluded=leader)
            elected = time.monotonic() - killed_at
            _new_topic_works(bootstrap, f"after-{round_}")
            worked = time.monotonic() - killed_at
            timings.append(f"kill {round_ + 1}: {leader} -> {new_leader} (epoch {epoch}) in {elected:.1f} s, "
                           f"new topic used {worked:.1f} s after the kill, {len(load.acked) - acked_before} acks meanwhile")
            quorum.start(leader)
        quorum.settled_high_watermark()
        assert len(load.acked) > acked_before, "the load stopped being acknowledged"
        load.stop()
        acked = list(load.acked)
        assert not load.failed, load.failed[:5]
        back = _read_all(bootstrap, "load", len(acked))
        missing = set(acked) - set(back)
        duplicated = [v for v, n in back.items() if n > 1]
        assert not missing and not duplicated, (
            f"{len(missing)} acknowledged records missing (e.g. {sorted(missing)[:3]}), {len(duplicated)} duplicated"
        )
        brokers.wait_listed(set(BROKER_IDS), 10.0)
        assert all(n.running for n in brokers.nodes.values()), brokers.report()
        print(f"{failovers} failovers, {len(acked)} records acknowledged and read back")
        print("\n".join(timings))
    except BaseException:
        print("\n".join(timings))
        print(quorum.report())
        print(brokers.report())
        raise
    finally:
        if load is not None and not load._stop.is_set():
            load._stop.set()
        brokers.stop()
        quorum.stop()
