"""More partitions for existing topics at the active controller (KIP-631): CreatePartitions as
Kafka 4.4's ``ControllerApis`` checks it and ``ReplicationControlManager`` writes it.

CreatePartitions
    More partitions for existing topics, placed as new topics' are (from the next partition
    index on) or given, with the topic's replication factor; fewer or as many partitions answer
    INVALID_PARTITIONS, an unknown topic UNKNOWN_TOPIC_OR_PARTITION, more than 10,000 new
    partitions in one request POLICY_VIOLATION for every topic.

No I/O: randomness (placement) comes from the caller.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kwire.errors import Errors
from messages.generated.create_partitions_request import (
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from messages.generated.create_partitions_response import CreatePartitionsTopicResult
from server.controller.acls import TOPIC
from server.controller.authorizer import (
    ALTER,
    Authorize,
)
from server.controller.cluster import ClusterControlManager
from server.controller.errors import ApiError
from server.controller.image import (
    ReplicationControlManager,
)
from server.controller.java_order import (
    java_hash_map_order,
)
from server.controller.new_partitions import (
    MAX_PARTITIONS_PER_REQUEST,
    is_active,
    manual_isr,
    partition_record,
)
from server.controller.partition_change import (
    partition_change_record_version as partition_record_version,
)
from server.controller.placement import PlacementSpec
from server.controller.placing import place
from server.controller.plugins import (
    NO_PLUGINS,
    ControllerPlugins,
)
from server.controller.result import Record

if TYPE_CHECKING:
    import random


__all__ = ["create_partitions"]


def _grow_topic(
    topic: CreatePartitionsTopic, image: ReplicationControlManager, cluster: ClusterControlManager, version: int, rng: random.Random,
    plugins: ControllerPlugins,
) -> list[Record]:
    """The PartitionRecords that take ``topic`` to its requested count
    (``ReplicationControlManager.createPartitions``). Raises ApiError."""
    topic_id = image.topic_ids.get(topic.name)
    if topic_id is None:
        raise ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION)
    existing = image.topics[topic_id].partitions
    if topic.count == len(existing):
        raise ApiError(Errors.INVALID_PARTITIONS, f"Topic already has {len(existing)} partition(s).")
    if topic.count < len(existing):
        raise ApiError(
            Errors.INVALID_PARTITIONS,
            f"The topic {topic.name} currently has {len(existing)} partition(s); {topic.count} would not be an increase.",
        )
    additional = topic.count - len(existing)
    if topic.assignments is not None and len(topic.assignments) != additional:
        raise ApiError(
            Errors.INVALID_REPLICA_ASSIGNMENT,
            f"Attempted to add {additional} additional partition(s), but only {len(topic.assignments)} "
            "assignment(s) were specified.",
        )
    if not existing:
        raise ApiError(Errors.UNKNOWN_SERVER_ERROR, f"Invalid state: topic {topic.name} appears to have no partitions.")
    replication_factor = len(next(iter(existing.values())).replicas)
    start = len(existing)
    if topic.assignments is not None:
        placed = []
        for i, assignment in enumerate(topic.assignments):
            replicas = list(assignment.broker_ids)
            manual_isr(replicas, replication_factor, start + i, cluster)
            placed.append(replicas)
    else:
        placed = place(plugins, PlacementSpec(start, additional, replication_factor), cluster, rng)
    records = []
    for i, replicas in enumerate(placed):
        isr = [broker for broker in replicas if is_active(cluster, broker)]
        if not isr:
            raise ApiError(
                Errors.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {replication_factor} time(s): All brokers are currently fenced "
                "or in controlled shutdown.",
            )
        records.append(partition_record(cluster, topic_id, start + i, replicas, isr, version))
    return records


def create_partitions(
    request: CreatePartitionsRequest,
    *,
    image: ReplicationControlManager,
    cluster: ClusterControlManager,
    metadata_version: int,
    rng: random.Random,
    authorize: Authorize | None = None,
    plugins: ControllerPlugins = NO_PLUGINS,
) -> tuple[list[Record], list[CreatePartitionsTopicResult]]:
    """CreatePartitions at the active controller (module docstring): the records to append as
    one batch (none when ``ValidateOnly``) and one result per topic: the names given twice
    first, then those ``authorize`` refuses ALTER on (TOPIC_AUTHORIZATION_FAILED, no message),
    then the others, each group in the order of Kafka's hash set of the names
    (``ControllerApis.createPartitions``). Raises ApiError
    POLICY_VIOLATION for more than 10,000 new partitions (every topic fails with it)."""
    counts: dict[str, int] = {}
    for topic in request.topics:
        counts[topic.name] = counts.get(topic.name, 0) + 1
    # ControllerApis.createPartitions walks hash sets of the names
    duplicates = java_hash_map_order([name for name, count in counts.items() if count > 1])
    results = [
        CreatePartitionsTopicResult(name=name, error_code=Errors.INVALID_REQUEST, error_message="Duplicate topic name.")
        for name in duplicates
    ]
    by_name = {t.name: t for t in request.topics}
    topics = [by_name[name] for name in java_hash_map_order(list(counts)) if counts[name] == 1]
    if authorize is not None:
        refused = [t.name for t in topics if not authorize(ALTER, TOPIC, t.name, True)]
        results += [CreatePartitionsTopicResult(name=name, error_code=Errors.TOPIC_AUTHORIZATION_FAILED) for name in refused]
        topics = [t for t in topics if t.name not in refused]
    total = 0
    for topic in topics:
        topic_id = image.topic_ids.get(topic.name)
        if topic.count >= 0 and topic_id is not None:
            total += max(0, topic.count - len(image.topics[topic_id].partitions))
            if total > MAX_PARTITIONS_PER_REQUEST:
                raise ApiError(Errors.POLICY_VIOLATION, "Excessively large number of additional partitions per request.")
    version = partition_record_version(metadata_version)
    records: list[Record] = []
    for topic in topics:
        try:
            records.extend(_grow_topic(topic, image, cluster, version, rng, plugins))
        except ApiError as exc:
            results.append(CreatePartitionsTopicResult(name=topic.name, error_code=exc.error, error_message=exc.message))
        else:
            results.append(CreatePartitionsTopicResult(name=topic.name, error_code=Errors.NONE, error_message=None))
    return ([] if request.validate_only else records), results
