"""Topics, partitions, configs and producer ids replayed into the image
(``server.controller.image``, Kafka's ``PartitionRegistration.merge`` and the image
deltas)."""

from __future__ import annotations

import pytest

from kwire.errors import Errors
from kwire.uuid import Uuid
from messages.generated.config_record import ConfigRecord
from messages.generated.partition_change_record import PartitionChangeRecord
from messages.generated.partition_record import PartitionRecord
from messages.generated.producer_ids_record import ProducerIdsRecord
from messages.generated.remove_topic_record import RemoveTopicRecord
from messages.generated.topic_record import TopicRecord
from messages.metadata import encode_record
from server.controller.cluster import ReplayError
from server.controller.controller import QuorumController
from server.controller.errors import ApiError
from server.controller.image import (
    MIGRATING_DIRECTORY,
    ReplicationImage,
    invalid_topic_name,
    topic_collision_key,
)

TOPIC = Uuid.from_longs(0xAB, 0xCD)
DIRS = [Uuid.from_longs(9, 1), Uuid.from_longs(9, 2), Uuid.from_longs(9, 3)]


def _image() -> ReplicationImage:
    image = ReplicationImage()
    image.replay(TopicRecord(name="orders", topic_id=TOPIC))
    image.replay(
        PartitionRecord(
            partition_id=0, topic_id=TOPIC, replicas=[1, 2, 3], isr=[1, 2, 3], leader=1, leader_epoch=0,
            partition_epoch=0, directories=DIRS,
        )
    )
    return image


def test_a_partition_record_creates_the_partition() -> None:
    image = _image()
    partition = image.topics[TOPIC].partitions[0]
    assert image.topic_ids == {"orders": TOPIC}
    assert (partition.replicas, partition.isr, partition.leader, partition.leader_epoch) == ((1, 2, 3), (1, 2, 3), 1, 0)
    assert partition.directories == tuple(DIRS)


def test_a_change_bumps_the_partition_epoch_and_a_set_leader_the_leader_epoch() -> None:
    image = _image()
    image.replay(PartitionChangeRecord(partition_id=0, topic_id=TOPIC, isr=[1, 2]))
    partition = image.topics[TOPIC].partitions[0]
    assert (partition.isr, partition.leader, partition.leader_epoch, partition.partition_epoch) == ((1, 2), 1, 0, 1)
    image.replay(PartitionChangeRecord(partition_id=0, topic_id=TOPIC, leader=2, isr=[2]))
    partition = image.topics[TOPIC].partitions[0]
    assert (partition.isr, partition.leader, partition.leader_epoch, partition.partition_epoch) == ((2,), 2, 1, 2)
    # the same leader named again still bumps the leader epoch (PartitionChangeBuilder's way)
    image.replay(PartitionChangeRecord(partition_id=0, topic_id=TOPIC, leader=2))
    assert image.topics[TOPIC].partitions[0].leader_epoch == 2
    image.replay(PartitionChangeRecord(partition_id=0, topic_id=TOPIC, leader=-1, leader_recovery_state=1))
    partition = image.topics[TOPIC].partitions[0]
    assert (partition.leader, partition.leader_recovery_state, partition.replicas) == (-1, 1, (1, 2, 3))


def test_new_replicas_without_directories_are_migrating() -> None:
    image = _image()
    image.replay(PartitionChangeRecord(partition_id=0, topic_id=TOPIC, replicas=[1, 2, 3, 4]))
    assert image.topics[TOPIC].partitions[0].directories == (MIGRATING_DIRECTORY,) * 4
    image.replay(PartitionRecord(partition_id=1, topic_id=TOPIC, replicas=[4], isr=[4], leader=4))
    assert image.topics[TOPIC].partitions[1].directories == (MIGRATING_DIRECTORY,)
    with pytest.raises(ReplayError, match="2 directories for 1 replicas"):
        image.replay(PartitionRecord(partition_id=2, topic_id=TOPIC, replicas=[4], directories=DIRS[:2]))


def test_configs_are_set_and_deleted_and_go_with_their_topic() -> None:
    image = _image()
    image.replay(ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms", value="1000"))
    image.replay(ConfigRecord(resource_type=4, resource_name="", name="min.insync.replicas", value="2"))
    assert image.configs == {(2, "orders"): {"retention.ms": "1000"}, (4, ""): {"min.insync.replicas": "2"}}
    image.replay(ConfigRecord(resource_type=4, resource_name="", name="min.insync.replicas", value=None))
    image.replay(RemoveTopicRecord(topic_id=TOPIC))
    assert image.topics == {} and image.topic_ids == {} and image.configs == {}


def test_records_of_unknown_topics_and_partitions_are_replay_errors() -> None:
    image = _image()
    other = Uuid.from_longs(1, 1)
    with pytest.raises(ReplayError, match="no topic"):
        image.replay(PartitionRecord(partition_id=0, topic_id=other))
    with pytest.raises(ReplayError, match="no partition 5"):
        image.replay(PartitionChangeRecord(partition_id=5, topic_id=TOPIC, leader=2))
    with pytest.raises(ReplayError, match="no topic"):
        image.replay(RemoveTopicRecord(topic_id=other))


def test_producer_id_blocks_only_move_forward() -> None:
    image = ReplicationImage()
    image.replay(ProducerIdsRecord(broker_id=1, broker_epoch=5, next_producer_id=1000))
    image.replay(ProducerIdsRecord(broker_id=2, broker_epoch=6, next_producer_id=2000))
    assert image.next_producer_id == 2000
    with pytest.raises(ReplayError, match="not greater than 2000"):
        image.replay(ProducerIdsRecord(broker_id=1, broker_epoch=5, next_producer_id=2000))


def test_producer_id_blocks_start_at_zero_and_follow_each_other() -> None:
    image = ReplicationImage()
    records, start = image.allocate_producer_ids(3, 42)
    assert start == 0 and records == [(ProducerIdsRecord(broker_id=3, broker_epoch=42, next_producer_id=1000), 0)]
    image.replay(records[0][0])
    assert image.allocate_producer_ids(4, 43)[1] == 1000
    image.replay(ProducerIdsRecord(broker_id=1, broker_epoch=1, next_producer_id=2**63 - 1000))
    with pytest.raises(ApiError, match="Exhausted all producerIds") as exhausted:
        image.allocate_producer_ids(1, 1)
    assert exhausted.value.error == Errors.UNKNOWN_SERVER_ERROR


def test_the_controller_keeps_the_image_and_a_snapshot_replaces_it() -> None:
    controller = QuorumController(bootstrap=())
    controller.replay(encode_record(TopicRecord(name="orders", topic_id=TOPIC), 0), 10)
    controller.replay(encode_record(PartitionRecord(partition_id=0, topic_id=TOPIC, replicas=[1], isr=[1], leader=1), 0), 11)
    assert set(controller.replication.topics[TOPIC].partitions) == {0}
    controller.reset([encode_record(ProducerIdsRecord(broker_id=1, next_producer_id=3000), 0)], 20)
    assert controller.replication.topics == {} and controller.replication.next_producer_id == 3000


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("orders", None),
        ("a.b_c-D9", None),
        ("x" * 249, None),
        ("", "the empty string is not allowed"),
        (".", "'.' is not allowed"),
        ("..", "'..' is not allowed"),
        ("x" * 250, f"the length of '{'x' * 250}' is longer than the max allowed length 249"),
        ("a b", "'a b' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
        ("caf\u00e9", "'caf\u00e9' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"),
    ],
)
def test_topic_names_as_kafka_validates_them(name: str, reason: str | None) -> None:
    assert invalid_topic_name(name) == reason


def test_names_that_differ_only_in_dot_and_underscore_collide() -> None:
    image = ReplicationImage()
    image.replay(TopicRecord(name="a.b", topic_id=TOPIC))
    assert topic_collision_key("a_b") == "a_b" and image.colliding == {"a_b": {"a.b"}}
    assert topic_collision_key("plain") is None
    image.replay(RemoveTopicRecord(topic_id=TOPIC))
    assert image.colliding == {}
