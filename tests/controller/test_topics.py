"""CreateTopics and DeleteTopics at the controller (``server.controller.topics``,
``server.controller.topic_deletion``) and the topic config schema they check
(``server.controller.topic_configs``). The answers are compared with a
stock controller's in ``compat/test_topic_rpcs.py``; these tests pin the parts that test
cannot see (a controller that is not active, placement over fenced brokers, replay)."""

from __future__ import annotations

import random

import pytest

from kwire.errors import Errors
from kwire.uuid import Uuid
from messages.generated.clear_elr_record import ClearElrRecord
from messages.generated.config_record import ConfigRecord
from messages.generated.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from messages.generated.delete_topics_request import DeleteTopicsRequest, DeleteTopicState
from messages.generated.partition_record import PartitionRecord
from messages.generated.register_broker_record import RegisterBrokerRecord
from messages.generated.remove_topic_record import RemoveTopicRecord
from messages.generated.topic_record import TopicRecord
from server.controller.cluster import ClusterControlManager
from server.controller.errors import ApiError
from server.controller.image import ReplicationControlManager
from server.controller.java_order import (
    java_hash_map_order,
    timeline_hash_map_order,
)
from server.controller.partition_change import partition_change_record_version
from server.controller.result import EXCESSIVE_BATCH
from server.controller.topic_configs import (
    ConfigSource,
    effective_topic_configs,
    java_double_string,
    validate_topic_configs,
)
from server.controller.topic_deletion import delete_topics
from server.controller.topics import TopicDefaults, create_topics

MV = 33  # 4.4-IV2
DEFAULTS = TopicDefaults(num_partitions=1, replication_factor=1, node_id=1, static_config={})
TOPIC_ID = Uuid.from_longs(42, 42)


def _cluster(*brokers: tuple[int, bool], dirs: int = 1) -> ClusterControlManager:
    """Active, with ``(broker id, fenced)`` registered, each with ``dirs`` log directories."""
    cluster = ClusterControlManager("c", 9000)
    for broker_id, fenced in brokers:
        cluster.replay(
            RegisterBrokerRecord(
                broker_id=broker_id,
                broker_epoch=broker_id,
                incarnation_id=Uuid.from_longs(broker_id, 0),
                fenced=fenced,
                log_dirs=[Uuid.from_longs(broker_id, d + 1) for d in range(dirs)],
            ),
            broker_id,
        )
    cluster.activate(0)
    return cluster


def _topic(name: str, partitions: int = 1, rf: int = 1, **kw: object) -> CreatableTopic:
    return CreatableTopic(name=name, num_partitions=partitions, replication_factor=rf, **kw)  # type: ignore[arg-type]


def _create(
    cluster: ClusterControlManager, image: ReplicationControlManager, *topics: CreatableTopic, validate_only: bool = False, elr: bool = True
) -> tuple[list[tuple[object, int]], dict[str, tuple[int, str | None]]]:
    records, results = create_topics(
        CreateTopicsRequest(topics=list(topics), validate_only=validate_only),
        image=image,
        cluster=cluster,
        metadata_version=MV,
        elr_enabled=elr,
        defaults=DEFAULTS,
        rng=random.Random(7),
        new_topic_id=lambda: TOPIC_ID,
    )
    return records, {r.name: (r.error_code, r.error_message) for r in results}  # type: ignore[return-value]


def _replay(image: ReplicationControlManager, records: list[tuple[object, int]]) -> None:
    for record, _ in records:
        image.replay(record)  # type: ignore[arg-type]


def test_a_topic_is_one_batch_of_topic_config_and_partition_records() -> None:
    cluster, image = _cluster((1, False), (2, False), (3, False)), ReplicationControlManager()
    configs = [CreatableTopicConfig(name="min.insync.replicas", value="2")]
    records, results = _create(cluster, image, _topic("t", 4, 3, configs=configs))
    assert results == {"t": (Errors.NONE, None)}
    kinds = [type(r).__name__ for r, _ in records]
    assert kinds == ["TopicRecord", "ConfigRecord", "ClearElrRecord"] + ["PartitionRecord"] * 4
    partitions = [r for r, _ in records if isinstance(r, PartitionRecord)]
    for p in partitions:
        assert sorted(p.replicas) == [1, 2, 3] and p.isr == p.replicas and p.leader == p.replicas[0]
        assert p.directories == [Uuid.from_longs(b, 1) for b in p.replicas]
    assert all(v == partition_change_record_version(MV) == 2 for r, v in records if isinstance(r, PartitionRecord))
    # the leaders rotate over the brokers
    assert {p.leader for p in partitions} == {1, 2, 3}
    _replay(image, records)
    assert image.topic_ids["t"] == TOPIC_ID and len(image.topics[TOPIC_ID].partitions) == 4
    assert image.configs[(2, "t")] == {"min.insync.replicas": "2"}


def test_fenced_replicas_are_left_out_of_the_isr_and_never_lead() -> None:
    cluster, image = _cluster((1, False), (2, True)), ReplicationControlManager()
    records, results = _create(cluster, image, _topic("t", 3, 2))
    assert results["t"][0] == Errors.NONE
    for record, _ in records:
        if isinstance(record, PartitionRecord):
            assert record.leader == 1 and record.isr == [1] and sorted(record.replicas) == [1, 2]


def test_a_broker_with_several_directories_leaves_the_choice_to_itself() -> None:
    cluster, image = _cluster((1, False), dirs=2), ReplicationControlManager()
    records, _ = _create(cluster, image, _topic("t"))
    partition = next(r for r, _ in records if isinstance(r, PartitionRecord))
    assert partition.directories == [Uuid.from_longs(0, 1)]  # DirectoryId.UNASSIGNED


def test_every_broker_fenced_refuses_placement() -> None:
    cluster, image = _cluster((1, True)), ReplicationControlManager()
    records, results = _create(cluster, image, _topic("t"))
    assert records == []
    assert results["t"] == (
        Errors.INVALID_REPLICATION_FACTOR,
        "Unable to replicate the partition 1 time(s): All brokers are currently fenced, or have all their log "
        "directories cordoned.",
    )


def test_placement_needs_an_active_controller() -> None:
    cluster = ClusterControlManager("c", 9000)
    with pytest.raises(RuntimeError):
        _create(cluster, ReplicationControlManager(), _topic("t"))


def test_validate_only_writes_nothing_and_answers_as_a_creation() -> None:
    cluster, image = _cluster((1, False)), ReplicationControlManager()
    records, results = _create(cluster, image, _topic("t"), validate_only=True)
    assert records == [] and results == {"t": (Errors.NONE, None)}


def test_too_many_partitions_fail_the_whole_request() -> None:
    with pytest.raises(ApiError) as raised:
        _create(_cluster((1, False)), ReplicationControlManager(), _topic("a", 6000), _topic("b", 4001))
    assert raised.value.error == Errors.POLICY_VIOLATION


def test_manual_assignments_keep_their_order() -> None:
    cluster, image = _cluster((1, False), (2, False), (3, True)), ReplicationControlManager()
    assignments = [
        CreatableReplicaAssignment(partition_index=0, broker_ids=[3, 2]),
        CreatableReplicaAssignment(partition_index=1, broker_ids=[2, 1]),
    ]
    records, results = _create(cluster, image, _topic("m", -1, -1, assignments=assignments))
    assert results["m"][0] == Errors.NONE
    partitions = [r for r, _ in records if isinstance(r, PartitionRecord)]
    assert [(p.replicas, p.isr, p.leader) for p in partitions] == [([3, 2], [2], 2), ([2, 1], [2, 1], 2)]


def test_a_collision_and_an_existing_topic() -> None:
    cluster, image = _cluster((1, False)), ReplicationControlManager()
    image.replay(TopicRecord(name="a.b", topic_id=Uuid.from_longs(1, 1)))
    _, results = _create(cluster, image, _topic("a_b"), _topic("a.b"))
    assert results["a_b"] == (Errors.INVALID_TOPIC_EXCEPTION, "Topic 'a_b' collides with existing topic: a.b")
    assert results["a.b"] == (Errors.TOPIC_ALREADY_EXISTS, "Topic 'a.b' already exists.")


def test_without_eligible_leader_replicas_no_clear_elr_record() -> None:
    configs = [CreatableTopicConfig(name="min.insync.replicas", value="1")]
    records, _ = _create(_cluster((1, False)), ReplicationControlManager(), _topic("t", configs=configs), elr=False)
    assert not any(isinstance(r, ClearElrRecord) for r, _ in records)


def test_deletion_by_name_and_by_id() -> None:
    image = ReplicationControlManager()
    image.replay(TopicRecord(name="a", topic_id=Uuid.from_longs(1, 1)))
    image.replay(TopicRecord(name="b", topic_id=Uuid.from_longs(2, 2)))
    request = DeleteTopicsRequest(
        topics=[
            DeleteTopicState(name="a", topic_id=Uuid()),
            DeleteTopicState(name=None, topic_id=Uuid.from_longs(2, 2)),
            DeleteTopicState(name=None, topic_id=Uuid.from_longs(9, 9)),
        ]
    )
    records, results = delete_topics(request, 6, image=image)
    assert sorted(r.topic_id.most_significant_bits for r, _ in records) == [1, 2]
    assert all(isinstance(r, RemoveTopicRecord) for r, _ in records)
    outcome = {(r.name, r.error_code) for r in results}
    assert outcome == {("a", Errors.NONE), ("b", Errors.NONE), (None, Errors.UNKNOWN_TOPIC_ID)}
    _replay(image, records)
    assert image.topics == {}


def test_deletion_disabled() -> None:
    request = DeleteTopicsRequest(topic_names=["a"])
    with pytest.raises(ApiError) as raised:
        delete_topics(request, 5, image=ReplicationControlManager(), delete_enabled=False)
    assert raised.value.error == Errors.TOPIC_DELETION_DISABLED


def test_clear_elr_replay_empties_eligible_replicas_and_bumps_the_partition_epoch() -> None:
    image = ReplicationControlManager()
    image.replay(TopicRecord(name="t", topic_id=TOPIC_ID))
    image.replay(
        PartitionRecord(
            partition_id=0, topic_id=TOPIC_ID, replicas=[1, 2], isr=[1], leader=1, leader_epoch=0, partition_epoch=0,
            eligible_leader_replicas=[2],
        )
    )
    image.replay(ClearElrRecord(topic_name="t"))
    partition = image.topics[TOPIC_ID].partitions[0]
    assert partition.elr == () and partition.partition_epoch == 1 and partition.leader_epoch == 0


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("retention.ms", "abc", "Invalid value abc for configuration retention.ms: Not a number of type LONG"),
        ("retention.ms", "-5", "Invalid value -5 for configuration retention.ms: Value must be at least -1"),
        ("max.message.bytes", "99999999999", "Invalid value 99999999999 for configuration max.message.bytes: Not a number of type INT"),
        (
            "min.cleanable.dirty.ratio",
            "-12345678.5",
            "Invalid value -1.23456785E7 for configuration min.cleanable.dirty.ratio: Value must be at least 0",
        ),
        ("cleanup.policy", "compact,", "Configuration 'cleanup.policy' values must not be empty."),
        ("preallocate", "yes", "Invalid value yes for configuration preallocate: Expected value to be either true or false"),
        ("no.such", "1", "Unknown topic config name: no.such"),
    ],
)
def test_config_errors_read_as_kafka_writes_them(name: str, value: str, message: str) -> None:
    with pytest.raises(ApiError) as raised:
        validate_topic_configs({name: value}, {})
    assert (raised.value.error, raised.value.message) == (Errors.INVALID_CONFIG, message)


@pytest.mark.parametrize("value", ["+5", " 12 ", "0"])
def test_config_values_kafka_accepts(value: str) -> None:
    validate_topic_configs({"retention.ms": value, "cleanup.policy": " compact , delete ", "preallocate": " TRUE "}, {})


def test_effective_configs_come_from_the_nearest_layer() -> None:
    entries = {
        e.name: (e.value, e.source)
        for e in effective_topic_configs(
            {"segment.bytes": "2000000"},
            node_dynamic={"log.retention.bytes": "7"},
            cluster_dynamic={"min.insync.replicas": "2", "log.retention.bytes": "8"},
            static_config={"log.retention.hours": "2", "log.flush.scheduler.interval.ms": "3000"},
        )
    }
    assert entries["segment.bytes"] == ("2000000", ConfigSource.TOPIC_CONFIG)
    assert entries["retention.bytes"] == ("7", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert entries["min.insync.replicas"] == ("2", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert entries["retention.ms"] == ("7200000", ConfigSource.STATIC_BROKER_CONFIG)
    assert entries["flush.ms"] == ("3000", ConfigSource.STATIC_BROKER_CONFIG)
    assert entries["cleanup.policy"] == ("delete", ConfigSource.DEFAULT_CONFIG)
    assert "internal.segment.bytes" not in entries and len(entries) == 37


def test_java_formats() -> None:
    assert [java_double_string(x) for x in (0.5, 1e-5, 1234567.0, 12345678.0, 2.0)] == [
        "0.5", "1.0E-5", "1234567.0", "1.2345678E7", "2.0"
    ]
    # as java.util.HashMap iterates them (checked with a JVM once): by String.hashCode bucket
    keys = ["segment.bytes", "retention.ms", "cleanup.policy", "min.insync.replicas"]
    assert java_hash_map_order(keys) == ["cleanup.policy", "min.insync.replicas", "segment.bytes", "retention.ms"]


def test_config_records_of_a_topic_replay_into_its_configs() -> None:
    image = ReplicationControlManager()
    image.replay(ConfigRecord(resource_type=2, resource_name="t", name="retention.ms", value="5"))
    image.replay(ConfigRecord(resource_type=2, resource_name="t", name="retention.ms", value=None))
    assert (2, "t") not in image.configs


def test_timeline_order_is_the_controller_config_store_order() -> None:
    # as Kafka's TimelineHashMap iterates them (checked with a JVM once): slot order, a slot's
    # keys last inserted first
    keys = ["retention.ms", "segment.ms", "cleanup.policy", "min.insync.replicas", "x", "y"]
    expected = ["cleanup.policy", "x", "y", "segment.ms", "retention.ms", "min.insync.replicas"]
    assert timeline_hash_map_order(keys) == expected


@pytest.mark.parametrize(("partitions", "configs", "refused"), [
    (9_999, {}, False),  # a TopicRecord and 9,999 PartitionRecords: 10,000 records
    (10_000, {}, True),  # 10,001 records: the BoundedList of createTopics overflows
    (9_999, {"retention.ms": "1000"}, True),  # a ConfigRecord counts too
])
def test_a_request_of_more_than_ten_thousand_records_fails_whole(
    partitions: int, configs: dict[str, str], refused: bool
) -> None:
    """``MAX_RECORDS_PER_USER_OP`` bounds the records, not only the partitions: past it Kafka
    answers POLICY_VIOLATION for the whole request, validateOnly or not."""
    cluster, image = _cluster((1, False)), ReplicationControlManager()
    topic = _topic("t", partitions, 1, configs=[CreatableTopicConfig(name=k, value=v) for k, v in configs.items()])
    for validate_only in (False, True):
        if refused:
            with pytest.raises(ApiError) as raised:
                _create(cluster, image, topic, validate_only=validate_only)
            assert (raised.value.error, raised.value.message) == (Errors.POLICY_VIOLATION, EXCESSIVE_BATCH)
        else:
            records, results = _create(cluster, image, topic, validate_only=validate_only)
            assert results == {"t": (Errors.NONE, None)}
            assert len(records) == (0 if validate_only else 10_000)
