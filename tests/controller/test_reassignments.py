"""AlterPartitionReassignments and ListPartitionReassignments (``server.controller.reassignments``)
and the completion of a reassignment by the ISR (``server.controller.partition_change``). The
answers and records are compared with a stock controller's in ``compat/test_topic_rpcs.py``;
these pin the rules."""

from __future__ import annotations

from kwire.errors import Errors
from kwire.uuid import Uuid
from messages.generated.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from messages.generated.config_record import ConfigRecord
from messages.generated.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsTopics,
)
from messages.generated.partition_change_record import PartitionChangeRecord
from messages.generated.partition_record import PartitionRecord
from messages.generated.register_broker_record import RegisterBrokerRecord
from messages.generated.topic_record import TopicRecord
from server.controller.cluster import ClusterControlManager
from server.controller.image import ReplicationControlManager
from server.controller.partition_change import PartitionChange
from server.controller.partition_effects import (
    TopicConfigLayers,
    leader_acceptable,
)
from server.controller.reassignments import (
    alter_partition_reassignments,
    list_partition_reassignments,
    reassignment_replicas,
    revert_reassignment,
)

TOPIC = Uuid.from_longs(7, 7)


def _directory(broker_id: int) -> Uuid:
    return Uuid.from_longs(broker_id, 1)


def _setup(partitions: tuple[tuple[list[int], list[int], int], ...] = (([1, 2, 3], [1, 2, 3], 1),)) -> tuple[
    ClusterControlManager, ReplicationControlManager
]:
    """Brokers 1-5, each with one directory; topic "t" with ``partitions`` as (replicas, ISR,
    leader)."""
    cluster = ClusterControlManager("c", 9000)
    for broker_id in range(1, 6):
        cluster.replay(RegisterBrokerRecord(
            broker_id=broker_id, broker_epoch=broker_id, incarnation_id=Uuid.from_longs(broker_id, 0),
            fenced=False, log_dirs=[_directory(broker_id)],
        ), broker_id)
    image = ReplicationControlManager()
    image.replay(TopicRecord(name="t", topic_id=TOPIC))
    for index, (replicas, isr, leader) in enumerate(partitions):
        image.replay(PartitionRecord(
            partition_id=index, topic_id=TOPIC, replicas=replicas, isr=isr, leader=leader, leader_epoch=0,
            partition_epoch=0, directories=[_directory(b) for b in replicas],
        ))
    return cluster, image


def _alter(
    cluster: ClusterControlManager, image: ReplicationControlManager, targets: dict[int, list[int] | None], *,
    version: int = 1, allow_rf_change: bool = True, topic: str = "t",
) -> tuple[list[PartitionChangeRecord], list[tuple[int, int, str | None]]]:
    """Run a request and replay its records; (records, [(partition, error, message)])."""
    request = AlterPartitionReassignmentsRequest(
        allow_replication_factor_change=allow_rf_change,
        topics=[ReassignableTopic(name=topic, partitions=[
            ReassignablePartition(partition_index=index, replicas=replicas) for index, replicas in targets.items()
        ])],
    )
    records, response = alter_partition_reassignments(
        request, version, image=image, cluster=cluster, configs=TopicConfigLayers(image, 0, {}),
        metadata_version=21, elr_enabled=False,
    )
    for record, record_version in records:
        assert record_version == 1
        image.replay(record)
    results = [(p.partition_index, p.error_code, p.error_message) for t in response.responses for p in t.partitions]
    return [record for record, _ in records], results


def _listed(image: ReplicationControlManager, topics: list[ListPartitionReassignmentsTopics] | None = None) -> list[tuple]:
    response = list_partition_reassignments(ListPartitionReassignmentsRequest(topics=topics), image=image)
    assert response.error_code == Errors.NONE and response.error_message is None
    return [
        (t.name, p.partition_index, p.replicas, p.adding_replicas, p.removing_replicas)
        for t in response.topics for p in t.partitions
    ]


def _isr_change(cluster: ClusterControlManager, image: ReplicationControlManager, index: int, isr: list[int]) -> PartitionChangeRecord | None:
    """What an AlterPartition to ``isr`` writes for partition ``index``."""
    partition = image.topics[TOPIC].partitions[index]
    change = PartitionChange(
        partition=partition, topic_id=TOPIC, partition_id=index,
        acceptable_leader=lambda b: leader_acceptable(cluster, partition, b),
        metadata_version=21, min_isr=1, elr_enabled=False,
    )
    change.target_isr = isr
    record = change.build()
    if record is not None:
        image.replay(record)
    return record


def test_the_replicas_are_the_target_then_the_removed_ones() -> None:
    assert reassignment_replicas([1, 2, 3], [4, 3, 2]) == ([4, 3, 2, 1], [4], [1])
    assert reassignment_replicas([3, 1, 2], [5, 4]) == ([5, 4, 1, 2, 3], [4, 5], [1, 2, 3])
    assert reassignment_replicas([1, 2], [2, 1]) == ([2, 1], [], [])


def test_a_move_adds_first_and_removes_once_the_new_replica_is_in_sync() -> None:
    cluster, image = _setup()
    records, results = _alter(cluster, image, {0: [2, 3, 4]})
    assert results == [(0, Errors.NONE, None)]
    (record,) = records
    assert (record.replicas, record.adding_replicas, record.removing_replicas) == ([2, 3, 4, 1], [4], [1])
    assert record.directories == [_directory(b) for b in (2, 3, 4, 1)]
    assert record.leader == -2 and record.isr is None  # the leader stays until it is removed
    assert _listed(image) == [("t", 0, [2, 3, 4, 1], [4], [1])]

    # Broker 4 caught up: the leader puts it in the ISR; that completes the move and, as the
    # leader (1) leaves, elects the first in-sync target replica.
    completion = _isr_change(cluster, image, 0, [1, 2, 3, 4])
    assert completion is not None
    assert completion.replicas == [2, 3, 4] and completion.isr == [2, 3, 4]
    assert completion.adding_replicas == [] and completion.removing_replicas == []
    assert completion.leader == 2
    partition = image.topics[TOPIC].partitions[0]
    assert (partition.replicas, partition.isr, partition.leader, partition.leader_epoch) == ((2, 3, 4), (2, 3, 4), 2, 1)
    assert _listed(image) == [] and image.reassigning == {}


def test_a_move_that_only_reorders_completes_at_once() -> None:
    cluster, image = _setup()
    records, results = _alter(cluster, image, {0: [3, 2, 1]})
    assert results == [(0, Errors.NONE, None)]
    (record,) = records
    assert record.replicas == [3, 2, 1] and record.adding_replicas is None and record.removing_replicas is None
    assert record.leader == -2
    assert _listed(image) == []


def test_a_target_equal_to_the_replicas_writes_nothing() -> None:
    cluster, image = _setup()
    assert _alter(cluster, image, {0: [1, 2, 3]}) == ([], [(0, Errors.NONE, None)])


def test_a_shrinking_move_waits_for_every_remaining_replica_to_be_in_sync() -> None:
    cluster, image = _setup((([1, 2, 3], [1, 2], 1),))
    records, _ = _alter(cluster, image, {0: [1, 3]})
    (record,) = records
    assert (record.replicas, record.adding_replicas, record.removing_replicas) == ([1, 3, 2], None, [2])
    assert _listed(image) == [("t", 0, [1, 3, 2], [], [2])]
    assert _isr_change(cluster, image, 0, [1, 2]) is None  # 3 is not in sync yet
    completion = _isr_change(cluster, image, 0, [1, 2, 3])
    assert completion is not None and completion.replicas == [1, 3] and completion.isr == [1, 3]
    assert completion.leader == 1  # removing a replica bumps the leader epoch


def test_cancelling_removes_the_adding_replicas() -> None:
    cluster, image = _setup()
    _alter(cluster, image, {0: [2, 3, 4]})
    records, results = _alter(cluster, image, {0: None})
    assert results == [(0, Errors.NONE, None)]
    (record,) = records
    assert (record.replicas, record.adding_replicas, record.removing_replicas) == ([2, 3, 1], [], [])
    assert record.isr is None  # 4 never joined the ISR
    assert _listed(image) == []
    assert _alter(cluster, image, {0: None})[1] == [(0, Errors.NO_REASSIGNMENT_IN_PROGRESS, None)]


def test_a_revert_that_empties_the_isr_needs_unclean_election() -> None:
    cluster, image = _setup((([1], [1], 1),))
    _alter(cluster, image, {0: [2]})
    _isr_change(cluster, image, 0, [1, 2])  # completes: 2 alone
    _alter(cluster, image, {0: [2, 3]})
    image.replay(PartitionChangeRecord(topic_id=TOPIC, partition_id=0, isr=[3], leader=3))
    partition = image.topics[TOPIC].partitions[0]
    assert revert_reassignment(partition) == ([2], [2], True)
    _, results = _alter(cluster, image, {0: None})
    assert results == [(0, Errors.INVALID_REPLICA_ASSIGNMENT,
                        "Unable to revert partition assignment for t:0 because it would require an unclean leader election.")]
    image.replay(ConfigRecord(resource_type=2, resource_name="t", name="unclean.leader.election.enable", value="true"))
    records, results = _alter(cluster, image, {0: None})
    assert results == [(0, Errors.NONE, None)]
    (record,) = records
    # 2 is in the reverted ISR, so it is elected cleanly (no RECOVERING state).
    assert (record.replicas, record.isr, record.leader, record.leader_recovery_state) == ([2], [2], 2, -1)


def test_invalid_targets_are_refused_per_partition() -> None:
    cluster, image = _setup((([1, 2, 3], [1, 2, 3], 1), ([2, 3, 4], [2, 3, 4], 2)))
    records, results = _alter(cluster, image, {0: [], 1: [2, 9], 2: [1, 1], 3: [1]})
    assert records == []
    assert results == [
        (0, Errors.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list."),
        (1, Errors.INVALID_REPLICA_ASSIGNMENT,
         "The manual partition assignment includes broker 9, but no such broker is registered."),
        (2, Errors.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition t:2."),
        (3, Errors.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find partition t:3."),
    ]
    _, results = _alter(cluster, image, {0: [1, 1]})
    assert results == [(0, Errors.INVALID_REPLICA_ASSIGNMENT,
                        "The manual partition assignment includes the broker 1 more than once.")]
    _, results = _alter(cluster, image, {0: [1]}, topic="nope")
    assert results == [(0, Errors.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named nope.")]


def test_a_replication_factor_change_can_be_refused() -> None:
    cluster, image = _setup()
    _, results = _alter(cluster, image, {0: [1, 2]}, allow_rf_change=False)
    assert results == [(0, Errors.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 3 to 2")]
    # v0 always allows it.
    records, results = _alter(cluster, image, {0: [1, 2]}, version=0, allow_rf_change=False)
    assert results == [(0, Errors.NONE, None)] and len(records) == 1
    # During a reassignment the factor counted is the target's: replicas less the removing ones.
    _, results = _alter(cluster, image, {0: [4, 5]}, allow_rf_change=False)
    assert results == [(0, Errors.NONE, None)]


def test_listing_names_partitions_in_the_order_they_started() -> None:
    cluster, image = _setup((([1, 2], [1, 2], 1), ([2, 3], [2, 3], 2), ([3, 4], [3, 4], 3)))
    _alter(cluster, image, {2: [4, 5], 0: [1, 5]})
    assert _listed(image) == [("t", 2, [4, 5, 3], [5], [3]), ("t", 0, [1, 5, 2], [5], [2])]
    named = [ListPartitionReassignmentsTopics(name="t", partition_indexes=[0, 1, 9]),
             ListPartitionReassignmentsTopics(name="nope", partition_indexes=[0])]
    assert _listed(image, named) == [("t", 0, [1, 5, 2], [5], [2])]
    assert _listed(image, []) == []


def test_an_empty_request_gets_the_default_answer() -> None:
    cluster, image = _setup()
    records, response = alter_partition_reassignments(
        AlterPartitionReassignmentsRequest(topics=[]), 1, image=image, cluster=cluster,
        configs=TopicConfigLayers(image, 0, {}), metadata_version=21, elr_enabled=False,
    )
    assert records == [] and response.error_message == "" and response.responses == []


def test_a_move_that_replaces_one_in_progress_keeps_lists_it_leaves_empty() -> None:
    # Kafka 4.4 writes the same record (compat/test_topic_rpcs.py): a list the new move
    # leaves empty is not written, so the old AddingReplicas stay.
    cluster, image = _setup((([1, 2], [1, 2], 1),))
    _alter(cluster, image, {0: [1, 3]})
    assert _listed(image) == [("t", 0, [1, 3, 2], [3], [2])]
    records, _ = _alter(cluster, image, {0: [2, 1]})
    (record,) = records
    assert (record.replicas, record.adding_replicas, record.removing_replicas) == ([2, 1, 3], None, [3])
    assert _listed(image) == [("t", 0, [2, 1, 3], [3], [3])]
