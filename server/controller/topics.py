"""Creating topics at the active controller (KIP-631): CreateTopics as Kafka 4.4's
``ControllerApis`` checks it and ``ReplicationControlManager`` writes it.

CreateTopics
    Names given twice answer INVALID_REQUEST "Duplicate topic name."; ``__cluster_metadata``
    answers INVALID_REQUEST; more than 10,000 partitions in one request fails every topic with
    POLICY_VIOLATION. Each other topic is checked in Kafka's order: its name
    (INVALID_TOPIC_EXCEPTION, also for a name that collides with an existing one through '.'
    and '_'), existence (TOPIC_ALREADY_EXISTS), configs (INVALID_CONFIG, see
    ``server.controller.topic_configs``), then either its manual assignments
    (INVALID_REQUEST / INVALID_REPLICA_ASSIGNMENT) or its partition count and replication factor
    (INVALID_PARTITIONS / INVALID_REPLICATION_FACTOR) and the placement of its replicas
    (``server.controller.placement``). A created topic is a TopicRecord, its ConfigRecords and
    a ClearElrRecord when it sets ``min.insync.replicas`` while eligible leader replicas are
    enabled, and one PartitionRecord per partition (the ISR the replicas on active brokers, the leader the
    first of them), all in one batch; its result carries the new topic id, the partition count,
    the replication factor and every effective topic config.

DeleteTopics is ``server.controller.topic_deletion``, CreatePartitions
``server.controller.partition_creation``; what CreateTopics and CreatePartitions share is
``server.controller.new_partitions``. No I/O: randomness (placement, topic ids) comes from the
caller.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kwire.errors import Errors
from kwire.topics import METADATA_TOPIC_NAME
from kwire.uuid import Uuid
from messages.generated.clear_elr_record import ClearElrRecord
from messages.generated.config_record import ConfigRecord
from messages.generated.create_topics_request import CreatableTopic, CreateTopicsRequest
from messages.generated.create_topics_response import CreatableTopicConfigs, CreatableTopicResult
from messages.generated.topic_record import TopicRecord
from server.controller.acls import CLUSTER, CLUSTER_NAME, TOPIC
from server.controller.authorizer import (
    CREATE,
    DESCRIBE_CONFIGS,
    Authorize,
)
from server.controller.cluster import ClusterControlManager
from server.controller.errors import ApiError
from server.controller.image import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    ReplicationControlManager,
    invalid_topic_name,
    topic_collision_key,
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
    CreateTopicRequestMetadata,
)
from server.controller.result import EXCESSIVE_BATCH, MAX_RECORDS_PER_USER_OP, Record
from server.controller.topic_configs import (
    effective_topic_configs,
    validate_topic_configs,
)

if TYPE_CHECKING:
    import random


__all__ = [
    "MIN_INSYNC_REPLICAS",
    "TopicDefaults",
    "create_topics",
]


MIN_INSYNC_REPLICAS = "min.insync.replicas"



@dataclass(frozen=True, slots=True)
class TopicDefaults:
    """What the controller's node contributes to a new topic: ``num.partitions``,
    ``default.replication.factor``, its id (whose dynamic broker configs count), its
    properties as written (the static configs of effective topic configs) and its plug-ins."""

    num_partitions: int
    replication_factor: int
    node_id: int
    static_config: Mapping[str, str]
    plugins: ControllerPlugins = NO_PLUGINS
    """The policies and the replica placer (``server.controller.plugins``)."""


def _total_partitions(topics: list[CreatableTopic], default_partitions: int) -> None:
    total = 0
    for topic in topics:
        if not topic.assignments:
            if topic.num_partitions == -1:
                total += default_partitions
            elif topic.num_partitions > 0:
                total += topic.num_partitions
        else:
            total += len(topic.assignments)
        if total > MAX_PARTITIONS_PER_REQUEST:
            raise ApiError(Errors.POLICY_VIOLATION, "Excessively large number of partitions per request.")


def _manual_partitions(
    topic: CreatableTopic, cluster: ClusterControlManager
) -> dict[int, tuple[list[int], list[int]]]:
    """Replicas and ISR of each manually assigned partition (``validateManualPartitionAssignment``)."""
    if topic.replication_factor != -1:
        raise ApiError(
            Errors.INVALID_REQUEST, "A manual partition assignment was specified, but replication factor was not set to -1."
        )
    if topic.num_partitions != -1:
        raise ApiError(
            Errors.INVALID_REQUEST, "A manual partition assignment was specified, but numPartitions was not set to -1."
        )
    parts: dict[int, tuple[list[int], list[int]]] = {}
    replication_factor: int | None = None
    for assignment in topic.assignments:
        index = assignment.partition_index
        if index in parts:
            raise ApiError(
                Errors.INVALID_REPLICA_ASSIGNMENT, f"Found multiple manual partition assignments for partition {index}"
            )
        replicas = list(assignment.broker_ids)
        parts[index] = (replicas, manual_isr(replicas, replication_factor, index, cluster))
        replication_factor = len(replicas)
    if any(index not in parts for index in range(len(parts))):
        raise ApiError(Errors.INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence")
    return parts



def _placed_partitions(
    topic: CreatableTopic, cluster: ClusterControlManager, defaults: TopicDefaults, rng: random.Random
) -> dict[int, tuple[list[int], list[int]]]:
    """Replicas and ISR of each partition the controller places (``defaults.plugins``' placer)."""
    if topic.replication_factor < -1 or topic.replication_factor == 0:
        raise ApiError(
            Errors.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0, or -1 to use the default value."
        )
    if topic.num_partitions < -1 or topic.num_partitions == 0:
        raise ApiError(Errors.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.")
    partitions = defaults.num_partitions if topic.num_partitions == -1 else topic.num_partitions
    replication_factor = defaults.replication_factor if topic.replication_factor == -1 else topic.replication_factor
    try:
        placed = place(defaults.plugins, PlacementSpec(0, partitions, replication_factor), cluster, rng)
    except ApiError as exc:
        if exc.error != Errors.INVALID_REPLICATION_FACTOR:
            raise
        raise ApiError(
            Errors.INVALID_REPLICATION_FACTOR, f"Unable to replicate the partition {replication_factor} time(s): {exc.message}"
        ) from None
    parts = {}
    for index, replicas in enumerate(placed):
        isr = [broker for broker in replicas if is_active(cluster, broker)]
        if not isr:
            raise ApiError(
                Errors.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {replication_factor} time(s): All brokers are currently fenced "
                "or in controlled shutdown.",
            )
        parts[index] = (replicas, isr)
    return parts


def _config_errors(topic: CreatableTopic) -> tuple[dict[str, str], ApiError | None]:
    configs: dict[str, str] = {}
    null_names = []
    for config in topic.configs:
        if config.value is None:
            null_names.append(config.name)
        else:
            configs[config.name] = config.value
    if null_names:
        return configs, ApiError(
            Errors.INVALID_CONFIG, "Null value not supported for topic configs: " + ",".join(null_names)
        )
    return configs, None


def create_topics(
    request: CreateTopicsRequest,
    *,
    image: ReplicationControlManager,
    cluster: ClusterControlManager,
    metadata_version: int,
    elr_enabled: bool,
    defaults: TopicDefaults,
    rng: random.Random,
    new_topic_id: Callable[[], Uuid] | None = None,
    authorize: Authorize | None = None,
) -> tuple[list[Record], list[CreatableTopicResult]]:
    """CreateTopics at the active controller (module docstring): the records to append as one
    batch (none when ``validateOnly``) and one result per requested topic, in request order,
    followed by the duplicated and refused names, then the names ``authorize`` refuses. Raises
    ApiError POLICY_VIOLATION for a request of too many partitions, or of more than
    ``MAX_RECORDS_PER_USER_OP`` records (a topic of 10,000 partitions is 10,001: every topic
    fails with it, even with ``validateOnly``).
    ``elr_enabled``: the eligible.leader.replicas.version feature is finalized at 1 or more.

    With ``authorize`` (``ControllerApis.createTopics``): CREATE on the cluster allows every
    topic, else CREATE on each topic; a topic created without DESCRIBE_CONFIGS on it is
    answered without its configs, partition count and replication factor
    (TOPIC_AUTHORIZATION_FAILED in its config error code); a refused topic gets
    TOPIC_AUTHORIZATION_FAILED "Authorization failed." after every other result."""
    counts: dict[str, int] = {}
    for topic in request.topics:
        counts[topic.name] = counts.get(topic.name, 0) + 1
    topics = [t for t in request.topics if counts[t.name] == 1 and t.name != METADATA_TOPIC_NAME]
    refused: list[str] = []
    hidden: set[str] = set()
    if authorize is not None:
        if not authorize(CREATE, CLUSTER, CLUSTER_NAME, False):
            refused = [t.name for t in topics if not authorize(CREATE, TOPIC, t.name, True)]
            topics = [t for t in topics if t.name not in refused]
        hidden = {t.name for t in topics if not authorize(DESCRIBE_CONFIGS, TOPIC, t.name, False)}
    _total_partitions(topics, defaults.num_partitions)

    errors: dict[str, ApiError] = {}
    for topic in topics:
        reason = invalid_topic_name(topic.name)
        if reason is not None:
            errors[topic.name] = ApiError(Errors.INVALID_TOPIC_EXCEPTION, f"Topic name is invalid: {reason}")
        key = topic_collision_key(topic.name)
        colliding = image.colliding.get(key) if key is not None else None
        if colliding:
            errors[topic.name] = ApiError(
                Errors.INVALID_TOPIC_EXCEPTION,
                f"Topic '{topic.name}' collides with existing topic: {next(iter(sorted(colliding)))}",
            )
    for topic in topics:
        if topic.name in image.topic_ids:
            errors[topic.name] = ApiError(Errors.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists.")
    for topic in topics:
        if topic.name not in errors:
            _, error = _config_errors(topic)
            if error is not None:
                errors[topic.name] = error

    records: list[Record] = []
    results: dict[str, CreatableTopicResult] = {}
    node_dynamic = image.configs.get((BROKER_RESOURCE, str(defaults.node_id)), {})
    cluster_dynamic = image.configs.get((BROKER_RESOURCE, ""), {})
    version = partition_record_version(metadata_version)
    for topic in topics:
        if topic.name in errors:
            continue
        configs, _ = _config_errors(topic)
        try:
            validate_topic_configs(configs, defaults.static_config)
            if configs:  # an incremental alteration of a new resource, as Kafka writes them
                defaults.plugins.validate_alter_config("TOPIC", topic.name, configs)
            if topic.assignments:
                parts = _manual_partitions(topic, cluster)
                policy_request = CreateTopicRequestMetadata(
                    topic.name, None, None, {i: list(replicas) for i, (replicas, _) in parts.items()}, dict(configs))
            else:
                parts = _placed_partitions(topic, cluster, defaults, rng)
                policy_request = CreateTopicRequestMetadata(
                    topic.name, len(parts), len(parts[0][0]), None, dict(configs))
            defaults.plugins.validate_create_topic(policy_request)
        except ApiError as exc:  # a policy's failure too (PluginFailure): that topic's answer
            errors[topic.name] = exc
            continue
        topic_id = Uuid.random(rng) if new_topic_id is None else new_topic_id()
        effective = effective_topic_configs(
            configs, node_dynamic=node_dynamic, cluster_dynamic=cluster_dynamic, static_config=defaults.static_config
        )
        results[topic.name] = CreatableTopicResult(
            name=topic.name,
            topic_id=topic_id,
            error_code=Errors.NONE,
            error_message=None,
            topic_config_error_code=Errors.NONE,
            num_partitions=len(parts),
            replication_factor=len(parts[0][0]),
            configs=[
                CreatableTopicConfigs(
                    name=entry.name, value=entry.value, read_only=False, config_source=entry.source, is_sensitive=False
                )
                for entry in effective
            ],
        )
        if topic.name in hidden:  # ReplicationControlManager.createTopic without describable
            results[topic.name] = CreatableTopicResult(
                name=topic.name, topic_id=topic_id, error_code=Errors.NONE, error_message=None,
                topic_config_error_code=Errors.TOPIC_AUTHORIZATION_FAILED, num_partitions=-1, replication_factor=-1,
                configs=[],
            )
        records.append((TopicRecord(name=topic.name, topic_id=topic_id), 0))
        for name in java_hash_map_order(list(configs)):
            records.append(
                (ConfigRecord(resource_type=TOPIC_RESOURCE, resource_name=topic.name, name=name, value=configs[name]), 0)
            )
        if elr_enabled and MIN_INSYNC_REPLICAS in configs:  # createClearElrRecordsAsNeeded
            records.append((ClearElrRecord(topic_name=topic.name), 0))
        for index in sorted(parts):
            replicas, isr = parts[index]
            records.append(partition_record(cluster, topic_id, index, replicas, isr, version))
        if len(records) > MAX_RECORDS_PER_USER_OP:  # the BoundedList of createTopics overflows
            raise ApiError(Errors.POLICY_VIOLATION, EXCESSIVE_BATCH)

    answers = []
    for topic in topics:
        error = errors.get(topic.name)
        if error is None:
            answers.append(results[topic.name])
        else:
            answers.append(CreatableTopicResult(name=topic.name, error_code=error.error, error_message=error.message))
    for name, count in counts.items():
        if count > 1:
            answers.append(
                CreatableTopicResult(name=name, error_code=Errors.INVALID_REQUEST, error_message="Duplicate topic name.")
            )
        elif name == METADATA_TOPIC_NAME:
            answers.append(
                CreatableTopicResult(
                    name=name,
                    error_code=Errors.INVALID_REQUEST,
                    error_message=f"Creation of internal topic {METADATA_TOPIC_NAME} is prohibited.",
                )
            )
    answers += [
        CreatableTopicResult(name=name, error_code=Errors.TOPIC_AUTHORIZATION_FAILED, error_message="Authorization failed.")
        for name in refused
    ]
    return ([] if request.validate_only else records), answers
