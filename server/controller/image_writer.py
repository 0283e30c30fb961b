"""The controller's image as the data records of a metadata snapshot (KIP-630; Kafka's
``MetadataImage.write`` with the ``ImageWriterOptions`` of the image's own metadata.version).

Replaying the records of :func:`image_view` from an empty controller rebuilds the same image: the same
finalized features, broker and controller registrations, topics and partitions, configs and
next producer id. The sections come in Kafka's order, each record at the version its
metadata.version writes:

1. features: the metadata.version FeatureLevelRecord first, then every other finalized feature
   (``FeaturesImage.write``; a feature at level 0 is not finalized and not written);
2. cluster: a RegisterBrokerRecord per broker with its epoch, fenced and controlled-shutdown
   state and directories, then the RegisterControllerRecord of each controller
   (``ClusterImage.write``, ``BrokerRegistration.toRecord``);
3. topics: each topic's TopicRecord followed by a PartitionRecord per partition with its
   current leader, epochs, ISR and, when the eligible.leader.replicas.version feature is on,
   its non-empty ELR and last known ELR (``TopicControlInfo.write``, ``PartitionRegistration
   .toRecord``);
4. configs: a ConfigRecord per config of each resource (``ConfigurationImage.write``);
5. client quotas: a ClientQuotaRecord per quota of each entity (``ClientQuotasImage.write``);
6. producer ids: one ProducerIdsRecord with broker id -1 and broker epoch -1 once a block was
   ever handed out (``ProducerIdsImage.write``);
7. ACLs: an AccessControlEntryRecord per binding (``AclsImage.write``);
8. SCRAM credentials: a UserScramCredentialRecord per user and mechanism (``ScramControlManager.write``);
9. delegation tokens: a DelegationTokenRecord per token (``DelegationTokenControlManager.write``).

Kafka walks hash maps, so its order inside a section is a hash order; here brokers and
controllers ascend by id, topics come in creation order, partitions ascend, features and
configs keep the order they were first set in, and a broker's supported features come in the
order of the ``HashMap`` copy of them Kafka's ``BrokerRegistration`` holds. Replay does not depend on any of these orders.

:func:`image_view` takes the image as it stands when called and gives its records lazily: the
topics' partition maps are copied (a partition is immutable, so a copy of the map is a copy of
the topic), and every other section, a few records at most per broker or resource, is made at
once. Its records can then be made and encoded a piece at a time while the image goes on
changing, as Kafka writes a snapshot from an immutable ``MetadataImage``. No I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from itertools import chain

from kwire.uuid import Uuid
from messages.generated.config_record import ConfigRecord
from messages.generated.feature_level_record import FeatureLevelRecord
from messages.generated.producer_ids_record import ProducerIdsRecord
from messages.generated.register_broker_record import (
    BrokerEndpoint,
    BrokerFeature,
    RegisterBrokerRecord,
)
from messages.generated.register_controller_record import RegisterControllerRecord
from messages.generated.topic_record import TopicRecord
from server.controller.activation import (
    ELIGIBLE_LEADER_REPLICAS_FEATURE,
    METADATA_VERSION_FEATURE,
)
from server.controller.cluster import (
    BrokerRegistration,
    ClusterControlManager,
    register_broker_record_version,
)
from server.controller.image import (
    DIRECTORY_ASSIGNMENT_LEVEL,
    PartitionRegistration,
    ReplicationControlManager,
)
from server.controller.java_order import java_hash_map_copy_order
from server.controller.partition_change import partition_change_record_version
from server.controller.result import Record

__all__ = ["ImageLossError", "image_view"]


class ImageLossError(Exception):
    """The image cannot be written without losing state (there is no finalized
    metadata.version); Kafka's ``ImageWriterOptions`` loss handler raises the same way."""


def image_view(
    *,
    feature_levels: Mapping[str, int],
    cluster: ClusterControlManager,
    controllers: Iterable[RegisterControllerRecord],
    replication: ReplicationControlManager,
    client_quotas: Iterable[Record] = (),
    security: Iterable[Record] = (),
) -> Iterator[Record]:
    """The ``(record, version)`` pairs of a snapshot of this image as of this call, in the
    order of the module docstring, made lazily (later changes of the image do not reach them);
    ``controllers`` are the controller registrations as records, ``client_quotas`` the records
    of section 5 and ``security`` those of sections 7 to 9, in order. Raises
    :class:`ImageLossError` at once when metadata.version is not finalized."""
    metadata_version = feature_levels.get(METADATA_VERSION_FEATURE, 0)
    if metadata_version <= 0:
        raise ImageLossError("the image has no metadata.version to write a snapshot with")
    elr_enabled = feature_levels.get(ELIGIBLE_LEADER_REPLICAS_FEATURE, 0) >= 1
    head: list[Record] = [(FeatureLevelRecord(name=METADATA_VERSION_FEATURE, feature_level=metadata_version), 0)]
    head += [
        (FeatureLevelRecord(name=name, feature_level=level), 0)
        for name, level in feature_levels.items()
        if name != METADATA_VERSION_FEATURE and level > 0
    ]
    broker_version = register_broker_record_version(metadata_version)
    head += [(_broker_record(cluster.registrations[i]), broker_version) for i in sorted(cluster.registrations)]
    head += [(record, 0) for record in sorted(controllers, key=lambda r: r.controller_id)]
    topics = [(topic.name, topic.topic_id, dict(topic.partitions)) for topic in replication.topics.values()]
    tail: list[Record] = []
    for (resource_type, resource_name), entries in replication.configs.items():
        tail += [
            (ConfigRecord(resource_type=resource_type, resource_name=resource_name, name=name, value=value), 0)
            for name, value in entries.items()
        ]
    tail += client_quotas
    if replication.producer_ids_replayed:
        tail.append((ProducerIdsRecord(broker_id=-1, broker_epoch=-1, next_producer_id=replication.next_producer_id), 0))
    tail += security
    return chain(
        head,
        _topic_records(topics, partition_change_record_version(metadata_version), elr=elr_enabled,
                       directories=metadata_version >= DIRECTORY_ASSIGNMENT_LEVEL),
        tail,
    )


def _topic_records(
    topics: list[tuple[str, Uuid, dict[int, PartitionRegistration]]], partition_version: int, *, elr: bool,
    directories: bool,
) -> Iterator[Record]:
    for name, topic_id, partitions in topics:
        yield TopicRecord(name=name, topic_id=topic_id), 0
        for index in sorted(partitions):
            yield partitions[index].to_record(topic_id, index, elr=elr, directories=directories), partition_version


def _broker_record(broker: BrokerRegistration) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id=broker.broker_id,
        incarnation_id=broker.incarnation_id,
        broker_epoch=broker.epoch,
        end_points=[
            BrokerEndpoint(name=name, host=host, port=port, security_protocol=protocol)
            for name, host, port, protocol in broker.endpoints
        ],
        features=[
            BrokerFeature(name=name, min_supported_version=broker.features[name][0], max_supported_version=broker.features[name][1])
            for name in java_hash_map_copy_order(list(broker.features))
        ],
        rack=broker.rack,
        fenced=broker.fenced,
        in_controlled_shutdown=broker.in_controlled_shutdown,
        log_dirs=list(broker.log_dirs),
        cordoned_log_dirs=None if broker.cordoned_log_dirs is None else list(broker.cordoned_log_dirs),
    )

