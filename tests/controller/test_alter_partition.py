"""AlterPartition and AssignReplicasToDirs at the active controller
(``server.controller.alter_partition``), each of Kafka 4.4's checks in its order with its error
code, and the records and answers of valid requests. Stock controllers' answers to the same
requests are compared in ``compat/test_topic_rpcs.py``; these pin one rule per test."""

from __future__ import annotations

import pytest

from kwire.errors import Errors
from kwire.uuid import Uuid
from messages.generated.alter_partition_request import AlterPartitionRequest, BrokerState, TopicData
from messages.generated.alter_partition_request import PartitionData as Data
from messages.generated.alter_partition_response import AlterPartitionResponse
from messages.generated.assign_replicas_to_dirs_request import (
    AssignReplicasToDirsRequest,
    DirectoryData,
)
from messages.generated.assign_replicas_to_dirs_request import PartitionData as AssignPartition
from messages.generated.assign_replicas_to_dirs_request import TopicData as AssignTopic
from messages.generated.assign_replicas_to_dirs_response import AssignReplicasToDirsResponse
from messages.generated.config_record import ConfigRecord
from messages.generated.partition_change_record import PartitionChangeRecord
from messages.generated.topic_record import TopicRecord
from server.controller.alter_partition import alter_partition, assign_replicas_to_dirs
from server.controller.cluster import ClusterControlManager
from server.controller.errors import ApiError
from server.controller.image import (
    LOST_DIRECTORY,
    NO_LEADER_CHANGE,
    UNASSIGNED_DIRECTORY,
    ReplicationControlManager,
)
from server.controller.partition_change import RECOVERED, RECOVERING
from server.controller.partition_effects import TopicConfigLayers
from server.controller.result import Record
from tests.controller.fixtures import active_cluster, broker_epoch, directory, partition_record

TOPIC = Uuid.from_longs(3, 3)
REASSIGNING = Uuid.from_longs(4, 4)
MV = 21  # 3.9-IV0
LEADER_EPOCH, PARTITION_EPOCH = 5, 9


def _image() -> ReplicationControlManager:
    """Topic "t": partition 0 on 1-3 with ISR [1, 2]; partition 1 on 1, 2 and the
    unregistered 9; partition 2 RECOVERING with ISR [1]; all led by 1 at epochs 5 / 9.
    Topic "r": replicas 1-4 moving from 1 to 4, ISR [1, 2, 3], led by 1."""
    image = ReplicationControlManager()
    image.replay(TopicRecord(name="t", topic_id=TOPIC))
    epochs = dict(leader_epoch=LEADER_EPOCH, partition_epoch=PARTITION_EPOCH)
    image.replay(partition_record(TOPIC, 0, [1, 2, 3], [1, 2], 1, **epochs))
    image.replay(partition_record(TOPIC, 1, [1, 2, 9], [1, 2], 1, **epochs))
    image.replay(partition_record(TOPIC, 2, [1, 2, 3], [1], 1, leader_recovery_state=RECOVERING, **epochs))
    image.replay(TopicRecord(name="r", topic_id=REASSIGNING))
    image.replay(partition_record(
        REASSIGNING, 0, [1, 2, 3, 4], [1, 2, 3], 1, adding_replicas=[4], removing_replicas=[1], **epochs
    ))
    return image


def _cluster(**kw: object) -> ClusterControlManager:
    return active_cluster(1, 2, 3, 4, **kw)  # type: ignore[arg-type]


def _data(index: int, isr: list[int], *, version: int = 3, leader_epoch: int = LEADER_EPOCH,
          partition_epoch: int = PARTITION_EPOCH, recovery: int = RECOVERED, epochs: dict[int, int] | None = None) -> Data:
    """A partition of a request at ``version``: v3 names each ISR member with its broker
    epoch (the registered one unless ``epochs`` says otherwise), v2 only its id."""
    data = Data(partition_index=index, leader_epoch=leader_epoch, partition_epoch=partition_epoch,
                leader_recovery_state=recovery)
    if version < 3:
        data.new_isr = list(isr)
    else:
        data.new_isr_with_epochs = [
            BrokerState(broker_id=b, broker_epoch=(epochs or {}).get(b, broker_epoch(b))) for b in isr
        ]
    return data


def _alter(*partitions: Data, sender: int = 1, topic: Uuid = TOPIC, version: int = 3, mv: int = MV,
           image: ReplicationControlManager | None = None, cluster: ClusterControlManager | None = None, elr: bool = False,
           sender_epoch: int | None = None) -> tuple[list[Record], AlterPartitionResponse]:
    image = _image() if image is None else image
    request = AlterPartitionRequest(
        broker_id=sender, broker_epoch=broker_epoch(sender) if sender_epoch is None else sender_epoch,
        topics=[TopicData(topic_id=topic, partitions=list(partitions))],
    )
    return alter_partition(
        request, version, image=image, cluster=_cluster() if cluster is None else cluster,
        configs=TopicConfigLayers(image, 0, {}), metadata_version=mv, elr_enabled=elr,
    )


def _errors(response: AlterPartitionResponse) -> list[tuple[int, int]]:
    return [(p.partition_index, p.error_code) for t in response.topics for p in t.partitions]


def _error(*partitions: Data, **kw: object) -> Errors:
    records, response = _alter(*partitions, **kw)  # type: ignore[arg-type]
    (answer,) = [p for t in response.topics for p in t.partitions]
    if answer.error_code != Errors.NONE:
        assert records == []
    return Errors(answer.error_code)


# ---------------------------------------------------------------- request-level checks


def test_a_sender_at_another_broker_epoch_fails_the_whole_request() -> None:
    with pytest.raises(ApiError) as raised:
        _alter(_data(0, [1, 2]), sender_epoch=7)
    assert (raised.value.error, raised.value.message) == (
        Errors.STALE_BROKER_EPOCH, "Expected broker epoch 101, but got broker epoch 7")


def test_an_unregistered_sender_fails_the_whole_request() -> None:
    with pytest.raises(ApiError) as raised:
        _alter(_data(0, [1, 2]), sender=8, sender_epoch=108)
    assert (raised.value.error, raised.value.message) == (
        Errors.STALE_BROKER_EPOCH, "No broker registration found for broker id 8")


@pytest.mark.parametrize("topic", [Uuid.from_longs(7, 7), Uuid()], ids=["unknown", "zero"])
def test_an_unknown_topic_id_answers_each_of_its_partitions(topic: Uuid) -> None:
    records, response = _alter(_data(0, [1, 2]), _data(4, [1]), topic=topic)
    assert records == []
    assert response.error_code == Errors.NONE
    assert [t.topic_id for t in response.topics] == [topic]
    assert _errors(response) == [(0, Errors.UNKNOWN_TOPIC_ID), (4, Errors.UNKNOWN_TOPIC_ID)]


def test_an_unknown_topic_does_not_stop_the_others() -> None:
    image = _image()
    request = AlterPartitionRequest(broker_id=1, broker_epoch=broker_epoch(1), topics=[
        TopicData(topic_id=Uuid.from_longs(7, 7), partitions=[_data(0, [1])]),
        TopicData(topic_id=TOPIC, partitions=[_data(0, [1])]),
    ])
    records, response = alter_partition(
        request, 3, image=image, cluster=_cluster(), configs=TopicConfigLayers(image, 0, {}),
        metadata_version=MV, elr_enabled=False,
    )
    assert [[(p.partition_index, p.error_code) for p in t.partitions] for t in response.topics] == [
        [(0, Errors.UNKNOWN_TOPIC_ID)], [(0, Errors.NONE)]]
    assert len(records) == 1


def test_an_unknown_partition() -> None:
    assert _error(_data(7, [1, 2])) == Errors.UNKNOWN_TOPIC_OR_PARTITION


# ---------------------------------------------------------------- per-partition checks, in order


@pytest.mark.parametrize(
    ("sender", "leader_epoch", "partition_epoch", "error"),
    [
        (1, 6, 9, Errors.NOT_CONTROLLER),
        (1, 5, 10, Errors.NOT_CONTROLLER),
        (1, 4, 10, Errors.NOT_CONTROLLER),
        (2, 6, 9, Errors.NOT_CONTROLLER),
        (1, 4, 9, Errors.FENCED_LEADER_EPOCH),
        (2, 4, 8, Errors.FENCED_LEADER_EPOCH),
        (2, 5, 9, Errors.INVALID_REQUEST),
        (2, 5, 8, Errors.INVALID_REQUEST),
        (1, 5, 8, Errors.INVALID_UPDATE_VERSION),
        (1, 5, 9, Errors.NONE),
    ],
    ids=[
        "leader-epoch-ahead", "partition-epoch-ahead", "ahead-beats-fenced", "ahead-beats-not-leader",
        "stale-leader-epoch", "fenced-beats-not-leader", "not-the-leader", "not-leader-beats-stale-partition-epoch",
        "stale-partition-epoch", "current",
    ],
)
def test_epochs_and_sender_are_checked_in_kafkas_order(
    sender: int, leader_epoch: int, partition_epoch: int, error: Errors
) -> None:
    assert _error(_data(0, [1], leader_epoch=leader_epoch, partition_epoch=partition_epoch), sender=sender) == error


@pytest.mark.parametrize(
    "isr",
    [[1, 1, 2], [1, 4], [1, -1], [2, 3], [], [1, 2, 3, 4]],
    ids=["repeated", "not-a-replica", "negative", "without-the-leader", "empty", "more-than-the-replicas"],
)
def test_an_isr_that_is_not_a_set_of_replicas_with_the_leader_is_invalid(isr: list[int]) -> None:
    assert _error(_data(0, isr, version=2)) == Errors.INVALID_REQUEST


def test_a_recovering_partition_keeps_a_single_in_sync_replica() -> None:
    assert _error(_data(2, [1, 2], recovery=RECOVERING)) == Errors.INVALID_REQUEST
    assert _error(_data(2, [1], recovery=RECOVERING)) == Errors.NONE


def test_a_recovered_partition_cannot_go_back_to_recovering() -> None:
    assert _error(_data(0, [1], recovery=RECOVERING)) == Errors.INVALID_REQUEST


def test_the_isr_shape_is_checked_before_the_eligibility_of_its_members() -> None:
    # 9 is not registered (ineligible), but naming 1 twice is refused first
    assert _error(_data(1, [1, 9, 1])) == Errors.INVALID_REQUEST


@pytest.mark.parametrize(
    ("index", "isr", "cluster", "epochs"),
    [
        (0, [1, 2, 3], dict(fenced=(3,)), None),
        (0, [1, 2, 3], dict(shutting_down=(3,)), None),
        (1, [1, 2, 9], {}, None),
        (0, [1, 2], {}, {2: 7}),
        (0, [1, 2], {}, {1: 7}),
    ],
    ids=["fenced", "controlled-shutdown", "unregistered", "follower-epoch-mismatch", "leader-epoch-mismatch"],
)
def test_an_ineligible_isr_member(index: int, isr: list[int], cluster: dict[str, object], epochs: dict[int, int] | None) -> None:
    assert _error(_data(index, isr, epochs=epochs), cluster=_cluster(**cluster)) == Errors.INELIGIBLE_REPLICA


def test_version_2_does_not_check_broker_epochs_and_version_3_skips_minus_one() -> None:
    assert _error(_data(0, [1, 2, 3], version=2), version=2) == Errors.NONE
    assert _error(_data(0, [1, 2, 3], epochs={3: -1})) == Errors.NONE
    assert _error(_data(0, [1, 2, 3], epochs={3: 1})) == Errors.INELIGIBLE_REPLICA


def test_each_version_reads_its_own_isr_field() -> None:
    data = _data(0, [1, 2, 3])
    data.new_isr = [1, 1]  # what a v2 reader would refuse
    assert _error(data) == Errors.NONE
    legacy = _data(0, [1, 2, 3], version=2)
    legacy.new_isr_with_epochs = [BrokerState(broker_id=1, broker_epoch=1)]
    assert _error(legacy, version=2) == Errors.NONE


def test_a_fenced_broker_outside_the_new_isr_does_not_matter() -> None:
    assert _error(_data(0, [1, 2]), cluster=_cluster(fenced=(3,))) == Errors.NONE


# ---------------------------------------------------------------- valid changes


def test_an_isr_shrink_is_one_record_and_answers_the_state_after_it() -> None:
    records, response = _alter(_data(0, [1]))
    ((record, version),) = records
    assert isinstance(record, PartitionChangeRecord) and version == 1
    assert (record.topic_id, record.partition_id, record.isr, record.leader) == (TOPIC, 0, [1], NO_LEADER_CHANGE)
    assert (record.replicas, record.directories, record.leader_recovery_state) == (None, None, -1)
    (answer,) = response.topics[0].partitions
    assert (answer.error_code, answer.leader_id, answer.isr, answer.leader_epoch, answer.partition_epoch,
            answer.leader_recovery_state) == (Errors.NONE, 1, [1], LEADER_EPOCH, PARTITION_EPOCH + 1, RECOVERED)
    assert response.error_code == Errors.NONE and response.throttle_time_ms == 0


def test_an_isr_expansion() -> None:
    records, response = _alter(_data(0, [1, 2, 3]))
    assert [(r.isr, r.leader) for r, _ in records] == [([1, 2, 3], NO_LEADER_CHANGE)]  # type: ignore[attr-defined]
    (answer,) = response.topics[0].partitions
    assert (answer.isr, answer.partition_epoch) == ([1, 2, 3], PARTITION_EPOCH + 1)


def test_the_isr_keeps_the_order_the_leader_sent() -> None:
    records, _ = _alter(_data(0, [2, 3, 1]))
    assert [r.isr for r, _ in records] == [[2, 3, 1]]  # type: ignore[attr-defined]


def test_an_unchanged_isr_writes_nothing_and_answers_the_current_state() -> None:
    records, response = _alter(_data(0, [1, 2]))
    assert records == []
    (answer,) = response.topics[0].partitions
    assert (answer.error_code, answer.isr, answer.leader_epoch, answer.partition_epoch) == (
        Errors.NONE, [1, 2], LEADER_EPOCH, PARTITION_EPOCH)


def test_before_3_6_an_isr_shrink_bumps_the_leader_epoch() -> None:
    records, response = _alter(_data(0, [1]), mv=11)
    assert [(r.isr, r.leader, v) for r, v in records] == [([1], 1, 0)]  # type: ignore[attr-defined]
    (answer,) = response.topics[0].partitions
    assert (answer.error_code, answer.leader_epoch, answer.partition_epoch) == (
        Errors.NONE, LEADER_EPOCH + 1, PARTITION_EPOCH + 1)
    # an expansion never did
    records, _ = _alter(_data(0, [1, 2, 3]), mv=11)
    assert [r.leader for r, _ in records] == [NO_LEADER_CHANGE]  # type: ignore[attr-defined]


@pytest.mark.parametrize(("mv", "version"), [(16, 0), (17, 1), (MV, 1), (23, 2), (33, 2)])
def test_the_record_version_follows_the_metadata_version(mv: int, version: int) -> None:
    records, _ = _alter(_data(0, [1]), mv=mv)
    assert [v for _, v in records] == [version]


def test_a_leader_ends_recovery_and_grows_the_isr() -> None:
    records, response = _alter(_data(2, [1, 2], recovery=RECOVERED))
    assert [(r.isr, r.leader_recovery_state) for r, _ in records] == [([1, 2], RECOVERED)]  # type: ignore[attr-defined]
    (answer,) = response.topics[0].partitions
    assert (answer.leader_recovery_state, answer.isr) == (RECOVERED, [1, 2])


def test_each_partition_stands_alone() -> None:
    records, response = _alter(_data(0, [1]), _data(1, [1, 9]), _data(2, [1, 2], recovery=RECOVERED), _data(5, [1]))
    assert _errors(response) == [
        (0, Errors.NONE), (1, Errors.INELIGIBLE_REPLICA), (2, Errors.NONE), (5, Errors.UNKNOWN_TOPIC_OR_PARTITION)]
    assert [r.partition_id for r, _ in records] == [0, 2]  # type: ignore[attr-defined]


def test_with_eligible_leader_replicas_a_shrink_below_min_isr_records_them() -> None:
    image = _image()
    image.replay(ConfigRecord(resource_type=2, resource_name="t", name="min.insync.replicas", value="2"))
    records, _ = _alter(_data(0, [1]), image=image, mv=33, elr=True)
    assert [(r.isr, r.eligible_leader_replicas, v) for r, v in records] == [([1], [2], 2)]  # type: ignore[attr-defined]
    records, _ = _alter(_data(0, [1]), image=image, mv=33, elr=False)
    assert [(r.isr, r.eligible_leader_replicas) for r, _ in records] == [([1], None)]  # type: ignore[attr-defined]


def test_a_reassignment_completed_by_the_isr_moves_leadership_away_from_a_removed_leader() -> None:
    records, response = _alter(_data(0, [1, 2, 3, 4]), topic=REASSIGNING)
    ((record, _),) = records
    assert isinstance(record, PartitionChangeRecord)
    assert (record.replicas, record.isr, record.leader, record.adding_replicas, record.removing_replicas) == (
        [2, 3, 4], [2, 3, 4], 2, [], [])
    assert record.directories == [directory(2), directory(3), directory(4)]
    assert _errors(response) == [(0, Errors.NEW_LEADER_ELECTED)]
    assert response.topics[0].partitions[0].isr == []  # no state in that answer


def test_a_reassignment_completed_by_the_isr_that_keeps_the_leader_bumps_its_epoch() -> None:
    image = _image()
    image.replay(TopicRecord(name="k", topic_id=Uuid.from_longs(8, 8)))
    image.replay(partition_record(
        Uuid.from_longs(8, 8), 0, [1, 2, 3], [1, 2], 1, adding_replicas=[3], removing_replicas=[2],
        leader_epoch=LEADER_EPOCH, partition_epoch=PARTITION_EPOCH,
    ))
    records, response = _alter(_data(0, [1, 2, 3]), topic=Uuid.from_longs(8, 8), image=image)
    assert [(r.replicas, r.isr, r.leader) for r, _ in records] == [([1, 3], [1, 3], 1)]  # type: ignore[attr-defined]
    (answer,) = response.topics[0].partitions
    assert (answer.error_code, answer.leader_id, answer.isr, answer.leader_epoch, answer.partition_epoch) == (
        Errors.NONE, 1, [1, 3], LEADER_EPOCH + 1, PARTITION_EPOCH + 1)


def test_a_reassignment_stays_while_an_adding_replica_is_out_of_sync() -> None:
    records, response = _alter(_data(0, [1, 2]), topic=REASSIGNING)
    assert [(r.replicas, r.isr, r.adding_replicas) for r, _ in records] == [(None, [1, 2], None)]  # type: ignore[attr-defined]
    assert _errors(response) == [(0, Errors.NONE)]


# ---------------------------------------------------------------- AssignReplicasToDirs


def _assign_setup() -> tuple[ReplicationControlManager, ClusterControlManager]:
    """Broker 1 with two directories; topic "t": partition 0 on [1, 2] with broker 1's replica
    not yet placed, partition 1 on [2, 3]."""
    image = ReplicationControlManager()
    image.replay(TopicRecord(name="t", topic_id=TOPIC))
    image.replay(partition_record(TOPIC, 0, [1, 2], [1, 2], 1, directories=[UNASSIGNED_DIRECTORY, directory(2)]))
    image.replay(partition_record(TOPIC, 1, [2, 3], [2, 3], 2))
    cluster = active_cluster(1, 2, 3, log_dirs={1: (directory(1), directory(1, 2))})
    return image, cluster


def _assign(
    *assignments: tuple[Uuid, Uuid, list[int]], mv: int = MV, epoch: int | None = None,
    setup: tuple[ReplicationControlManager, ClusterControlManager] | None = None,
) -> tuple[list[Record], AssignReplicasToDirsResponse]:
    """Broker 1 assigns, per (directory, topic id, partitions)."""
    image, cluster = _assign_setup() if setup is None else setup
    request = AssignReplicasToDirsRequest(broker_id=1, broker_epoch=broker_epoch(1) if epoch is None else epoch, directories=[
        DirectoryData(id=d, topics=[AssignTopic(topic_id=t, partitions=[AssignPartition(partition_index=i) for i in ps])])
        for d, t, ps in assignments
    ])
    return assign_replicas_to_dirs(
        request, image=image, cluster=cluster, configs=TopicConfigLayers(image, 0, {}), metadata_version=mv,
        elr_enabled=False,
    )


def _assigned(response: AssignReplicasToDirsResponse) -> list[tuple[Uuid, Uuid, int, int]]:
    return [
        (d.id, t.topic_id, p.partition_index, p.error_code)
        for d in response.directories for t in d.topics for p in t.partitions
    ]


def test_directory_assignment_needs_3_7_iv2() -> None:
    with pytest.raises(ApiError) as raised:
        _assign((directory(1), TOPIC, [0]), mv=16, epoch=5)
    assert (raised.value.error, raised.value.message) == (
        Errors.UNSUPPORTED_VERSION, "Directory assignment is not supported yet.")


def test_directory_assignment_checks_the_broker_epoch() -> None:
    with pytest.raises(ApiError) as raised:
        _assign((directory(1), TOPIC, [0]), epoch=5)
    assert raised.value.error == Errors.STALE_BROKER_EPOCH


def test_directory_assignment_errors_per_partition() -> None:
    unknown = Uuid.from_longs(7, 7)
    records, response = _assign((directory(1), unknown, [0, 1]), (directory(1), TOPIC, [5, 1]))
    assert records == []
    assert _assigned(response) == [
        (directory(1), unknown, 0, Errors.UNKNOWN_TOPIC_ID), (directory(1), unknown, 1, Errors.UNKNOWN_TOPIC_ID),
        (directory(1), TOPIC, 5, Errors.UNKNOWN_TOPIC_OR_PARTITION), (directory(1), TOPIC, 1, Errors.NOT_LEADER_OR_FOLLOWER),
    ]
    assert response.error_code == Errors.NONE


def test_an_assignment_changes_only_the_senders_directory() -> None:
    records, response = _assign((directory(1, 2), TOPIC, [0]))
    ((record, version),) = records
    assert isinstance(record, PartitionChangeRecord) and version == 1
    assert record.directories == [directory(1, 2), directory(2)]
    assert (record.isr, record.leader, record.replicas) == (None, NO_LEADER_CHANGE, None)
    assert _assigned(response) == [(directory(1, 2), TOPIC, 0, Errors.NONE)]


def test_an_assignment_to_the_current_directory_writes_nothing() -> None:
    image, cluster = _assign_setup()
    records, _ = _assign((directory(1), TOPIC, [0]), setup=(image, cluster))
    for record, _ in records:
        image.replay(record)
    again, response = _assign((directory(1), TOPIC, [0]), setup=(image, cluster))
    assert again == [] and _assigned(response) == [(directory(1), TOPIC, 0, Errors.NONE)]


@pytest.mark.parametrize("offline", [directory(1, 3), LOST_DIRECTORY], ids=["unknown-directory", "lost"])
def test_a_replica_assigned_to_an_offline_directory_then_leaves_leadership_and_isr(offline: Uuid) -> None:
    records, response = _assign((offline, TOPIC, [0]))
    changes = [r for r, _ in records]
    assert all(isinstance(r, PartitionChangeRecord) for r in changes)
    assert [(r.directories, r.leader, r.isr) for r in changes] == [  # type: ignore[attr-defined]
        ([offline, directory(2)], NO_LEADER_CHANGE, None),
        (None, 2, [2]),
    ]
    assert _assigned(response) == [(offline, TOPIC, 0, Errors.NONE)]


def test_several_directories_are_answered_in_request_order() -> None:
    records, response = _assign((directory(1, 2), TOPIC, [0]), (directory(1), TOPIC, [1]))
    assert [d.id for d in response.directories] == [directory(1, 2), directory(1)]
    assert _assigned(response) == [
        (directory(1, 2), TOPIC, 0, Errors.NONE), (directory(1), TOPIC, 1, Errors.NOT_LEADER_OR_FOLLOWER)]
    assert len(records) == 1
