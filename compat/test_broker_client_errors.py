"""Bad input through a stock broker and a stock client, against a kwire controller and against a
stock controller of the newest pinned release (KIP-631; issue "stock Kafka brokers run on a kwire
quorum").

Each side is a standalone controller (the ``newest_leader_pair`` fixture of compat/conftest.py:
same cluster id, same formatting) with one stock broker on it. kafka-python's admin client sends
the same requests to each side's broker, which forwards them to its controller in an Envelope (KIP-590);
the error codes and messages that come back must be equal: a topic that exists, replication
factors the cluster cannot give, invalid topic configs and names, an unknown topic (delete,
configs), a partition count that does not grow. Then a second stock broker with the id of the
first is started on each side: both controllers refuse its registration with
DUPLICATE_BROKER_REGISTRATION (the broker logs the error and keeps retrying).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from compat.differential import PairNode
from compat.harness import CLUSTER_ID, KafkaRelease, free_port
from tools.stock_brokers import StockBrokers

pytestmark = [pytest.mark.compat, pytest.mark.slow]

BROKER_ID = 101
START_TIMEOUT_S = 90.0
DUPLICATE_TIMEOUT_S = 60.0


def _admin_cases(bootstrap: str) -> dict[str, Any]:
    """Each case's (error code, error message) as the broker answered kafka-python."""
    from kafka.admin import (
        ConfigResource,
        ConfigResourceType,
        KafkaAdminClient,
        NewPartitions,
        NewTopic,
    )

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="kwire-errors", request_timeout_ms=30_000)
    answers: dict[str, Any] = {}

    def created(name: str, *topics: Any) -> None:
        result = admin.create_topics(list(topics), timeout_ms=30_000, raise_errors=False)
        answers[name] = sorted((t["name"], t["error_code"], t["error_message"]) for t in result["topics"])

    try:
        created("create t", NewTopic("t", 3, 1))
        created("create t again", NewTopic("t", 3, 1))
        created("replication factor above the brokers", NewTopic("rf3", 1, 3))
        created("replication factor 0", NewTopic("rf0", 1, 0))
        created("invalid config values", NewTopic("c1", 1, 1, topic_configs={"retention.ms": "x"}),
                NewTopic("c2", 1, 1, topic_configs={"cleanup.policy": "nope"}))
        created("unknown config", NewTopic("c3", 1, 1, topic_configs={"no.such.config": "1"}))
        created("invalid name", NewTopic("bad name!", 1, 1))
        deleted = admin.delete_topics(["nope"], timeout_ms=30_000, raise_errors=False)
        answers["delete an unknown topic"] = deleted
        grown = admin.create_partitions({"t": NewPartitions(2)}, timeout_ms=30_000, raise_errors=False)
        answers["grow t to fewer partitions"] = grown
        altered = admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "nope", configs={"retention.ms": "1000"}),
             ConfigResource(ConfigResourceType.TOPIC, "t", configs={"segment.bytes": "1"})],
            raise_on_unknown=False,
        )
        answers["configs of an unknown topic and a bad value"] = repr(altered)
    finally:
        admin.close()
    return answers


def _wait_for_line(path: Path, needle: str, timeout_s: float) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
        for line in text.splitlines():
            if needle in line:
                return line
        time.sleep(0.5)  # poll interval
    raise AssertionError(f"{path} never logged {needle!r}")


def test_a_stock_broker_and_client_get_the_same_errors_from_kwire_and_stock(
    newest_leader_pair: dict[str, PairNode], newest_kafka: KafkaRelease, tmp_path: Path
) -> None:
    clusters: dict[str, StockBrokers] = {}
    twins: dict[str, StockBrokers] = {}
    try:
        for name, node in newest_leader_pair.items():
            clusters[name] = StockBrokers.create(
                tmp_path / f"{name}-broker", newest_kafka.version, cluster_id=CLUSTER_ID,
                bootstrap_controllers=f"localhost:{node.port}", ports={BROKER_ID: free_port()},
                properties={"offsets.topic.replication.factor": "1"},
            )
            clusters[name].start()
        for brokers in clusters.values():
            brokers.wait_listed({BROKER_ID}, START_TIMEOUT_S)
        answers = {name: _admin_cases(brokers.bootstrap_servers) for name, brokers in clusters.items()}
        trace = "\n".join(f"{case}: {answer}" for case, answer in answers["stock"].items())
        assert answers["stock"]["create t again"][0][1] == 36, trace  # TOPIC_ALREADY_EXISTS, the case is about it
        differing = [
            f"{case}:\n    stock {answers['stock'][case]}\n    kwire {answers['kwire'][case]}"
            for case in answers["stock"]
            if answers["stock"][case] != answers["kwire"][case]
        ]
        assert not differing, "\n".join(differing) + "\n" + trace
        print(trace)

        # a second broker with the first one's id
        for name, node in newest_leader_pair.items():
            twins[name] = StockBrokers.create(
                tmp_path / f"{name}-twin", newest_kafka.version, cluster_id=CLUSTER_ID,
                bootstrap_controllers=f"localhost:{node.port}", ports={BROKER_ID: free_port()},
            )
            twins[name].start()
        for name, twin in twins.items():
            line = _wait_for_line(twin.nodes[BROKER_ID].stdout_path, "DUPLICATE_BROKER_REGISTRATION", DUPLICATE_TIMEOUT_S)
            print(f"{name}: {line[:300]}")
        for brokers in clusters.values():
            brokers.wait_listed({BROKER_ID}, 10.0)  # the first broker keeps its registration
    except BaseException:
        for name, brokers in [*clusters.items(), *twins.items()]:
            print(f"--- {name}\n{brokers.report()}")
        raise
    finally:
        for brokers in [*twins.values(), *clusters.values()]:
            brokers.stop()
