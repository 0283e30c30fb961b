"""The partition-level requests of the active controller, as Kafka 4.4's
``ReplicationControlManager`` answers them: AlterPartition (KIP-497, KIP-903 for broker epochs
in the ISR), AssignReplicasToDirs (KIP-858, :func:`assign_replicas_to_dirs`), and the leader
and ISR updates after a replica is lost (:func:`leader_and_isr_updates`).

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

from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

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
from server.controller.cluster import ClusterControl
from server.controller.errors import ApiError
from server.controller.partition_change import (
    RECOVERED,
    RECOVERING,
    Election,
    PartitionChange,
    partition_change_record_version,
)
from server.controller.replication import (
    BROKER_RESOURCE,
    DIRECTORY_ASSIGNMENT_LEVEL,
    LOST_DIRECTORY,
    MIGRATING_DIRECTORY,
    NO_LEADER_CHANGE,
    TOPIC_RESOURCE,
    UNASSIGNED_DIRECTORY,
    PartitionRegistration,
    ReplicationImage,
    TopicImage,
)
from server.controller.result import Record
from server.controller.topic_configs import effective_topic_config

__all__ = [
    "BrokerPartitionEffects",
    "PartitionChanges",
    "TopicConfigLayers",
    "alter_partition",
    "assign_replicas_to_dirs",
    "effective_min_isr",
    "is_online_dir",
    "leader_acceptable",
    "leader_and_isr_updates",
]



class TopicConfigLayers:
    """The configs a topic's effective values come from: the image's topic configs, this node's
    dynamic broker configs, the cluster's default broker configs and the node's properties."""

    def __init__(self, image: ReplicationImage, node_id: int, static_config: Mapping[str, str]) -> None:
        self.image = image
        self.node_dynamic = image.configs.get((BROKER_RESOURCE, str(node_id)), {})
        self.cluster_dynamic = image.configs.get((BROKER_RESOURCE, ""), {})
        self.static_config = static_config

    def election(self, topic: str) -> Election:
        """UNCLEAN when the topic's ``unclean.leader.election.enable`` is true, else ONLINE
        (``uncleanLeaderElectionEnabledForTopic``)."""
        value = (self.value(topic, "unclean.leader.election.enable") or "").strip().lower()
        return Election.UNCLEAN if value == "true" else Election.ONLINE

    def value(self, topic: str, name: str) -> str | None:
        """The effective value of topic config ``name`` for ``topic``."""
        return effective_topic_config(
            name,
            self.image.configs.get((TOPIC_RESOURCE, topic), {}),
            node_dynamic=self.node_dynamic,
            cluster_dynamic=self.cluster_dynamic,
            static_config=self.static_config,
        ).value


def is_online_dir(directory: Uuid, online: tuple[Uuid, ...]) -> bool:
    """``DirectoryId.isOnline``: unassigned and migrating replicas count as online, lost ones
    not; a broker that registered no directories has every directory online."""
    if directory in (UNASSIGNED_DIRECTORY, MIGRATING_DIRECTORY):
        return True
    if directory == LOST_DIRECTORY:
        return False
    return not online or directory in online


def leader_acceptable(
    cluster: ClusterControl,
    partition: PartitionRegistration,
    broker_id: int,
    *,
    removed: tuple[int, ...] = (),
    added: int = -1,
) -> bool:
    """``LeaderAcceptor``: registered, unfenced and not shutting down (``added`` counts as
    such, the ``removed`` brokers never do), with the replica's directory online on that
    broker."""
    registration = cluster.registrations.get(broker_id)
    if registration is None or broker_id in removed:
        return False
    if broker_id != added and (registration.fenced or registration.in_controlled_shutdown):
        return False
    directory = dict(zip(partition.replicas, partition.directories, strict=True)).get(broker_id, UNASSIGNED_DIRECTORY)
    return is_online_dir(directory, registration.log_dirs)


def _valid_isr(replicas: tuple[int, ...], isr: list[int]) -> bool:
    """``Replicas.validateIsr``: distinct, non-negative members of the replicas."""
    return all(b >= 0 for b in isr) and len(set(isr)) == len(isr) and set(isr) <= set(replicas)


def _check(
    broker_id: int, partition: PartitionRegistration | None, data: RequestPartition, isr: list[BrokerState], cluster: ClusterControl
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
    image: ReplicationImage,
    cluster: ClusterControl,
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


def leader_and_isr_updates(
    partitions: Iterable[tuple[Uuid, int]],
    *,
    image: ReplicationImage,
    cluster: ClusterControl,
    configs: TopicConfigLayers,
    metadata_version: int,
    elr_enabled: bool,
    broker_to_remove: int = -1,
    broker_to_add: int = -1,
    unclean_shutdown_broker: int = -1,
) -> list[Record]:
    """``generateLeaderAndIsrUpdates``: for each (topic id, partition), the change that takes
    ``broker_to_remove`` and ``unclean_shutdown_broker`` out of its ISR and elects a leader
    among the acceptable replicas (active brokers, ``broker_to_add`` counted as active, the two
    removed ones not). Raises RuntimeError for a partition the image does not hold."""
    records: list[Record] = []
    changes = PartitionChanges(image, cluster, configs, metadata_version=metadata_version, elr_enabled=elr_enabled)
    for topic_id, index in partitions:
        topic = image.topics.get(topic_id)
        partition = None if topic is None else topic.partitions.get(index)
        if topic is None or partition is None:
            raise RuntimeError(f"Partition {topic_id}:{index} is not in the image")
        change = changes.change(
            topic_id, index,
            removed=(broker_to_remove, unclean_shutdown_broker), added=broker_to_add,
            election=configs.election(topic.name),
            unclean_shutdown_replicas=[unclean_shutdown_broker] if unclean_shutdown_broker != -1 else None,
        )
        change.target_isr = [b for b in partition.isr if b not in (broker_to_remove, unclean_shutdown_broker)]
        record = change.build()
        if record is not None:
            records.append((record, changes.record_version))
    return records


class BrokerPartitionEffects:
    """:class:`~server.controller.cluster.PartitionEffects` over the topics ``image``: the
    partition changes ``ReplicationControlManager`` writes when a broker is fenced, unfenced,
    shut down, re-registered or unregistered (``generateLeaderAndIsrUpdates`` over the
    partitions whose ISR or ELR holds it, or that have no leader)."""

    def __init__(
        self, image: ReplicationImage, cluster: ClusterControl, configs: TopicConfigLayers, *,
        metadata_version: int, elr_enabled: bool,
    ) -> None:
        self.image = image
        self.cluster = cluster
        self.configs = configs
        self.metadata_version = metadata_version
        self.elr_enabled = elr_enabled

    def _updates(self, partitions: Iterable[tuple[Uuid, int]], **brokers: int) -> list[Record]:
        return leader_and_isr_updates(
            partitions, image=self.image, cluster=self.cluster, configs=self.configs,
            metadata_version=self.metadata_version, elr_enabled=self.elr_enabled, **brokers,
        )

    def broker_removed(self, broker_id: int) -> list[Record]:
        """Leadership and ISR membership off ``broker_id``, for every partition whose ISR
        holds it (``handleBrokerFenced``, ``handleBrokerInControlledShutdown``)."""
        return self._updates(self.image.partitions_with_broker_in_isr(broker_id), broker_to_remove=broker_id)

    def broker_unfenced(self, broker_id: int) -> list[Record]:
        """Elections of the partitions without a leader, ``broker_id`` counted as active
        (``handleBrokerUnfenced``)."""
        return self._updates(self.image.partitions_without_leader(), broker_to_add=broker_id)

    def broker_shutdown(self, broker_id: int, clean: bool) -> list[Record]:
        """A new incarnation registers (``handleBrokerShutdown``): after an unclean shutdown
        with ELR enabled, the old one leaves ISRs and ELRs as an unclean-shutdown replica;
        otherwise as :meth:`broker_removed`."""
        if self.elr_enabled and not clean:
            return [
                *self._updates(self.image.partitions_with_broker_in_isr(broker_id), unclean_shutdown_broker=broker_id),
                *self._updates(self.image.partitions_with_broker_in_elr(broker_id), unclean_shutdown_broker=broker_id),
            ]
        return self.broker_removed(broker_id)

    def broker_unregistered(self, broker_id: int) -> list[Record]:
        """Out of every ISR, then of every ELR (``handleBrokerUnregistered``)."""
        return [
            *self._updates(self.image.partitions_with_broker_in_isr(broker_id), broker_to_remove=broker_id),
            *self._updates(self.image.partitions_with_broker_in_elr(broker_id), broker_to_remove=broker_id),
        ]

    def directory_offline(self, broker_id: int, directory: Uuid) -> list[Record]:
        """Leadership and ISR membership off ``broker_id`` for the partitions whose replica
        it keeps in ``directory`` (``handleDirectoriesOffline``: Kafka's
        ``directoriesToPartitions`` of that directory)."""

        def on_directory(partition: PartitionRegistration) -> bool:
            return any(b == broker_id and d == directory for b, d in zip(partition.replicas, partition.directories, strict=False))

        return self._updates(self.image.partitions_where(on_directory), broker_to_remove=broker_id)

    def has_leaderships(self, broker_id: int) -> bool:
        """``broker_id`` leads a partition."""
        return self.image.has_leaderships(broker_id)


class PartitionChanges:
    """What the operations on existing partitions (ElectLeaders, the periodic elections,
    reassignments) build their changes against: the image, the brokers, the topic configs, the
    metadata.version and whether ELR is enabled."""

    def __init__(
        self, image: ReplicationImage, cluster: ClusterControl, configs: TopicConfigLayers, *,
        metadata_version: int, elr_enabled: bool,
    ) -> None:
        self.image, self.cluster, self.configs = image, cluster, configs
        self.metadata_version, self.elr_enabled = metadata_version, elr_enabled
        self.record_version = partition_change_record_version(metadata_version)
        """The PartitionChangeRecord version at this metadata.version."""

    def change(
        self, topic_id: Uuid, index: int, *, removed: tuple[int, ...] = (), added: int = -1, **targets: Any
    ) -> PartitionChange:
        """A change of partition ``index`` of topic ``topic_id`` (both in the image), its
        leaders accepted as ``LeaderAcceptor`` does (:func:`leader_acceptable`, with
        ``removed`` and ``added``); ``targets`` set further fields of :class:`PartitionChange`
        (``election``, ``default_directory``, ...)."""
        topic = self.image.topics[topic_id]
        partition = topic.partitions[index]
        return PartitionChange(
            partition=partition,
            topic_id=topic_id,
            partition_id=index,
            acceptable_leader=partial(leader_acceptable, self.cluster, partition, removed=removed, added=added),
            metadata_version=self.metadata_version,
            min_isr=effective_min_isr(topic, self.configs),
            elr_enabled=self.elr_enabled,
            **targets,
        )


def effective_min_isr(topic: TopicImage, configs: TopicConfigLayers) -> int:
    """``getTopicEffectiveMinIsr``: the topic's min.insync.replicas, at most its replication
    factor (partition 0's)."""
    first = topic.partitions.get(0) or next(iter(topic.partitions.values()))
    return min(int(configs.value(topic.name, "min.insync.replicas") or "1"), len(first.replicas))


def assign_replicas_to_dirs(
    request: AssignReplicasToDirsRequest,
    *,
    image: ReplicationImage,
    cluster: ClusterControl,
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


def _staged(image: ReplicationImage, records: list[Record]) -> ReplicationImage:
    """A copy of the topics of ``image`` with ``records`` (partition changes) applied."""
    staged = ReplicationImage()
    staged.configs = image.configs
    for topic_id, topic in image.topics.items():
        staged.topics[topic_id] = TopicImage(topic.name, topic_id, dict(topic.partitions))
        staged.topic_ids[topic.name] = topic_id
    for record, _ in records:
        staged.replay(record)
    return staged
