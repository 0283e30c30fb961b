"""Topics, partitions, configs and producer ids replayed into the image
(``server.controller.image``, Kafka's ``PartitionRegistration.merge`` and the image
deltas)."""

from __future__ import annotations

import random

import pytest

from kwire.errors import Errors
from kwire.uuid import Uuid
from messages.generated.clear_elr_record import ClearElrRecord
from messages.generated.config_record import ConfigRecord
from messages.generated.partition_change_record import PartitionChangeRecord
from messages.generated.partition_record import PartitionRecord
from messages.generated.producer_ids_record import ProducerIdsRecord
from messages.generated.remove_topic_record import RemoveTopicRecord
from messages.generated.topic_record import TopicRecord
from messages.metadata import encode_record
from server.controller.cluster import ReplayError
from server.controller.controller import ControlManagers
from server.controller.errors import ApiError
from server.controller.image import (
    MIGRATING_DIRECTORY,
    NO_LEADER,
    NO_LEADER_CHANGE,
    PRODUCER_ID_BLOCK_SIZE,
    UNASSIGNED_DIRECTORY,
    PartitionRegistration,
    ReplicationControlManager,
    invalid_topic_name,
    topic_collision_key,
)

TOPIC = Uuid.from_longs(0xAB, 0xCD)
DIRS = [Uuid.from_longs(9, 1), Uuid.from_longs(9, 2), Uuid.from_longs(9, 3)]


def _image() -> ReplicationControlManager:
    image = ReplicationControlManager()
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
    image = ReplicationControlManager()
    image.replay(ProducerIdsRecord(broker_id=1, broker_epoch=5, next_producer_id=1000))
    image.replay(ProducerIdsRecord(broker_id=2, broker_epoch=6, next_producer_id=2000))
    assert image.next_producer_id == 2000
    with pytest.raises(ReplayError, match="not greater than 2000"):
        image.replay(ProducerIdsRecord(broker_id=1, broker_epoch=5, next_producer_id=2000))


def test_producer_id_blocks_start_at_zero_and_follow_each_other() -> None:
    image = ReplicationControlManager()
    records, start = image.allocate_producer_ids(3, 42)
    assert start == 0 and records == [(ProducerIdsRecord(broker_id=3, broker_epoch=42, next_producer_id=1000), 0)]
    image.replay(records[0][0])
    assert image.allocate_producer_ids(4, 43)[1] == 1000
    image.replay(ProducerIdsRecord(broker_id=1, broker_epoch=1, next_producer_id=2**63 - 1000))
    with pytest.raises(ApiError, match="Exhausted all producerIds") as exhausted:
        image.allocate_producer_ids(1, 1)
    assert exhausted.value.error == Errors.UNKNOWN_SERVER_ERROR


def test_the_controller_keeps_the_image_and_a_snapshot_replaces_it() -> None:
    controller = ControlManagers(bootstrap=())
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
    image = ReplicationControlManager()
    image.replay(TopicRecord(name="a.b", topic_id=TOPIC))
    assert topic_collision_key("a_b") == "a_b" and image.colliding == {"a_b": {"a.b"}}
    assert topic_collision_key("plain") is None
    image.replay(RemoveTopicRecord(topic_id=TOPIC))
    assert image.colliding == {}


# ---------------------------------------------------------------------- partition records


def _partition(image: ReplicationControlManager, index: int = 0, topic: Uuid = TOPIC) -> PartitionRegistration:
    return image.topics[topic].partitions[index]


def test_a_partition_record_keeps_every_field() -> None:
    image = ReplicationControlManager()
    image.replay(TopicRecord(name="orders", topic_id=TOPIC))
    image.replay(
        PartitionRecord(
            partition_id=3, topic_id=TOPIC, replicas=[1, 2, 3, 4], isr=[1, 2], removing_replicas=[4],
            adding_replicas=[3], leader=2, leader_recovery_state=1, leader_epoch=7, partition_epoch=9,
            directories=[*DIRS, UNASSIGNED_DIRECTORY], eligible_leader_replicas=[3], last_known_elr=[4],
        )
    )
    assert _partition(image, 3) == PartitionRegistration(
        replicas=(1, 2, 3, 4), directories=(*DIRS, UNASSIGNED_DIRECTORY), isr=(1, 2), removing_replicas=(4,),
        adding_replicas=(3,), leader=2, leader_recovery_state=1, leader_epoch=7, partition_epoch=9,
        elr=(3,), last_known_elr=(4,),
    )


def test_a_partition_record_without_elr_fields_has_empty_ones() -> None:
    image = _image()
    assert (_partition(image).elr, _partition(image).last_known_elr) == ((), ())


def test_a_second_partition_record_replaces_the_partition() -> None:
    image = _image()
    image.replay(PartitionChangeRecord(partition_id=0, topic_id=TOPIC, isr=[1]))
    image.replay(PartitionRecord(partition_id=0, topic_id=TOPIC, replicas=[5], isr=[5], leader=5, leader_epoch=3, partition_epoch=4))
    partition = _partition(image)
    assert (partition.replicas, partition.leader, partition.leader_epoch, partition.partition_epoch) == ((5,), 5, 3, 4)


# ---------------------------------------------------------------------- PartitionChangeRecord merges field by field


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (dict(isr=[2, 3]), dict(isr=(2, 3))),
        (dict(removing_replicas=[3]), dict(removing_replicas=(3,))),
        (dict(adding_replicas=[3]), dict(adding_replicas=(3,))),
        (dict(leader_recovery_state=1), dict(leader_recovery_state=1)),
        (dict(eligible_leader_replicas=[2]), dict(elr=(2,))),
        (dict(last_known_elr=[3]), dict(last_known_elr=(3,))),
        (dict(directories=[DIRS[2], DIRS[1], DIRS[0]]), dict(directories=(DIRS[2], DIRS[1], DIRS[0]))),
        (dict(replicas=[3, 2, 1], directories=[DIRS[2], DIRS[1], DIRS[0]]),
         dict(replicas=(3, 2, 1), directories=(DIRS[2], DIRS[1], DIRS[0]))),
        ({}, {}),  # an empty change still bumps the partition epoch
    ],
    ids=["isr", "removing", "adding", "recovery", "elr", "last-known-elr", "directories", "replicas", "nothing"],
)
def test_a_change_replaces_only_the_fields_it_sets(change: dict[str, object], expected: dict[str, object]) -> None:
    image = _image()
    before = _partition(image)
    image.replay(PartitionChangeRecord(partition_id=0, topic_id=TOPIC, **change))  # type: ignore[arg-type]
    after = _partition(image)
    assert after == before._replace(partition_epoch=before.partition_epoch + 1, **expected)


def test_a_leader_of_minus_one_is_a_leader_change() -> None:
    image = _image()
    image.replay(PartitionChangeRecord(partition_id=0, topic_id=TOPIC, leader=NO_LEADER))
    partition = _partition(image)
    assert (partition.leader, partition.leader_epoch, partition.partition_epoch) == (-1, 1, 1)


def test_no_leader_change_keeps_the_leader_and_its_epoch() -> None:
    image = _image()
    image.replay(PartitionChangeRecord(partition_id=0, topic_id=TOPIC, leader=NO_LEADER_CHANGE, isr=[1]))
    partition = _partition(image)
    assert (partition.leader, partition.leader_epoch, partition.partition_epoch) == (1, 0, 1)


def test_a_change_s_directories_must_match_its_replicas() -> None:
    image = _image()
    with pytest.raises(ReplayError, match="2 directories for 3 replicas"):
        image.replay(PartitionChangeRecord(partition_id=0, topic_id=TOPIC, directories=DIRS[:2]))
    with pytest.raises(ReplayError, match="3 directories for 2 replicas"):
        image.replay(PartitionChangeRecord(partition_id=0, topic_id=TOPIC, replicas=[1, 2], directories=DIRS))
    assert _partition(image).partition_epoch == 0  # nothing was applied


def test_shrinking_replicas_without_directories_makes_them_all_migrating() -> None:
    image = _image()
    image.replay(PartitionChangeRecord(partition_id=0, topic_id=TOPIC, replicas=[1, 2]))
    assert _partition(image).directories == (MIGRATING_DIRECTORY, MIGRATING_DIRECTORY)


def test_a_change_with_an_empty_elr_clears_it() -> None:
    image = _image()
    image.replay(PartitionChangeRecord(partition_id=0, topic_id=TOPIC, eligible_leader_replicas=[2], last_known_elr=[3]))
    image.replay(PartitionChangeRecord(partition_id=0, topic_id=TOPIC, eligible_leader_replicas=[], last_known_elr=[]))
    assert (_partition(image).elr, _partition(image).last_known_elr, _partition(image).partition_epoch) == ((), (), 2)


def test_a_change_of_an_unknown_topic_is_a_replay_error() -> None:
    with pytest.raises(ReplayError, match="no topic with that id"):
        _image().replay(PartitionChangeRecord(partition_id=0, topic_id=Uuid.from_longs(5, 5), isr=[1]))


# ---------------------------------------------------------------------- topics and configs


def test_removing_a_topic_keeps_the_other_topics_and_their_configs() -> None:
    image = _image()
    other = Uuid.from_longs(3, 3)
    image.replay(TopicRecord(name="payments", topic_id=other))
    image.replay(PartitionRecord(partition_id=0, topic_id=other, replicas=[2], isr=[2], leader=2, adding_replicas=[2]))
    image.replay(ConfigRecord(resource_type=2, resource_name="orders", name="retention.ms", value="1"))
    image.replay(ConfigRecord(resource_type=2, resource_name="payments", name="retention.ms", value="2"))
    image.replay(ConfigRecord(resource_type=4, resource_name="1", name="log.retention.ms", value="3"))
    image.replay(RemoveTopicRecord(topic_id=other))
    assert set(image.topics) == {TOPIC} and image.topic_ids == {"orders": TOPIC}
    assert image.configs == {(2, "orders"): {"retention.ms": "1"}, (4, "1"): {"log.retention.ms": "3"}}
    assert image.reassigning == {}


def test_a_removed_topic_s_name_can_be_used_again() -> None:
    image = _image()
    image.replay(RemoveTopicRecord(topic_id=TOPIC))
    again = Uuid.from_longs(8, 8)
    image.replay(TopicRecord(name="orders", topic_id=again))
    assert image.topic_ids == {"orders": again} and image.topics[again].partitions == {}


def test_a_config_value_is_replaced_and_deleting_an_absent_one_does_nothing() -> None:
    image = ReplicationControlManager()
    image.replay(ConfigRecord(resource_type=4, resource_name="", name="a", value="1"))
    image.replay(ConfigRecord(resource_type=4, resource_name="", name="b", value="2"))
    image.replay(ConfigRecord(resource_type=4, resource_name="", name="a", value="3"))
    assert image.configs == {(4, ""): {"a": "3", "b": "2"}}
    image.replay(ConfigRecord(resource_type=4, resource_name="", name="zzz", value=None))
    image.replay(ConfigRecord(resource_type=2, resource_name="nothing", name="a", value=None))
    assert image.configs == {(4, ""): {"a": "3", "b": "2"}}
    image.replay(ConfigRecord(resource_type=4, resource_name="", name="a", value=None))
    image.replay(ConfigRecord(resource_type=4, resource_name="", name="b", value=None))
    assert image.configs == {}


def test_an_empty_config_value_is_a_value() -> None:
    image = ReplicationControlManager()
    image.replay(ConfigRecord(resource_type=2, resource_name="t", name="x", value=""))
    assert image.configs == {(2, "t"): {"x": ""}}


def test_colliding_names_stay_tracked_until_the_last_one_goes() -> None:
    image = ReplicationControlManager()
    first, second = Uuid.from_longs(1, 1), Uuid.from_longs(2, 2)
    image.replay(TopicRecord(name="a.b", topic_id=first))
    image.replay(TopicRecord(name="a_b", topic_id=second))
    assert image.colliding == {"a_b": {"a.b", "a_b"}}
    image.replay(RemoveTopicRecord(topic_id=first))
    assert image.colliding == {"a_b": {"a_b"}}


# ---------------------------------------------------------------------- producer ids


def test_the_first_producer_ids_record_may_carry_any_value() -> None:
    image = ReplicationControlManager()
    assert not image.producer_ids_replayed
    image.replay(ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=0))
    assert image.producer_ids_replayed and image.next_producer_id == 0
    with pytest.raises(ReplayError, match="not greater than 0"):
        image.replay(ProducerIdsRecord(broker_id=1, broker_epoch=1, next_producer_id=0))
    image.replay(ProducerIdsRecord(broker_id=1, broker_epoch=1, next_producer_id=1))
    assert image.next_producer_id == 1


def test_allocating_does_not_move_the_next_id_until_the_record_is_replayed() -> None:
    image = ReplicationControlManager()
    image.replay(ProducerIdsRecord(broker_id=1, broker_epoch=1, next_producer_id=7000))
    first = image.allocate_producer_ids(2, 9)
    again = image.allocate_producer_ids(3, 4)
    assert first[1] == again[1] == 7000 and image.next_producer_id == 7000
    assert first[0] == [(ProducerIdsRecord(broker_id=2, broker_epoch=9, next_producer_id=8000), 0)]
    assert again[0] == [(ProducerIdsRecord(broker_id=3, broker_epoch=4, next_producer_id=8000), 0)]


def test_the_last_whole_block_below_the_int64_limit_is_still_handed_out() -> None:
    image = ReplicationControlManager()
    last = 2**63 - 1 - PRODUCER_ID_BLOCK_SIZE
    image.replay(ProducerIdsRecord(broker_id=1, broker_epoch=1, next_producer_id=last))
    records, start = image.allocate_producer_ids(1, 1)
    assert start == last and records[0][0].next_producer_id == 2**63 - 1  # type: ignore[attr-defined]
    image.replay(records[0][0])
    with pytest.raises(ApiError) as exhausted:
        image.allocate_producer_ids(1, 1)
    assert exhausted.value.error == Errors.UNKNOWN_SERVER_ERROR
    assert exhausted.value.message == (
        "Exhausted all producerIds as the next block's end producerId has exceeded the int64 type limit"
    )


def test_the_block_size_is_kafka_s() -> None:
    assert PRODUCER_ID_BLOCK_SIZE == 1000


# ---------------------------------------------------------------------- ClearElrRecord


def _elr_image() -> tuple[ReplicationControlManager, Uuid]:
    image = _image()
    image.replay(PartitionRecord(partition_id=1, topic_id=TOPIC, replicas=[1, 2], isr=[1], leader=1,
                                 leader_epoch=0, partition_epoch=0, eligible_leader_replicas=[2], last_known_elr=[]))
    other = Uuid.from_longs(4, 4)
    image.replay(TopicRecord(name="other", topic_id=other))
    image.replay(PartitionRecord(partition_id=0, topic_id=other, replicas=[1, 3], isr=[1], leader=1,
                                 leader_epoch=0, partition_epoch=5, eligible_leader_replicas=[], last_known_elr=[3]))
    return image, other


def test_clearing_one_topic_s_elr_bumps_only_its_partitions_that_had_one() -> None:
    image, other = _elr_image()
    image.replay(ClearElrRecord(topic_name="orders"))
    cleared, untouched, elsewhere = _partition(image, 1), _partition(image, 0), _partition(image, 0, other)
    assert (cleared.elr, cleared.last_known_elr, cleared.partition_epoch, cleared.leader_epoch) == ((), (), 1, 0)
    assert untouched.partition_epoch == 0
    assert (elsewhere.last_known_elr, elsewhere.partition_epoch) == ((3,), 5)


def test_clearing_with_no_topic_name_clears_every_topic() -> None:
    image, other = _elr_image()
    image.replay(ClearElrRecord(topic_name=""))
    assert (_partition(image, 1).elr, _partition(image, 1).partition_epoch) == ((), 1)
    assert (_partition(image, 0, other).last_known_elr, _partition(image, 0, other).partition_epoch) == ((), 6)
    assert _partition(image, 0).partition_epoch == 0


def test_clearing_the_elr_of_an_unknown_topic_is_a_replay_error() -> None:
    with pytest.raises(ReplayError, match="Unable to find a topic named nope in order to clear its ELRs."):
        _image().replay(ClearElrRecord(topic_name="nope"))


# ---------------------------------------------------------------------- the indexes


def _two_topics() -> tuple[ReplicationControlManager, Uuid]:
    """"orders" (partitions replayed 2, 0, 1) then "payments"."""
    image = ReplicationControlManager()
    image.replay(TopicRecord(name="orders", topic_id=TOPIC))
    for index, (isr, leader, elr) in {2: ([1, 2], 1, [3]), 0: ([2], 2, []), 1: ([3], -1, [1])}.items():
        image.replay(PartitionRecord(partition_id=index, topic_id=TOPIC, replicas=[1, 2, 3], isr=isr, leader=leader,
                                     eligible_leader_replicas=elr))
    payments = Uuid.from_longs(0, 1)  # sorts before TOPIC: the order is creation, not id
    image.replay(TopicRecord(name="payments", topic_id=payments))
    image.replay(PartitionRecord(partition_id=0, topic_id=payments, replicas=[1], isr=[1], leader=-1))
    return image, payments


def test_partitions_with_a_broker_in_their_isr_come_by_topic_creation_then_index() -> None:
    image, payments = _two_topics()
    assert image.partitions_with_broker_in_isr(1) == [(TOPIC, 2), (payments, 0)]
    assert image.partitions_with_broker_in_isr(2) == [(TOPIC, 0), (TOPIC, 2)]
    assert image.partitions_with_broker_in_isr(9) == []


def test_partitions_with_a_broker_in_their_elr() -> None:
    image, _ = _two_topics()
    assert image.partitions_with_broker_in_elr(3) == [(TOPIC, 2)]
    assert image.partitions_with_broker_in_elr(1) == [(TOPIC, 1)]
    assert image.partitions_with_broker_in_elr(2) == []


def test_partitions_without_a_leader() -> None:
    image, payments = _two_topics()
    assert image.partitions_without_leader() == [(TOPIC, 1), (payments, 0)]
    image.replay(PartitionChangeRecord(partition_id=1, topic_id=TOPIC, leader=3))
    assert image.partitions_without_leader() == [(payments, 0)]


def test_leaderships_follow_leader_changes() -> None:
    image, _ = _two_topics()
    assert image.has_leaderships(1) and image.has_leaderships(2) and not image.has_leaderships(3)
    image.replay(PartitionChangeRecord(partition_id=2, topic_id=TOPIC, leader=NO_LEADER))
    assert not image.has_leaderships(1)


def test_reassigning_partitions_are_tracked_in_the_order_they_started() -> None:
    image, payments = _two_topics()
    image.replay(PartitionChangeRecord(partition_id=2, topic_id=TOPIC, adding_replicas=[3]))
    image.replay(PartitionChangeRecord(partition_id=0, topic_id=TOPIC, removing_replicas=[1]))
    image.replay(PartitionChangeRecord(partition_id=0, topic_id=payments, adding_replicas=[2], replicas=[1, 2]))
    assert {t: list(p) for t, p in image.reassigning.items()} == {TOPIC: [2, 0], payments: [0]}
    assert _partition(image, 2).reassigning and not _partition(image, 1).reassigning
    # a change that keeps it reassigning keeps its place
    image.replay(PartitionChangeRecord(partition_id=2, topic_id=TOPIC, isr=[1, 2, 3]))
    assert list(image.reassigning[TOPIC]) == [2, 0]
    # completion empties adding and removing
    image.replay(PartitionChangeRecord(partition_id=2, topic_id=TOPIC, adding_replicas=[], removing_replicas=[]))
    image.replay(PartitionChangeRecord(partition_id=0, topic_id=payments, adding_replicas=[]))
    assert {t: list(p) for t, p in image.reassigning.items()} == {TOPIC: [0]}


def test_a_partition_record_can_start_or_end_a_reassignment() -> None:
    image, _ = _two_topics()
    image.replay(PartitionRecord(partition_id=1, topic_id=TOPIC, replicas=[1, 2], isr=[1], leader=1, adding_replicas=[2]))
    assert list(image.reassigning[TOPIC]) == [1]
    image.replay(PartitionRecord(partition_id=1, topic_id=TOPIC, replicas=[1, 2], isr=[1], leader=1))
    assert image.reassigning == {}


# ---------------------------------------------------------------------- a partition as a snapshot writes it


def test_a_partition_s_record_carries_directories_and_elr_only_when_asked() -> None:
    image = _image()
    image.replay(PartitionChangeRecord(partition_id=0, topic_id=TOPIC, eligible_leader_replicas=[2], last_known_elr=[]))
    partition = _partition(image)
    bare = partition.to_record(TOPIC, 0, elr=False, directories=False)
    assert (bare.directories, bare.eligible_leader_replicas, bare.last_known_elr) == ([], None, None)
    full = partition.to_record(TOPIC, 0, elr=True, directories=True)
    assert full.directories == DIRS and full.eligible_leader_replicas == [2]
    assert full.last_known_elr is None  # an empty list is not written
    assert (full.partition_id, full.topic_id, full.leader, full.leader_epoch, full.partition_epoch) == (0, TOPIC, 1, 0, 1)
    again = ReplicationControlManager()
    again.replay(TopicRecord(name="orders", topic_id=TOPIC))
    again.replay(full)
    assert _partition(again) == partition


def _assert_indexes_match_a_walk(image: ReplicationControlManager, brokers: range) -> None:
    for broker in brokers:
        assert image.partitions_with_broker_in_isr(broker) == image.partitions_where(lambda p, b=broker: b in p.isr)
        assert image.partitions_with_broker_in_elr(broker) == image.partitions_where(lambda p, b=broker: b in p.elr)
        assert image.has_leaderships(broker) == any(
            p.leader == broker for topic in image.topics.values() for p in topic.partitions.values()
        )
    assert image.partitions_without_leader() == image.partitions_where(lambda p: p.leader == NO_LEADER)
    assert image.partition_count == sum(len(topic.partitions) for topic in image.topics.values())


@pytest.mark.parametrize("seed", range(20))
def test_the_broker_indexes_agree_with_a_walk_of_every_partition(seed: int) -> None:
    """``BrokersToIsrs``' lookups answer what a walk of the whole image answers, in its order,
    through creations, changes, re-created topics, ELR clears and removals, and in a staged
    copy that changes apart from the image."""
    rng = random.Random(seed)
    brokers = range(1, 7)
    image = ReplicationControlManager()
    topic_ids = [Uuid.from_longs(seed, n) for n in range(1, 6)]

    def some_brokers(low: int = 0) -> list[int]:
        return rng.sample(list(brokers), rng.randint(low, 3))

    def change(topic_id: Uuid, index: int) -> PartitionChangeRecord:
        record = PartitionChangeRecord(partition_id=index, topic_id=topic_id)
        if rng.random() < 0.5:
            record.isr = some_brokers()
        if rng.random() < 0.4:
            record.leader = rng.choice([NO_LEADER, *brokers])
        if rng.random() < 0.3:
            record.eligible_leader_replicas = some_brokers()
        if rng.random() < 0.2:
            record.replicas = some_brokers(1)
            record.removing_replicas = some_brokers() if rng.random() < 0.5 else []
        return record

    for _ in range(300):
        topic_id = rng.choice(topic_ids)
        topic = image.topics.get(topic_id)
        roll = rng.random()
        if topic is None or roll < 0.05:
            image.replay(TopicRecord(name=f"t{topic_ids.index(topic_id)}", topic_id=topic_id))
        elif roll < 0.45:
            replicas = some_brokers(1)
            image.replay(PartitionRecord(
                partition_id=rng.randrange(-1, 8), topic_id=topic_id, replicas=replicas, isr=replicas[: rng.randint(0, 3)],
                leader=rng.choice([NO_LEADER, replicas[0]]), leader_epoch=0, partition_epoch=0,
                eligible_leader_replicas=some_brokers() or None,
            ))
        elif roll < 0.85 and topic.partitions:
            image.replay(change(topic_id, rng.choice(list(topic.partitions))))
        elif roll < 0.9:
            image.replay(ClearElrRecord(topic_name=topic.name if rng.random() < 0.5 else ""))
        elif roll < 0.95:
            image.replay(RemoveTopicRecord(topic_id=topic_id))
        else:
            staged = image.staged()
            if topic.partitions:
                staged.replay(change(topic_id, rng.choice(list(topic.partitions))))
            _assert_indexes_match_a_walk(staged, brokers)
        _assert_indexes_match_a_walk(image, brokers)


def test_an_isr_equal_to_the_replicas_is_their_tuple_and_broker_ids_are_held_once() -> None:
    image = _image()
    image.replay(PartitionRecord(
        partition_id=1, topic_id=TOPIC, replicas=[1000, 2000, 3], isr=[1000, 2000, 3], leader=1000, leader_epoch=0,
        partition_epoch=0, directories=DIRS,
    ))
    image.replay(PartitionRecord(
        partition_id=2, topic_id=TOPIC, replicas=[2000, 1000, 3], isr=[2000], leader=2000, leader_epoch=0,
        partition_epoch=0, directories=DIRS,
    ))
    image.replay(PartitionChangeRecord(partition_id=2, topic_id=TOPIC, isr=[2000, 1000, 3]))
    first, second = image.topics[TOPIC].partitions[1], image.topics[TOPIC].partitions[2]
    assert first.isr is first.replicas and second.isr is second.replicas
    assert first.replicas[0] is second.replicas[1] and first.replicas[1] is second.replicas[0]


def test_imbalanced_partitions_follow_every_change_and_match_a_walk() -> None:
    """The index of partitions not led by their first replica is what a walk of every
    partition finds, in its order, after random records of every kind that move leaders,
    replicas or whole topics; a staged copy keeps its own."""
    rng = random.Random(7)
    image = ReplicationControlManager()
    topics = [Uuid.from_longs(9, t) for t in range(4)]
    for name, topic_id in enumerate(topics):
        image.replay(TopicRecord(name=f"t{name}", topic_id=topic_id))
    for _ in range(600):
        topic_id = rng.choice(topics)
        index = rng.randrange(6)
        replicas = rng.sample(range(1, 6), rng.randint(1, 3))
        leader = rng.choice([*replicas, NO_LEADER])
        kind = rng.random()
        exists = index in image.topics[topic_id].partitions
        if kind < 0.4 or not exists:
            image.replay(PartitionRecord(partition_id=index, topic_id=topic_id, replicas=replicas, isr=replicas,
                                         leader=leader))
        elif kind < 0.8:
            image.replay(PartitionChangeRecord(partition_id=index, topic_id=topic_id, leader=leader))
        elif kind < 0.95:
            image.replay(PartitionChangeRecord(partition_id=index, topic_id=topic_id, replicas=replicas, isr=replicas))
        else:
            name = image.topics[topic_id].name
            image.replay(RemoveTopicRecord(topic_id=topic_id))
            image.replay(TopicRecord(name=name, topic_id=topic_id))
        walked = image.partitions_where(lambda p: p.leader != p.replicas[0])
        assert image.imbalanced_partitions() == walked
    staged = image.staged()
    (topic_id, index), *_ = staged.imbalanced_partitions()
    partition = staged.topics[topic_id].partitions[index]
    staged.replay(PartitionChangeRecord(partition_id=index, topic_id=topic_id, leader=partition.replicas[0]))
    assert (topic_id, index) not in staged.imbalanced_partitions()
    assert (topic_id, index) in image.imbalanced_partitions()
