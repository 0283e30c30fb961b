"""What a broker's fencing, unfencing, controlled shutdown, new incarnation and unregistration do
to its partitions (``server.controller.alter_partition.BrokerPartitionEffects`` through
``server.controller.cluster.ClusterControlManager``). The same changes are compared with a stock
controller's records in ``compat/test_topic_rpcs.py`` and run under faults in the "brokers"
simulation; these pin the rules."""

from __future__ import annotations

from kwire.uuid import Uuid
from messages.generated.broker_heartbeat_request import BrokerHeartbeatRequest
from messages.generated.broker_registration_change_record import BrokerRegistrationChangeRecord
from messages.generated.partition_change_record import PartitionChangeRecord
from messages.generated.partition_record import PartitionRecord
from messages.generated.register_broker_record import RegisterBrokerRecord
from messages.generated.topic_record import TopicRecord
from messages.generated.unregister_broker_record import UnregisterBrokerRecord
from messages.runtime import Message
from server.controller.cluster import ClusterControlManager
from server.controller.image import ReplicationControlManager
from server.controller.partition_effects import (
    BrokerPartitionEffects,
    TopicConfigLayers,
)

METADATA_VERSION = 21  # 3.9-IV0: directories, no ELR
TOPIC = Uuid.from_longs(1, 1)
CAUGHT_UP = 1 << 40


def _setup(*partitions: tuple[list[int], list[int], int]) -> tuple[ClusterControlManager, ReplicationControlManager]:
    """Brokers 1-3 registered and unfenced; topic "t" with partitions (replicas, isr, leader)."""
    cluster = ClusterControlManager("c", 9000)
    for broker_id in (1, 2, 3):
        cluster.replay(
            RegisterBrokerRecord(
                broker_id=broker_id, broker_epoch=broker_id, incarnation_id=Uuid.from_longs(broker_id, 0),
                fenced=False, log_dirs=[Uuid.from_longs(broker_id, 1)],
            ),
            broker_id,
        )
    cluster.activate(0)
    image = ReplicationControlManager()
    image.replay(TopicRecord(name="t", topic_id=TOPIC))
    for index, (replicas, isr, leader) in enumerate(partitions):
        image.replay(PartitionRecord(
            partition_id=index, topic_id=TOPIC, replicas=replicas, isr=isr, leader=leader,
            directories=[Uuid.from_longs(b, 1) for b in replicas],
        ))
    return cluster, image


def _effects(cluster: ClusterControlManager, image: ReplicationControlManager) -> BrokerPartitionEffects:
    return BrokerPartitionEffects(
        image, cluster, TopicConfigLayers(image, 0, {}), metadata_version=METADATA_VERSION, elr_enabled=False
    )


def _heartbeat(broker_id: int, **flags: bool) -> BrokerHeartbeatRequest:
    return BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=broker_id, current_metadata_offset=CAUGHT_UP, **flags)


def _changes(records: list[tuple[Message, int]]) -> list[tuple[int, list[int] | None, int]]:
    return [(r.partition_id, r.isr, r.leader) for r, _ in records if isinstance(r, PartitionChangeRecord)]


def _replay(cluster: ClusterControlManager, image: ReplicationControlManager, records: list[tuple[Message, int]]) -> None:
    for offset, (record, _) in enumerate(records, 100):
        if isinstance(record, PartitionChangeRecord):
            image.replay(record)
        else:
            cluster.replay(record, offset)


def test_a_fenced_broker_loses_leadership_and_isr_membership_first() -> None:
    cluster, image = _setup(([1, 2, 3], [1, 2, 3], 1), ([2, 1], [2, 1], 2), ([1], [1], 1))
    records, reply = cluster.process_heartbeat(
        _heartbeat(1, want_fence=True), metadata_version=METADATA_VERSION, partitions=_effects(cluster, image)
    )
    assert reply.is_fenced
    # a new leader from the ISR, then only the ISR shrinks, then the last replica keeps its ISR
    assert _changes(records) == [(0, [2, 3], 2), (1, [2], -2), (2, None, -1)]
    assert isinstance(records[-1][0], BrokerRegistrationChangeRecord) and records[-1][0].fenced == 1


def test_an_unfenced_broker_leads_the_partitions_that_had_no_leader() -> None:
    cluster, image = _setup(([1, 2], [1], 1))
    effects = _effects(cluster, image)
    fence, _ = cluster.process_heartbeat(_heartbeat(1, want_fence=True), metadata_version=METADATA_VERSION, partitions=effects)
    _replay(cluster, image, fence)
    assert image.partitions_without_leader() == [(TOPIC, 0)]
    records, reply = cluster.process_heartbeat(_heartbeat(1), metadata_version=METADATA_VERSION, partitions=effects)
    assert not reply.is_fenced
    assert records[0][0].fenced == -1  # type: ignore[attr-defined]
    assert _changes(records) == [(0, None, 1)]


def test_a_controlled_shutdown_moves_leadership_before_the_broker_may_stop() -> None:
    cluster, image = _setup(([1, 2], [1, 2], 1))
    effects = _effects(cluster, image)
    records, reply = cluster.process_heartbeat(
        _heartbeat(1, want_shut_down=True), metadata_version=METADATA_VERSION, partitions=effects
    )
    assert reply.in_controlled_shutdown and not reply.should_shut_down
    assert records[0][0].in_controlled_shutdown == 1  # type: ignore[attr-defined]
    assert _changes(records) == [(0, [2], 2)]
    _replay(cluster, image, records)
    cluster.controlled_shutdown_committed(1, 101)
    assert not image.has_leaderships(1)
    for other in (2, 3):  # the others report offsets past the shutdown's records
        cluster.process_heartbeat(_heartbeat(other), metadata_version=METADATA_VERSION, partitions=effects)
    _, reply = cluster.process_heartbeat(_heartbeat(1, want_shut_down=True), metadata_version=METADATA_VERSION, partitions=effects)
    assert reply.should_shut_down


def test_unregistration_and_a_new_incarnation_take_the_broker_out_first() -> None:
    cluster, image = _setup(([1, 2], [1, 2], 1))
    records = cluster.unregister_broker(1, _effects(cluster, image))
    assert _changes(records) == [(0, [2], 2)]
    assert isinstance(records[-1][0], UnregisterBrokerRecord)


def test_an_offline_directory_moves_only_the_partitions_on_it() -> None:
    """``handleDirectoriesOffline``: broker 1's partitions in its reported-offline directory
    lose it as leader and ISR member, then the registration keeps the other directory."""
    cluster = ClusterControlManager("c", 9000)
    dirs = {1: (Uuid.from_longs(1, 1), Uuid.from_longs(1, 2)), 2: (Uuid.from_longs(2, 1),), 3: (Uuid.from_longs(3, 1),)}
    for broker_id, broker_dirs in dirs.items():
        cluster.replay(RegisterBrokerRecord(
            broker_id=broker_id, broker_epoch=broker_id, incarnation_id=Uuid.from_longs(broker_id, 0),
            fenced=False, log_dirs=list(broker_dirs),
        ), broker_id)
    cluster.activate(0)
    image = ReplicationControlManager()
    image.replay(TopicRecord(name="t", topic_id=TOPIC))
    for index, first_dir in enumerate((dirs[1][0], dirs[1][1], dirs[1][0])):
        image.replay(PartitionRecord(
            partition_id=index, topic_id=TOPIC, replicas=[1, 2, 3], isr=[1, 2, 3], leader=1,
            directories=[first_dir, dirs[2][0], dirs[3][0]],
        ))
    request = BrokerHeartbeatRequest(
        broker_id=1, broker_epoch=1, current_metadata_offset=CAUGHT_UP, offline_log_dirs=[dirs[1][0]]
    )
    records, reply = cluster.process_heartbeat(request, metadata_version=METADATA_VERSION, partitions=_effects(cluster, image))
    assert not reply.is_fenced
    # partitions 0 and 2 keep broker 1's replica in the offline directory; 1 is on the other one
    assert _changes(records) == [(0, [2, 3], 2), (2, [2, 3], 2)]
    change = records[-1][0]
    assert isinstance(change, BrokerRegistrationChangeRecord) and change.log_dirs == [dirs[1][1]]
    _replay(cluster, image, records)
    assert cluster.registrations[1].log_dirs == (dirs[1][1],)
    # reported again: nothing more to do
    again, _ = cluster.process_heartbeat(request, metadata_version=METADATA_VERSION, partitions=_effects(cluster, image))
    assert again == []

