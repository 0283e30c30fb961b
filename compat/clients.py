"""Clients that write to and read from stock brokers, for the compat tests of a kwire quorum
with stock brokers: the stock topic tool, console producer and console consumer of a pinned
release, and kafka-python. Each writes numbered records and reads them back, so a test can
assert that exactly the acknowledged records came back."""

from __future__ import annotations

import threading
import time
from collections import Counter

from compat.harness import KafkaRelease, wait_until
from compat.kafka import KafkaCommandError

__all__ = [
    "Consumer",
    "Load",
    "create_topic",
    "describe_topic",
    "new_topic_works",
    "partitions_of",
    "python_round_trip",
    "read_all",
    "records",
    "stock_round_trip",
]


def records(topic: str, count: int) -> list[str]:
    """``count`` distinct record values for ``topic``."""
    return [f"{topic}-{i:07d}" for i in range(count)]


def create_topic(kafka: KafkaRelease, bootstrap: str, topic: str, partitions: int, replication_factor: int) -> str:
    """``kafka-topics --create``; returns its output ("Created topic X.")."""
    return kafka.run_tool(
        "topics",
        ["--bootstrap-server", bootstrap, "--create", "--topic", topic, "--partitions", str(partitions),
         "--replication-factor", str(replication_factor)],
    ).stdout


def describe_topic(kafka: KafkaRelease, bootstrap: str, topic: str,
                   timeout_s: float = 30.0) -> dict[int, tuple[int, list[int], list[int]]]:
    """``kafka-topics --describe``: partition -> (leader, replicas, ISR). A topic just created
    reaches the broker asked with its next metadata fetch, and until then the tool fails with
    "does not exist as expected": it is asked again until the topic is known (an
    AssertionError after ``timeout_s``); any other failure raises KafkaCommandError."""
    done = wait_until(
        f"topic {topic} known to {bootstrap}",
        lambda: kafka.run_tool("topics", ["--bootstrap-server", bootstrap, "--describe", "--topic", topic], check=False),
        timeout_s, ok=lambda d: d.returncode == 0 or "does not exist" not in d.stdout,
    )
    if done.returncode != 0:
        raise KafkaCommandError(kafka.version, kafka.tool_class("topics"), done)
    out = done.stdout
    partitions = {}
    for line in out.splitlines():
        fields = dict(
            (key.strip(), value.strip()) for key, _, value in (part.partition(":") for part in line.split("\t")) if value
        )
        if "Partition" in fields and "Leader" in fields:
            partitions[int(fields["Partition"])] = (
                int(fields["Leader"]),
                [int(b) for b in fields["Replicas"].split(",")],
                [int(b) for b in fields["Isr"].split(",")],
            )
    return partitions


def stock_round_trip(kafka: KafkaRelease, bootstrap: str, topic: str, count: int) -> Counter[str]:
    """Write ``records(topic, count)`` with the stock console producer (idempotent, acks=all;
    it exits non-zero if a send fails) and read the topic from the beginning with the stock
    console consumer; returns how often each value came back."""
    values = records(topic, count)
    kafka.run_tool(
        "console-producer",
        ["--bootstrap-server", bootstrap, "--topic", topic,
         "--producer-property", "acks=all", "--producer-property", "enable.idempotence=true",
         "--producer-property", "linger.ms=5"],
        input="\n".join(values) + "\n",
        timeout=300.0,
    )
    out = kafka.run_tool(
        "console-consumer",
        ["--bootstrap-server", bootstrap, "--topic", topic, "--from-beginning", "--max-messages", str(count),
         "--timeout-ms", "60000"],
        timeout=300.0,
        check=False,
    ).stdout
    return Counter(line for line in out.splitlines() if line.startswith(f"{topic}-"))


def python_round_trip(bootstrap: str, topic: str, count: int, partitions: int, replication_factor: int) -> Counter[str]:
    """With kafka-python: create ``topic`` (its admin client's CreateTopics), write
    ``records(topic, count)`` with an idempotent acks=all producer (every send's future must
    succeed), and read them back with a group-less consumer; returns how often each value came
    back. Raises whatever kafka-python raises on a failed creation or send."""
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kwire-compat")
    try:
        admin.create_topics([NewTopic(topic, partitions, replication_factor)], timeout_ms=30_000)
    finally:
        admin.close()
    produce(bootstrap, topic, count)
    return read_all(bootstrap, topic, count)


def produce(bootstrap: str, topic: str, count: int) -> None:
    """Write ``records(topic, count)`` with kafka-python, idempotent and acks=all; every send's
    future must succeed (raises what kafka-python raises otherwise)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5)
    try:
        futures = [producer.send(topic, value.encode()) for value in records(topic, count)]
        producer.flush(timeout=120)
        for future in futures:
            future.get(timeout=60)
    finally:
        producer.close()


class Load:
    """A kafka-python producer (idempotent, acks=all) writing ``topic-<n>`` values to ``topic``
    in a thread until stopped, at most ``records_per_s``; ``acked`` holds the values the
    brokers acknowledged."""

    def __init__(self, bootstrap: str, topic: str, records_per_s: int = 10_000) -> None:
        from kafka import KafkaProducer

        self.topic = topic
        self.producer = KafkaProducer(
            bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5,
            delivery_timeout_ms=120_000, request_timeout_ms=30_000,
        )
        self.pause_s = 100 / records_per_s
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
                time.sleep(self.pause_s)  # the rate's bound

    def _note(self, into: list[str], value: str) -> None:
        with self._lock:
            into.append(value)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop sending and wait for the answers of what was sent."""
        self._stop.set()
        self._thread.join(30)
        self.producer.flush(timeout=120)
        self.producer.close()

    def close(self) -> None:
        """Stop at once (after a failure): the producer is closed without waiting."""
        self._stop.set()
        self._thread.join(30)
        self.producer.close(timeout=0)


class Consumer:
    """A group-less kafka-python consumer of ``topic`` from the beginning, in a thread."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        from kafka import KafkaConsumer

        self.consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None,
                                      auto_offset_reset="earliest")
        self.seen: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="consumer", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for batch in self.consumer.poll(timeout_ms=500).values():
                with self._lock:
                    self.seen.update(r.value.decode() for r in batch)

    def wait_for(self, values: set[str], timeout_s: float) -> set[str]:
        """Until every one of ``values`` was consumed or ``timeout_s`` passed; those missing."""
        deadline = time.monotonic() + timeout_s
        while True:
            with self._lock:
                missing = values - set(self.seen)
            if not missing or time.monotonic() > deadline:
                return missing
            time.sleep(0.5)  # poll interval

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.consumer.close()


def read_all(bootstrap: str, topic: str, at_least: int, timeout_s: float = 120.0) -> Counter[str]:
    """Read ``topic`` from the beginning with a group-less kafka-python consumer until
    ``at_least`` records came back or ``timeout_s`` passed; how often each value came back."""
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


def partitions_of(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """kafka-python's admin DescribeTopics (Metadata from a broker): partition -> (leader,
    replicas, ISR)."""
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kwire-describe", request_timeout_ms=10_000)
    try:
        [described] = admin.describe_topics([topic])
    finally:
        admin.close()
    def field(partition: dict[str, object], *names: str) -> object:  # kafka-python's field names vary
        return next(partition[name] for name in names if name in partition)

    return {
        int(field(p, "partition_index", "partition")): (  # type: ignore[call-overload]
            int(field(p, "leader_id", "leader")),  # type: ignore[call-overload]
            list(field(p, "replica_nodes", "replicas")),  # type: ignore[call-overload]
            list(field(p, "isr_nodes", "isr")),  # type: ignore[call-overload]
        )
        for p in described["partitions"]
    }


def new_topic_works(bootstrap: str, topic: str, timeout_s: float = 60.0) -> None:
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
        producer.send(topic, b"after-failover").get(timeout=timeout_s)
    finally:
        producer.close()
    back = read_all(bootstrap, topic, 1, timeout_s)
    assert back == Counter({"after-failover": 1}), back
