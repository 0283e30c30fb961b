"""What CreateTopics (``server.controller.topics``) and CreatePartitions
(``server.controller.partition_creation``) share, as Kafka's ``ReplicationControlManager``
does: the bound on partitions per request, the checks of a manually assigned partition
(``validateManualPartitionAssignment``, also for KIP-455 reassignments) and a new partition's
PartitionRecord (``buildPartitionRegistration``).
"""

from __future__ import annotations

from kwire.errors import Errors
from kwire.uuid import Uuid
from messages.generated.partition_record import PartitionRecord
from server.controller.cluster import ClusterControlManager
from server.controller.errors import ApiError
from server.controller.placing import default_directory, has_uncordoned_dirs
from server.controller.result import Record

__all__ = [
    "MAX_PARTITIONS_PER_REQUEST",
    "check_manual_replicas",
    "is_active",
    "manual_isr",
    "partition_record",
]


MAX_PARTITIONS_PER_REQUEST = 10_000
"""Partitions one CreateTopics may create (``ReplicationControlManager``'s bound)."""


def is_active(cluster: ClusterControlManager, broker_id: int) -> bool:
    """Registered, unfenced and not in controlled shutdown (``ClusterControlManager.isActive``)."""
    registration = cluster.registrations.get(broker_id)
    return registration is not None and not registration.fenced and not registration.in_controlled_shutdown


def partition_record(
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


def manual_isr(replicas: list[int], replication_factor: int | None, index: int, cluster: ClusterControlManager) -> list[int]:
    """The ISR of a manually assigned partition ``index``: its replicas on active brokers,
    after ``validateManualPartitionAssignment``'s checks. Raises ApiError
    INVALID_REPLICA_ASSIGNMENT."""
    check_manual_replicas(replicas, replication_factor, cluster)
    isr = [broker for broker in replicas if is_active(cluster, broker)]
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
