"""Clients that write to and read from stock brokers, for the compat tests of a kwire quorum
with stock brokers: the stock topic tool, console producer and console consumer of a pinned
release, and kafka-python. Each writes numbered records and reads them back, so a test can
assert that exactly the acknowledged records came back."""

from __future__ import annotations

import time
from collections import Counter

from compat.conftest import KafkaRelease

__all__ = ["create_topic", "describe_topic", "python_round_trip", "records", "stock_round_trip"]


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


def describe_topic(kafka: KafkaRelease, bootstrap: str, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """``kafka-topics --describe``: partition -> (leader, replicas, ISR)."""
    out = kafka.run_tool("topics", ["--bootstrap-server", bootstrap, "--describe", "--topic", topic]).stdout
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
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kwire-compat")
    try:
        admin.create_topics([NewTopic(topic, partitions, replication_factor)], timeout_ms=30_000)
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True, linger_ms=5)
    try:
        futures = [producer.send(topic, value.encode()) for value in records(topic, count)]
        producer.flush(timeout=120)
        for future in futures:
            future.get(timeout=60)
    finally:
        producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=None, auto_offset_reset="earliest")
    seen: Counter[str] = Counter()
    deadline = time.monotonic() + 120
    try:
        while sum(seen.values()) < count and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=1000).values():
                seen.update(record.value.decode() for record in batch)
    finally:
        consumer.close()
    return seen
