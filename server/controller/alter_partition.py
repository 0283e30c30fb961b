"""The partition-level requests of brokers at the active controller, as Kafka 4.4's
``ReplicationControlManager`` answers them: AlterPartition (KIP-497, KIP-903 for broker epochs
in the ISR) and AssignReplicasToDirs (KIP-858, :func:`assign_replicas_to_dirs`).

AlterPartition: a partition leader asks to change the ISR (or leader recovery state) of its
partitions.

The request's broker epoch must be current (else STALE_BROKER_EPOCH for the whole request). An
unknown topic id answers UNKNOWN_TOPIC_ID for each of its partitions. Each partition is checked
in Kafka's order: unknown (UNKNOWN_TOPIC_OR_PARTITION); a leader epoch or partition epoch ahead
of the controller's (NOT_CONTROLLER: this controller is behind); a stale leader epoch
(FENCED_LEADER_EPOCH); a sender that is not the leader (INVALID_REQUEST); a stale partition
epoch (INVALID_UPDATE_VERSION); an ISR that repeats a broker, names a non-replica or leaves the
leader out, or a RECOVERING state with more than one in-sync replica or after RECOVERED
(INVALID_REQUEST); an ISR member not registered, shutting down, fenced or at another broker
epoch (INELIGIBLE_REPLICA). A valid change becomes one PartitionChangeRecord
(``server.controller.partition_change``) and is answered with the partition's state after it;
a change that moves leadership away from the sender answers NEW_LEADER_ELECTED. No I/O.
"""

from __future__ import annotations

from kwire.errors import Errors
from kwire.uuid import Uuid
from messages.generated.alter_partition_request import AlterPartitionRequest, BrokerState
from messages.generated.alter_partition_request import PartitionData as RequestPartition
from messages.generated.alter_partition_response import (
    AlterPartitionResponse,
    PartitionData,
    TopicData,
)
from messages.generated.assign_replicas_to_dirs_request import AssignReplicasToDirsRequest
from messages.generated.assign_replicas_to_dirs_response import AssignReplicasToDirsResponse
from messages.generated.assign_replicas_to_dirs_response import DirectoryData as AssignedDirectory
from messages.generated.assign_replicas_to_dirs_response import PartitionData as AssignedPartition
from messages.generated.assign_replicas_to_dirs_response import TopicData as AssignedTopic
from server.controller.cluster import ClusterControlManager
from server.controller.errors import ApiError
from server.controller.image import (
    DIRECTORY_ASSIGNMENT_LEVEL,
    NO_LEADER_CHANGE,
    PartitionRegistration,
    ReplicationControlManager,
)
from server.controller.partition_change import (
    RECOVERED,
    RECOVERING,
)
from server.controller.partition_effects import (
    PartitionChanges,
    TopicConfigLayers,
    is_online_dir,
    leader_and_isr_updates,
)
from server.controller.result import Record

__all__ = ["alter_partition", "assign_replicas_to_dirs"]



def _valid_isr(replicas: tuple[int, ...], isr: list[int]) -> bool:
    """``Replicas.validateIsr``: distinct, non-negative members of the replicas."""
    return all(b >= 0 for b in isr) and len(set(isr)) == len(isr) and set(isr) <= set(replicas)


def _check(
    broker_id: int, partition: PartitionRegistration | None, data: RequestPartition, isr: list[BrokerState], cluster: ClusterControlManager
) -> Errors:
    """``validateAlterPartitionData``."""
    if partition is None:
        return Errors.UNKNOWN_TOPIC_OR_PARTITION
    if data.leader_epoch > partition.leader_epoch or data.partition_epoch > partition.partition_epoch:
        return Errors.NOT_CONTROLLER
    if data.leader_epoch < partition.leader_epoch:
        return Errors.FENCED_LEADER_EPOCH
    if broker_id != partition.leader:
        return Errors.INVALID_REQUEST
    if data.partition_epoch < partition.partition_epoch:
        return Errors.INVALID_UPDATE_VERSION
    new_isr = [state.broker_id for state in isr]
    if not _valid_isr(partition.replicas, new_isr) or partition.leader not in new_isr:
        return Errors.INVALID_REQUEST
    if data.leader_recovery_state == RECOVERING and len(new_isr) > 1:
        return Errors.INVALID_REQUEST
    if partition.leader_recovery_state == RECOVERED and data.leader_recovery_state == RECOVERING:
        return Errors.INVALID_REQUEST
    for state in isr:
        registration = cluster.registrations.get(state.broker_id)
        if (
            registration is None
            or registration.in_controlled_shutdown
            or registration.fenced
            or (state.broker_epoch != -1 and registration.epoch != state.broker_epoch)
        ):
            return Errors.INELIGIBLE_REPLICA
    return Errors.NONE


def alter_partition(
    request: AlterPartitionRequest,
    version: int,
    *,
    image: ReplicationControlManager,
    cluster: ClusterControlManager,
    configs: TopicConfigLayers,
    metadata_version: int,
    elr_enabled: bool,
) -> tuple[list[Record], AlterPartitionResponse]:
    """AlterPartition at the active controller (module docstring): the PartitionChangeRecords
    to append (each partition's change stands alone) and the answer. Raises ApiError
    STALE_BROKER_EPOCH for a sender that is not registered at the request's broker epoch."""
    cluster.check_broker_epoch(request.broker_id, request.broker_epoch)
    changes = PartitionChanges(image, cluster, configs, metadata_version=metadata_version, elr_enabled=elr_enabled)
    records: list[Record] = []
    topics = []
    for topic_data in request.topics:
        answered = TopicData(topic_id=topic_data.topic_id, partitions=[])
        topics.append(answered)
        topic = image.topics.get(topic_data.topic_id) if topic_data.topic_id != Uuid() else None
        if topic is None:
            answered.partitions = [
                PartitionData(partition_index=p.partition_index, error_code=Errors.UNKNOWN_TOPIC_ID)
                for p in topic_data.partitions
            ]
            continue
        for data in topic_data.partitions:
            index = data.partition_index
            isr = (
                [BrokerState(broker_id=b, broker_epoch=-1) for b in data.new_isr]
                if version < 3
                else list(data.new_isr_with_epochs)
            )
            partition = topic.partitions.get(index)
            error = _check(request.broker_id, partition, data, isr, cluster)
            if error != Errors.NONE or partition is None:
                answered.partitions.append(PartitionData(partition_index=index, error_code=error))
                continue
            change = changes.change(topic.topic_id, index, election=configs.election(topic.name))
            change.target_isr = [state.broker_id for state in isr]
            change.target_leader_recovery_state = data.leader_recovery_state
            record = change.build()
            if record is not None:
                records.append((record, changes.record_version))
                partition = partition.merge(record)
                if record.leader not in (request.broker_id, NO_LEADER_CHANGE):
                    answered.partitions.append(PartitionData(partition_index=index, error_code=Errors.NEW_LEADER_ELECTED))
                    continue
            answered.partitions.append(
                PartitionData(
                    partition_index=index,
                    error_code=Errors.NONE,
                    leader_id=partition.leader,
                    isr=list(partition.isr),
                    leader_recovery_state=partition.leader_recovery_state,
                    leader_epoch=partition.leader_epoch,
                    partition_epoch=partition.partition_epoch,
                )
            )
    return records, AlterPartitionResponse(throttle_time_ms=0, error_code=Errors.NONE, topics=topics)


def assign_replicas_to_dirs(
    request: AssignReplicasToDirsRequest,
    *,
    image: ReplicationControlManager,
    cluster: ClusterControlManager,
    configs: TopicConfigLayers,
    metadata_version: int,
    elr_enabled: bool,
) -> tuple[list[Record], AssignReplicasToDirsResponse]:
    """AssignReplicasToDirs (KIP-858, ``handleAssignReplicasToDirs``): each named replica of the
    sender moves to the named directory (a PartitionChangeRecord when that changes it); an
    unknown topic answers UNKNOWN_TOPIC_ID, an unknown partition UNKNOWN_TOPIC_OR_PARTITION, a
    partition the sender does not replicate NOT_LEADER_OR_FOLLOWER. Replicas put in a directory
    that is offline then lose leadership and ISR membership as after a failure. Raises ApiError
    UNSUPPORTED_VERSION below metadata.version 3.7-IV2 and STALE_BROKER_EPOCH for a sender not
    registered at the request's epoch."""
    if metadata_version < DIRECTORY_ASSIGNMENT_LEVEL:
        raise ApiError(Errors.UNSUPPORTED_VERSION, "Directory assignment is not supported yet.")
    broker_id = request.broker_id
    cluster.check_broker_epoch(broker_id, request.broker_epoch)
    registration = cluster.registrations[broker_id]
    changes = PartitionChanges(image, cluster, configs, metadata_version=metadata_version, elr_enabled=elr_enabled)
    records: list[Record] = []
    offline: list[tuple[Uuid, int]] = []
    directories = []
    for wanted in request.directories:
        directory_offline = not is_online_dir(wanted.id, registration.log_dirs)
        answered = AssignedDirectory(id=wanted.id, topics=[])
        for wanted_topic in wanted.topics:
            topic = image.topics.get(wanted_topic.topic_id)
            answered_topic = AssignedTopic(topic_id=wanted_topic.topic_id, partitions=[])
            for wanted_partition in wanted_topic.partitions:
                index = wanted_partition.partition_index
                error = Errors.NONE
                partition = None if topic is None else topic.partitions.get(index)
                if topic is None:
                    error = Errors.UNKNOWN_TOPIC_ID
                elif partition is None:
                    error = Errors.UNKNOWN_TOPIC_OR_PARTITION
                elif broker_id not in partition.replicas:
                    error = Errors.NOT_LEADER_OR_FOLLOWER
                else:
                    change = changes.change(topic.topic_id, index)
                    change.target_directories[broker_id] = wanted.id
                    record = change.build()
                    if record is not None:
                        records.append((record, changes.record_version))
                    if directory_offline:
                        offline.append((topic.topic_id, index))
                answered_topic.partitions.append(AssignedPartition(partition_index=index, error_code=error))
            answered.topics.append(answered_topic)
        directories.append(answered)
    if offline:
        # the changes above are not in the image yet: elect from the state they leave
        staged = _staged(image, records)
        records.extend(
            leader_and_isr_updates(
                offline, image=staged, cluster=cluster, configs=configs, metadata_version=metadata_version,
                elr_enabled=elr_enabled, broker_to_remove=broker_id,
            )
        )
    return records, AssignReplicasToDirsResponse(throttle_time_ms=0, error_code=Errors.NONE, directories=directories)


def _staged(image: ReplicationControlManager, records: list[Record]) -> ReplicationControlManager:
    """A copy of the topics of ``image`` with ``records`` (partition changes) applied."""
    staged = image.staged()
    for record, _ in records:
        staged.replay(record)
    return staged
