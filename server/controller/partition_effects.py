"""How partitions follow their brokers and topics, at the active controller (Kafka 4.4's
``ReplicationControlManager``): the layers a topic's effective configs come from
(:class:`TopicConfigLayers`), which broker may lead (:func:`leader_acceptable`), the leader and
ISR updates after a replica is lost (:func:`leader_and_isr_updates`), what a broker's fencing,
unfencing, shutdown, new incarnation or unregistration does to the partitions
(:class:`BrokerPartitionEffects`, the ``PartitionEffects`` of ``server.controller.cluster``),
and the context every change of an existing partition is built in (:class:`PartitionChanges`,
over ``server.controller.partition_change.PartitionChange``). No I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

from kwire.uuid import Uuid
from server.controller.cluster import ClusterControlManager
from server.controller.image import (
    BROKER_RESOURCE,
    LOST_DIRECTORY,
    MIGRATING_DIRECTORY,
    TOPIC_RESOURCE,
    UNASSIGNED_DIRECTORY,
    PartitionRegistration,
    ReplicationControlManager,
    TopicControlInfo,
)
from server.controller.partition_change import (
    Election,
    PartitionChange,
    partition_change_record_version,
)
from server.controller.result import Record
from server.controller.topic_configs import effective_topic_config

__all__ = [
    "BrokerPartitionEffects",
    "PartitionChanges",
    "TopicConfigLayers",
    "effective_min_isr",
    "is_online_dir",
    "leader_acceptable",
    "leader_and_isr_updates",
]


class TopicConfigLayers:
    """The configs a topic's effective values come from: the image's topic configs, this node's
    dynamic broker configs, the cluster's default broker configs and the node's properties."""

    def __init__(self, image: ReplicationControlManager, node_id: int, static_config: Mapping[str, str]) -> None:
        self.image = image
        self.node_dynamic = image.configs.get((BROKER_RESOURCE, str(node_id)), {})
        self.cluster_dynamic = image.configs.get((BROKER_RESOURCE, ""), {})
        self.static_config = static_config

    def election(self, topic: str) -> Election:
        """UNCLEAN when the topic's ``unclean.leader.election.enable`` is true, else ONLINE
        (``ConfigurationControlManager.uncleanLeaderElectionEnabledForTopic``). Kafka reads the
        effective value as it is stored, with ``Boolean.parseBoolean``: "true" in any case,
        untrimmed, so " true " (which the config's BOOLEAN validation accepts) means false."""
        value = self.value(topic, "unclean.leader.election.enable") or ""
        return Election.UNCLEAN if value.lower() == "true" else Election.ONLINE

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
    cluster: ClusterControlManager,
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


def leader_and_isr_updates(
    partitions: Iterable[tuple[Uuid, int]],
    *,
    image: ReplicationControlManager,
    cluster: ClusterControlManager,
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
        self, image: ReplicationControlManager, cluster: ClusterControlManager, configs: TopicConfigLayers, *,
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
        self, image: ReplicationControlManager, cluster: ClusterControlManager, configs: TopicConfigLayers, *,
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


def effective_min_isr(topic: TopicControlInfo, configs: TopicConfigLayers) -> int:
    """``getTopicEffectiveMinIsr``: the topic's min.insync.replicas, at most its replication
    factor (partition 0's)."""
    first = topic.partitions.get(0) or next(iter(topic.partitions.values()))
    return min(int(configs.value(topic.name, "min.insync.replicas") or "1"), len(first.replicas))
