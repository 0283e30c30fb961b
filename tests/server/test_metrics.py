"""``kwire.prometheus.port``: a standalone node serves ``/metrics`` in Prometheus' text format
under Kafka's metric names (``server.node.metrics``), and the snapshot counts what the image
holds."""

from __future__ import annotations

import random
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import trio
from prometheus_client.parser import text_string_to_metric_families

from kwire.uuid import Uuid
from messages.generated.partition_record import PartitionRecord
from messages.generated.register_broker_record import RegisterBrokerRecord
from messages.generated.topic_record import TopicRecord
from server.config import KRaftConfig
from server.controller.controller import ControlManagers
from server.controller.event_times import RESERVOIR, EventTimes, EventTimesSummary
from server.node import Node
from server.node.metrics import take_snapshot
from tools.local_cluster import free_ports
from tools.storage_format import format_standalone


def _scrape(port: int) -> dict[str, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    values = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            label = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
            values[sample.name + (f"{{{label}}}" if label else "")] = sample.value
    return values


async def test_a_standalone_node_serves_its_metrics(tmp_path: Path) -> None:
    port = free_ports(1)[0]
    data = tmp_path / "data"
    config = KRaftConfig.from_properties({
        "process.roles": "controller", "node.id": "1", "listeners": f"CONTROLLER://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER", "log.dirs": str(data),
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{port}",
        "kwire.prometheus.port": "0", "kwire.prometheus.host": "127.0.0.1",
    })
    assert format_standalone(config, out=lambda line: None)
    node = Node(config, rng=random.Random(1))
    async with trio.open_nursery() as nursery:
        await nursery.start(node.run)
        with trio.fail_after(30):
            while True:
                if node.metrics_port is not None:
                    values = await trio.to_thread.run_sync(_scrape, node.metrics_port)
                    # active, and its own ControllerRegistration went through the controller
                    if (
                        values.get("kafka_controller_KafkaController_ActiveControllerCount") == 1
                        and values.get("kafka_controller_ControllerEventManager_EventQueueProcessingTimeMs_count", 0) >= 1
                    ):
                        break
                await trio.sleep(0.1)
        assert values["kafka_server_raft_metrics_current_leader"] == 1
        assert values["kafka_controller_ControllerEventManager_EventQueueTimeMs_count"] >= 1
        assert values["kafka_controller_ControllerEventManager_EventQueueProcessingTimeMs{quantile=0.99}"] >= 0
        assert values["kafka_server_raft_metrics_current_state{state=leader}"] == 1
        assert values["kafka_server_raft_metrics_high_watermark"] >= 1
        assert values["kafka_controller_KafkaController_GlobalTopicCount"] == 0
        assert values["kafka_controller_KafkaController_LastCommittedRecordOffset"] >= 0
        node.stop()


def test_the_snapshot_counts_topics_partitions_and_brokers() -> None:
    controller = ControlManagers(bootstrap=(), min_insync_replicas=1, cluster_id="c", session_timeout_ms=9000)
    for broker_id, fenced in ((1, False), (2, True)):
        controller.cluster.replay(RegisterBrokerRecord(
            broker_id=broker_id, broker_epoch=broker_id, incarnation_id=Uuid.from_longs(broker_id, 0), fenced=fenced,
        ), broker_id)
    topic = Uuid.from_longs(1, 1)
    controller.replication.replay(TopicRecord(name="t", topic_id=topic))
    for index, (replicas, leader) in enumerate((([1, 2], 1), ([1, 2], 2), ([2, 1], -1))):
        controller.replication.replay(PartitionRecord(
            partition_id=index, topic_id=topic, replicas=replicas, isr=replicas, leader=leader,
        ))
    core = SimpleNamespace(
        leader_and_epoch=SimpleNamespace(leader_id=3), high_watermark=40, epoch=7,
        log=SimpleNamespace(log_end_offset=42), state=type("Follower", (), {})(),
    )
    snapshot = take_snapshot(core, controller, active=False, applied_offset=39)
    assert snapshot.controller == {
        "ActiveControllerCount": 0, "GlobalTopicCount": 1, "GlobalPartitionCount": 3, "OfflinePartitionsCount": 1,
        "PreferredReplicaImbalanceCount": 2, "ActiveBrokerCount": 1, "FencedBrokerCount": 1,
        "LastAppliedRecordOffset": 39, "LastCommittedRecordOffset": 39,
    }
    assert snapshot.raft == {"current_leader": 3, "current_epoch": 7, "high_watermark": 40, "log_end_offset": 42}
    assert snapshot.state == "follower"


def test_event_times_keep_a_count_a_sum_and_recent_quantiles() -> None:
    times = EventTimes()
    assert times.summary() == EventTimesSummary(0, 0.0, {})
    for ms in range(1, 2001):  # more samples than the reservoir keeps
        times.record(float(ms))
    summary = times.summary()
    assert summary.count == 2000 and summary.sum_ms == 2000 * 2001 / 2
    # quantiles come from the last RESERVOIR samples: 977..2000
    assert summary.quantiles[0.5] == 2000 - RESERVOIR + 1 + RESERVOIR // 2
    assert summary.quantiles[0.999] == 1999.0  # index int(0.999 * 1024) of 977..2000

