"""Creating and deleting topics at the active controller (KIP-631): CreateTopics and
DeleteTopics as Kafka 4.4's ``ControllerApis`` checks them and ``ReplicationControlManager``
writes them.

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

CreatePartitions
    More partitions for existing topics, placed as new topics' are (from the next partition
    index on) or given, with the topic's replication factor; fewer or as many partitions answer
    INVALID_PARTITIONS, an unknown topic UNKNOWN_TOPIC_OR_PARTITION, more than 10,000 new
    partitions in one request POLICY_VIOLATION for every topic.

DeleteTopics
    Topics named or given by id (v6), each deleted with one RemoveTopicRecord; unknown names
    answer UNKNOWN_TOPIC_OR_PARTITION, unknown ids UNKNOWN_TOPIC_ID, and with
    ``delete.topic.enable=false`` the whole request fails with TOPIC_DELETION_DISABLED (v3+).

No I/O: randomness (placement, topic ids) comes from the caller.
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
from messages.generated.create_partitions_request import (
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from messages.generated.create_partitions_response import CreatePartitionsTopicResult
from messages.generated.create_topics_request import CreatableTopic, CreateTopicsRequest
from messages.generated.create_topics_response import CreatableTopicConfigs, CreatableTopicResult
from messages.generated.delete_topics_request import DeleteTopicsRequest
from messages.generated.delete_topics_response import DeletableTopicResult
from messages.generated.partition_record import PartitionRecord
from messages.generated.remove_topic_record import RemoveTopicRecord
from messages.generated.topic_record import TopicRecord
from server.controller.acls import CLUSTER, CLUSTER_NAME, TOPIC
from server.controller.authorizer import (
    ALTER,
    CREATE,
    DELETE,
    DESCRIBE,
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
from server.controller.partition_change import (
    partition_change_record_version as partition_record_version,
)
from server.controller.placement import PlacementSpec
from server.controller.placing import default_directory, has_uncordoned_dirs, place
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
    "MAX_PARTITIONS_PER_REQUEST",
    "MIN_INSYNC_REPLICAS",
    "TopicDefaults",
    "check_manual_replicas",
    "create_partitions",
    "create_topics",
    "default_directory",
    "delete_topics",
]


MAX_PARTITIONS_PER_REQUEST = 10_000
"""Partitions one CreateTopics may create (``ReplicationControlManager``'s bound)."""
MIN_INSYNC_REPLICAS = "min.insync.replicas"
_UNKNOWN_TOPIC = "This server does not host this topic-partition."
_UNKNOWN_TOPIC_ID = "This server does not host this topic ID."


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


def _is_active(cluster: ClusterControlManager, broker_id: int) -> bool:
    """Registered, unfenced and not in controlled shutdown (``ClusterControlManager.isActive``)."""
    registration = cluster.registrations.get(broker_id)
    return registration is not None and not registration.fenced and not registration.in_controlled_shutdown


def _partition_record(
    cluster: ClusterControlManager, topic_id: Uuid, index: int, replicas: list[int], isr: list[int], version: int
) -> Record:
    """A new partition (``buildPartitionRegistration``): led by the first in-sync replica, each
    replica in its broker's default directory, epochs 0."""
    directories = [default_directory(cluster, broker) for broker in replicas]
    record = PartitionRecord(
        partition_id=index,
        topic_id=topic_id,
        replicas=replicas,
        isr=isr,
        removing_replicas=[],
        adding_replicas=[],
        leader=isr[0],
        leader_recovery_state=0,
        leader_epoch=0,
        partition_epoch=0,
        directories=directories if version >= 1 else [],
    )
    return record, version


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
        parts[index] = (replicas, _manual_isr(replicas, replication_factor, index, cluster))
        replication_factor = len(replicas)
    if any(index not in parts for index in range(len(parts))):
        raise ApiError(Errors.INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence")
    return parts


def _manual_isr(replicas: list[int], replication_factor: int | None, index: int, cluster: ClusterControlManager) -> list[int]:
    """The ISR of a manually assigned partition ``index``: its replicas on active brokers,
    after ``validateManualPartitionAssignment``'s checks. Raises ApiError
    INVALID_REPLICA_ASSIGNMENT."""
    check_manual_replicas(replicas, replication_factor, cluster)
    isr = [broker for broker in replicas if _is_active(cluster, broker)]
    if not isr:
        raise ApiError(
            Errors.INVALID_REPLICA_ASSIGNMENT,
            f"All brokers specified in the manual partition assignment for partition {index} "
            "are fenced or in controlled shutdown.",
        )
    return isr


def check_manual_replicas(replicas: list[int], replication_factor: int | None, cluster: ClusterControlManager) -> None:
    """``validateManualPartitionAssignment``: a non-empty list of distinct registered brokers,
    each with a directory that is not cordoned, ``replication_factor`` long when one is given.
    Raises ApiError INVALID_REPLICA_ASSIGNMENT."""
    if not replicas:
        raise ApiError(Errors.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes an empty replica list.")
    previous: int | None = None
    for broker in sorted(replicas):
        registration = cluster.registrations.get(broker)
        if registration is None:
            raise ApiError(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {broker}, but no such broker is registered.",
            )
        if not has_uncordoned_dirs(registration):
            raise ApiError(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes broker {broker}, but all its log directories are cordoned.",
            )
        if broker == previous:
            raise ApiError(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes the broker {previous} more than once.",
            )
        previous = broker
    if replication_factor is not None and len(replicas) != replication_factor:
        raise ApiError(
            Errors.INVALID_REPLICA_ASSIGNMENT,
            f"The manual partition assignment includes a partition with {len(replicas)} replica(s), but this is not "
            f"consistent with previous partitions, which have {replication_factor} replica(s).",
        )


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
        isr = [broker for broker in replicas if _is_active(cluster, broker)]
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
            records.append(_partition_record(cluster, topic_id, index, replicas, isr, version))
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


def delete_topics(
    request: DeleteTopicsRequest, version: int, *, image: ReplicationControlManager, delete_enabled: bool = True,
    authorize: Authorize | None = None,
) -> tuple[list[Record], list[DeletableTopicResult]]:
    """DeleteTopics at the active controller (module docstring): one RemoveTopicRecord per
    deleted topic and one result per requested topic (Kafka shuffles them; these follow the
    request). Raises ApiError TOPIC_DELETION_DISABLED (INVALID_REQUEST before v3) when
    ``delete.topic.enable`` is false.

    With ``authorize`` (``ControllerApis.deleteTopics``): DELETE on the cluster allows every
    topic, else a topic needs DESCRIBE and DELETE on it; a name without DESCRIBE is refused
    whether or not the topic exists, and an id whose topic the principal may not describe is
    answered without the name (TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed.")."""
    everything = authorize is None or authorize(DELETE, CLUSTER, CLUSTER_NAME, False)

    def describable(name: str) -> bool:
        return everything or authorize is not None and authorize(DESCRIBE, TOPIC, name, True)

    def deletable(name: str) -> bool:
        return everything or authorize is not None and authorize(DELETE, TOPIC, name, True)

    refused = "Topic authorization failed."
    if not delete_enabled:
        if version < 3:
            raise ApiError(Errors.INVALID_REQUEST, "This version does not support topic deletion.")
        raise ApiError(Errors.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
    results: list[DeletableTopicResult] = []

    def answer(name: str | None, topic_id: Uuid, error: Errors = Errors.NONE, message: str | None = None) -> None:
        results.append(DeletableTopicResult(name=name, topic_id=topic_id, error_code=error, error_message=message))

    zero = Uuid()
    names: dict[str, int] = {}
    ids: dict[Uuid, int] = {}
    for name in request.topic_names or ():
        names[name] = names.get(name, 0) + 1
    for state in request.topics or ():
        if state.name is None:
            if state.topic_id == zero:
                answer(None, zero, Errors.INVALID_REQUEST, "Neither topic name nor id were specified.")
            else:
                ids[state.topic_id] = ids.get(state.topic_id, 0) + 1
        elif state.topic_id == zero:
            names[state.name] = names.get(state.name, 0) + 1
        else:
            answer(state.name, state.topic_id, Errors.INVALID_REQUEST, "You may not specify both topic name and topic id.")
    for name, count in names.items():
        if count > 1:
            answer(name, zero, Errors.INVALID_REQUEST, "Duplicate topic name.")
    duplicate_ids = {topic_id for topic_id, count in ids.items() if count > 1}
    for topic_id in ids:
        if topic_id in duplicate_ids:
            answer(None, topic_id, Errors.INVALID_REQUEST, "Duplicate topic id.")
    to_delete: dict[Uuid, str] = {}
    for topic_id, count in ids.items():
        if count > 1:
            continue
        topic = image.topics.get(topic_id)
        if topic is None:
            answer(None, topic_id, Errors.UNKNOWN_TOPIC_ID, _UNKNOWN_TOPIC_ID)
        elif not deletable(topic.name):
            answer(topic.name if describable(topic.name) else None, topic_id, Errors.TOPIC_AUTHORIZATION_FAILED, refused)
        else:
            to_delete[topic_id] = topic.name
    for name, count in names.items():
        if count > 1:
            continue
        found = image.topic_ids.get(name)
        if not describable(name):
            answer(name, zero, Errors.TOPIC_AUTHORIZATION_FAILED, refused)
        elif found is None:
            answer(name, zero, Errors.UNKNOWN_TOPIC_OR_PARTITION, _UNKNOWN_TOPIC)
        elif not deletable(name):
            answer(name, zero, Errors.TOPIC_AUTHORIZATION_FAILED, refused)
        elif found in duplicate_ids or found in to_delete:
            duplicate_ids.add(found)
            to_delete.pop(found, None)
            answer(name, found, Errors.INVALID_REQUEST, "The provided topic name maps to an ID that was already supplied.")
        else:
            to_delete[found] = name
    records: list[Record] = []
    for topic_id, name in to_delete.items():
        records.append((RemoveTopicRecord(topic_id=topic_id), 0))
        answer(name, topic_id)
    return records, results


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
            _manual_isr(replicas, replication_factor, start + i, cluster)
            placed.append(replicas)
    else:
        placed = place(plugins, PlacementSpec(start, additional, replication_factor), cluster, rng)
    records = []
    for i, replicas in enumerate(placed):
        isr = [broker for broker in replicas if _is_active(cluster, broker)]
        if not isr:
            raise ApiError(
                Errors.INVALID_REPLICATION_FACTOR,
                f"Unable to replicate the partition {replication_factor} time(s): All brokers are currently fenced "
                "or in controlled shutdown.",
            )
        records.append(_partition_record(cluster, topic_id, start + i, replicas, isr, version))
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
