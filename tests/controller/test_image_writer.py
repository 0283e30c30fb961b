"""The controller's image as a metadata snapshot's records (``server.controller.image_writer``,
Kafka's ``MetadataImage.write``): the sections' order, each record's version at the image's
metadata.version, and a written image replaying into the same image."""

from __future__ import annotations

import pytest

from kwire.uuid import Uuid
from messages.generated.broker_registration_change_record import BrokerRegistrationChangeRecord
from messages.generated.config_record import ConfigRecord
from messages.generated.feature_level_record import FeatureLevelRecord
from messages.generated.partition_change_record import PartitionChangeRecord
from messages.generated.partition_record import PartitionRecord
from messages.generated.producer_ids_record import ProducerIdsRecord
from messages.generated.register_broker_record import RegisterBrokerRecord
from messages.generated.register_controller_record import RegisterControllerRecord
from messages.generated.topic_record import TopicRecord
from messages.runtime import Message
from server.controller.cluster import ClusterControlManager
from server.controller.controller import ControlManagers
from server.controller.image import ReplicationControlManager
from server.controller.image_writer import ImageLossError, image_view
from tests.controller.fixtures import (
    broker_record,
    controller_at,
    controller_record,
    feature_record,
    mv_record,
    values,
)

ORDERS = Uuid.from_longs(0xF0, 2)
AUDIT = Uuid.from_longs(0x01, 1)  # a smaller id, created later
DIR_1 = Uuid.from_longs(101, 1)
DIR_2 = Uuid.from_longs(102, 2)


def _log(level: int, *, elr: int | None = None) -> list[tuple[Message, int]]:
    """A log at metadata.version ``level``: features, brokers 2 and 1, controllers 3001 and
    3000, topics "orders" (partitions 1 and 0) then "audit", configs, a producer id block."""
    partition_version = 2 if level >= 23 else 1 if level >= 17 else 0
    broker_version = 3 if level >= 17 else 2 if level >= 8 else 1 if level >= 7 else 0
    dirs = level >= 17
    records: list[tuple[Message, int]] = [
        feature_record("group.version", 1),
        mv_record(level),
        feature_record("transaction.version", 0),
    ]
    if elr is not None:
        records.append(feature_record("eligible.leader.replicas.version", elr))
    records += [
        (broker_record(2, 20, fenced=False, log_dirs=[DIR_2] if dirs else [], rack="r2",
                       features=(("metadata.version", 1, 30), ("kraft.version", 0, 1), ("group.version", 0, 1))), broker_version),
        (broker_record(1, 10, log_dirs=[DIR_1] if dirs else []), broker_version),
        (controller_record(3001), 0),
        (controller_record(3000, endpoints=(("CONTROLLER", "c0", 9093), ("SSL", "c0", 9094))), 0),
        (TopicRecord(name="orders", topic_id=ORDERS), 0),
        (PartitionRecord(partition_id=1, topic_id=ORDERS, replicas=[2, 1], isr=[2, 1], leader=2, leader_epoch=0,
                         partition_epoch=0, directories=[DIR_2, DIR_1] if dirs else []), partition_version),
        (PartitionRecord(partition_id=0, topic_id=ORDERS, replicas=[1, 2], isr=[1, 2], leader=1, leader_epoch=0,
                         partition_epoch=0, directories=[DIR_1, DIR_2] if dirs else []), partition_version),
        (TopicRecord(name="audit", topic_id=AUDIT), 0),
        (PartitionRecord(partition_id=0, topic_id=AUDIT, replicas=[2], isr=[2], leader=2, leader_epoch=0,
                         partition_epoch=0, directories=[DIR_2] if dirs else []), partition_version),
        (ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms", value="1000"), 0),
        (ConfigRecord(resource_type=4, resource_name="", name="min.insync.replicas", value="1"), 0),
        (ConfigRecord(resource_type=2, resource_name="orders", name="cleanup.policy", value="compact"), 0),
        (ProducerIdsRecord(broker_id=2, broker_epoch=20, next_producer_id=3000), 0),
    ]
    if level >= 6:
        records.append((BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=10, fenced=-1), 0))
    if level >= 23:
        records.append((PartitionChangeRecord(partition_id=1, topic_id=ORDERS, isr=[2], eligible_leader_replicas=[1]), 2))
    return records


def _controller(level: int, *, elr: int | None = None) -> ControlManagers:
    controller = ControlManagers(bootstrap=[])
    for offset, value in enumerate(values(_log(level, elr=elr))):
        controller.replay(value, offset)
    return controller


def _kinds(records: list[tuple[Message, int]]) -> list[str]:
    return [type(r).__name__ for r, _ in records]


def _of(records: list[tuple[Message, int]], kind: type) -> list[tuple[Message, int]]:
    return [(r, v) for r, v in records if isinstance(r, kind)]


# ---------------------------------------------------------------------- order


def test_no_image_is_written_without_a_metadata_version() -> None:
    with pytest.raises(ImageLossError, match="no metadata.version"):
        image_view(feature_levels={"group.version": 1}, cluster=ClusterControlManager("c", 9000), controllers=[],
                      replication=ReplicationControlManager())
    with pytest.raises(ImageLossError):
        image_view(feature_levels={"metadata.version": 0}, cluster=ClusterControlManager("c", 9000), controllers=[],
                      replication=ReplicationControlManager())


def test_the_sections_come_in_kafka_s_order() -> None:
    records = _controller(21).snapshot_records()
    assert _kinds(records) == [
        "FeatureLevelRecord", "FeatureLevelRecord",
        "RegisterBrokerRecord", "RegisterBrokerRecord",
        "RegisterControllerRecord", "RegisterControllerRecord",
        "TopicRecord", "PartitionRecord", "PartitionRecord",
        "TopicRecord", "PartitionRecord",
        "ConfigRecord", "ConfigRecord", "ConfigRecord",
        "ProducerIdsRecord",
    ]


def test_metadata_version_comes_first_and_features_at_level_0_are_left_out() -> None:
    records = _controller(21).snapshot_records()
    assert _of(records, FeatureLevelRecord) == [mv_record(21), feature_record("group.version", 1)]


def test_brokers_and_controllers_ascend_by_id() -> None:
    records = _controller(21).snapshot_records()
    assert [r.broker_id for r, _ in _of(records, RegisterBrokerRecord)] == [1, 2]  # type: ignore[attr-defined]
    assert [r.controller_id for r, _ in _of(records, RegisterControllerRecord)] == [3000, 3001]  # type: ignore[attr-defined]


def test_topics_come_in_creation_order_with_their_partitions_ascending() -> None:
    records = _controller(21).snapshot_records()
    start = _kinds(records).index("TopicRecord")
    layout = [
        (r.name,) if isinstance(r, TopicRecord) else (r.topic_id, r.partition_id)  # type: ignore[attr-defined]
        for r, _ in records[start:start + 5]
    ]
    assert layout == [("orders",), (ORDERS, 0), (ORDERS, 1), ("audit",), (AUDIT, 0)]


def test_configs_keep_the_order_they_were_first_set_in() -> None:
    records = _controller(21).snapshot_records()
    assert [(r.resource_type, r.resource_name, r.name, r.value) for r, _ in _of(records, ConfigRecord)] == [  # type: ignore[attr-defined]
        (2, "orders", "retention.ms", "1000"),
        (2, "orders", "cleanup.policy", "compact"),
        (4, "", "min.insync.replicas", "1"),
    ]


def test_producer_ids_come_last_without_a_broker() -> None:
    records = _controller(21).snapshot_records()
    assert records[-1] == (ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=3000), 0)


def test_no_producer_ids_record_before_a_block_was_handed_out() -> None:
    controller = controller_at(21, (TopicRecord(name="t", topic_id=ORDERS), 0))
    assert _kinds(controller.snapshot_records()) == ["FeatureLevelRecord", "TopicRecord"]


def test_a_producer_ids_record_at_zero_is_still_written() -> None:
    controller = controller_at(21, (ProducerIdsRecord(broker_id=1, broker_epoch=1, next_producer_id=0), 0))
    assert controller.snapshot_records()[-1] == (ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=0), 0)


# ---------------------------------------------------------------------- record contents and versions


@pytest.mark.parametrize(("level", "version"), [(5, 0), (7, 1), (8, 2), (16, 2), (17, 3), (21, 3), (30, 4)])
def test_broker_records_are_written_at_the_metadata_version_s_version(level: int, version: int) -> None:
    records = _controller(level).snapshot_records()
    assert {v for _, v in _of(records, RegisterBrokerRecord)} == {version}
    assert {v for _, v in _of(records, RegisterControllerRecord)} <= {0}


@pytest.mark.parametrize(("level", "version"), [(5, 0), (16, 0), (17, 1), (22, 1), (23, 2), (30, 2)])
def test_partition_records_are_written_at_the_metadata_version_s_version(level: int, version: int) -> None:
    records = _controller(level).snapshot_records()
    assert {v for _, v in _of(records, PartitionRecord)} == {version}
    assert {v for r, v in records if not isinstance(r, (PartitionRecord, RegisterBrokerRecord))} == {0}


def test_a_broker_record_holds_the_registration_as_it_stands() -> None:
    records = _controller(21).snapshot_records()
    first, second = (r for r, _ in _of(records, RegisterBrokerRecord))
    assert isinstance(first, RegisterBrokerRecord) and isinstance(second, RegisterBrokerRecord)
    assert (first.broker_id, first.broker_epoch, first.fenced, first.log_dirs) == (1, 10, False, [DIR_1])  # unfenced later
    assert (second.rack, second.incarnation_id, second.in_controlled_shutdown) == ("r2", Uuid.from_longs(2, 20), False)
    assert [(e.name, e.host, e.port) for e in second.end_points] == [("PLAINTEXT", "b2", 9094)]
    assert first.cordoned_log_dirs is None


def test_a_broker_s_features_come_in_java_hash_map_order() -> None:
    records = _controller(21).snapshot_records()
    broker = next(r for r, _ in _of(records, RegisterBrokerRecord) if r.broker_id == 2)  # type: ignore[attr-defined]
    # BrokerRegistration's copy of three has 8 buckets: group.version 0, kraft.version 5,
    # metadata.version 7
    assert [(f.name, f.min_supported_version, f.max_supported_version) for f in broker.features] == [  # type: ignore[attr-defined]
        ("group.version", 0, 1), ("kraft.version", 0, 1), ("metadata.version", 1, 30)
    ]


def test_a_broker_s_four_features_come_in_the_order_of_kafka_s_copy_of_them() -> None:
    # the features a broker supports at 4.0-IV3: the order of Kafka 4.4's snapshot at that level
    features = (("group.version", 0, 1), ("kraft.version", 0, 1), ("metadata.version", 1, 25), ("transaction.version", 0, 2))
    controller = controller_at(25, (broker_record(4, 40, fenced=False, log_dirs=[DIR_1], features=features), 3))
    ((record, _version),) = _of(controller.snapshot_records(), RegisterBrokerRecord)
    assert [f.name for f in record.features] == [  # type: ignore[attr-defined]
        "group.version", "transaction.version", "kraft.version", "metadata.version"]


def test_a_controlled_shutdown_and_cordoned_directories_are_written() -> None:
    controller = controller_at(
        30,
        (broker_record(4, 40, fenced=False, log_dirs=[DIR_1, DIR_2], in_controlled_shutdown=True), 4),
        (BrokerRegistrationChangeRecord(broker_id=4, broker_epoch=40, cordoned_log_dirs=[DIR_2]), 3),
    )
    ((record, version),) = _of(controller.snapshot_records(), RegisterBrokerRecord)
    assert version == 4
    assert (record.in_controlled_shutdown, record.log_dirs, record.cordoned_log_dirs) == (True, [DIR_1, DIR_2], [DIR_2])  # type: ignore[attr-defined]


def test_directories_are_written_from_3_7_iv2() -> None:
    before = _of(_controller(16).snapshot_records(), PartitionRecord)
    assert all(r.directories == [] for r, _ in before)  # type: ignore[attr-defined]
    after = _of(_controller(17).snapshot_records(), PartitionRecord)
    assert [r.directories for r, _ in after] == [[DIR_1, DIR_2], [DIR_2, DIR_1], [DIR_2]]  # type: ignore[attr-defined]


def test_the_elr_is_written_only_with_eligible_leader_replicas_on() -> None:
    without = _of(_controller(23).snapshot_records(), PartitionRecord)
    assert all(r.eligible_leader_replicas is None for r, _ in without)  # type: ignore[attr-defined]
    off = _of(_controller(23, elr=0).snapshot_records(), PartitionRecord)
    assert all(r.eligible_leader_replicas is None for r, _ in off)  # type: ignore[attr-defined]
    on = _of(_controller(23, elr=1).snapshot_records(), PartitionRecord)
    assert [r.eligible_leader_replicas for r, _ in on] == [None, [1], None]  # type: ignore[attr-defined]


def test_a_partition_record_holds_the_current_epochs_leader_and_isr() -> None:
    controller = _controller(21)
    controller.replay(values([(PartitionChangeRecord(partition_id=0, topic_id=ORDERS, leader=2, isr=[2]), 1)])[0], 99)
    record = next(
        r for r, _ in _of(controller.snapshot_records(), PartitionRecord)
        if r.topic_id == ORDERS and r.partition_id == 0  # type: ignore[attr-defined]
    )
    assert (record.leader, record.isr, record.leader_epoch, record.partition_epoch) == (2, [2], 1, 1)  # type: ignore[attr-defined]


def test_the_controller_registrations_are_written_as_given() -> None:
    registered = controller_record(3000, endpoints=(("CONTROLLER", "c0", 9093), ("SSL", "c0", 9094)))
    records = _controller(21).snapshot_records()
    assert _of(records, RegisterControllerRecord)[0] == (registered, 0)


# ---------------------------------------------------------------------- written then replayed


def _replayed(records: list[tuple[Message, int]], offset: int = 500) -> ControlManagers:
    fresh = ControlManagers(bootstrap=[])
    fresh.reset(values(records), offset)
    return fresh


@pytest.mark.parametrize(("level", "elr"), [(5, None), (8, None), (17, None), (21, None), (23, 1), (30, 1)])
def test_a_written_image_replays_into_the_same_image(level: int, elr: int | None) -> None:
    original = _controller(level, elr=elr)
    copy = _replayed(original.snapshot_records())
    assert copy.feature_levels == {k: v for k, v in original.feature_levels.items() if v > 0}
    assert copy.cluster.registrations == original.cluster.registrations
    assert copy.cluster.directory_to_broker == original.cluster.directory_to_broker
    assert copy.cluster.register_offsets == {1: 500, 2: 500}
    assert copy.controllers == original.controllers
    assert list(copy.replication.topics) == list(original.replication.topics)
    for topic_id, topic in original.replication.topics.items():
        assert copy.replication.topics[topic_id].name == topic.name
        assert copy.replication.topics[topic_id].partitions == topic.partitions
    assert copy.replication.topic_ids == original.replication.topic_ids
    assert copy.replication.configs == original.replication.configs
    assert copy.replication.next_producer_id == original.replication.next_producer_id
    assert not copy.transaction_open


def test_writing_a_replayed_image_again_gives_the_same_records() -> None:
    first = _controller(30, elr=1).snapshot_records()
    assert _replayed(first).snapshot_records() == first


def test_a_reassignment_survives_the_snapshot() -> None:
    controller = _controller(21)
    change = PartitionChangeRecord(partition_id=1, topic_id=ORDERS, replicas=[2, 1, 3], adding_replicas=[3],
                                   directories=[DIR_2, DIR_1, Uuid.from_longs(0, 1)])
    controller.replay(values([(change, 1)])[0], 100)
    copy = _replayed(controller.snapshot_records())
    assert copy.replication.reassigning == {ORDERS: {1: None}}
    assert copy.replication.topics[ORDERS].partitions[1].adding_replicas == (3,)


def test_a_snapshot_view_keeps_the_image_as_it_was_when_taken() -> None:
    """``snapshot_view`` is read off the event loop while the controller replays on: what it
    gives is the image of the moment it was taken, whatever is replayed before it is read."""
    controller = _controller(21)
    expected = controller.snapshot_records()
    view = controller.snapshot_view()
    later = [
        (PartitionChangeRecord(partition_id=0, topic_id=ORDERS, isr=[1], leader=1), 1),
        (PartitionRecord(partition_id=2, topic_id=ORDERS, replicas=[1], isr=[1], leader=1, leader_epoch=0,
                         partition_epoch=0, directories=[DIR_1]), 1),
        (TopicRecord(name="later", topic_id=Uuid.from_longs(5, 5)), 0),
        (ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms", value="2000"), 0),
        (FeatureLevelRecord(name="group.version", feature_level=0), 0),
        (BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=20, fenced=1), 0),
    ]
    for offset, value in enumerate(values(later), 100):
        controller.replay(value, offset)
    assert controller.snapshot_records() != expected
    assert list(view) == expected
