"""Partition reassignments (KIP-455, KIP-860), as Kafka 4.4's ``ReplicationControlManager``,
``PartitionReassignmentReplicas`` and ``PartitionReassignmentRevert`` carry them out.

A reassignment moves a partition from its replicas to a target list in up to two
PartitionChangeRecords:

1. :func:`alter_partition_reassignments` writes the first: the replicas become the target
   followed by the replicas it drops (ascending), AddingReplicas the target's new brokers and
   RemovingReplicas the dropped ones (both ascending). A target that only reorders the replicas,
   or whose new brokers are already in sync, completes at once instead.
2. The partition leader adds the new replicas to the ISR with AlterPartition; the change that
   puts the last of them in sync (``server.controller.partition_change``, step 1) also drops
   the removing replicas and clears both lists. A leader that is removed loses leadership
   in the same record.

A target given while another move is in progress starts from the replicas as they are (old
target and removing replicas); a list it leaves empty keeps its old value, so a move that adds
nothing keeps the old AddingReplicas, even where they are now being removed (Kafka 4.4 writes
the same record; ``compat/test_topic_rpcs.py`` compares it).

Replicas = null cancels: the adding replicas leave the replicas and the ISR, the removing ones
stay; when no in-sync replica would be left the first remaining replica becomes the ISR, which
is allowed only with ``unclean.leader.election.enable`` on the topic.

Per partition errors, in Kafka's order: UNKNOWN_TOPIC_OR_PARTITION (no such topic or
partition); for a cancel NO_REASSIGNMENT_IN_PROGRESS, or INVALID_REPLICA_ASSIGNMENT when the
revert needs an unclean election that is off; for a target INVALID_REPLICA_ASSIGNMENT (empty,
an unregistered broker, a broker whose directories are all cordoned, a broker named twice),
then, with AllowReplicationFactorChange false (v1), INVALID_REPLICATION_FACTOR for a target of
another size than the partition's replication factor (counted without the removing replicas
while a reassignment is in progress). All the records of one request are written together.

:func:`list_partition_reassignments` answers from the image: every partition with adding or
removing replicas, for the named partitions of the named topics (unknown ones left out), or
all of them. No I/O.
"""

from __future__ import annotations

from functools import partial

from kwire.errors import Errors
from kwire.uuid import Uuid
from messages.generated.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
)
from messages.generated.alter_partition_reassignments_response import (
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from messages.generated.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
)
from messages.generated.list_partition_reassignments_response import (
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)
from messages.runtime import Message
from server.controller.cluster import ClusterControlManager
from server.controller.errors import ApiError
from server.controller.image import PartitionRegistration, ReplicationControlManager
from server.controller.new_partitions import check_manual_replicas
from server.controller.partition_change import Election, PartitionChange
from server.controller.partition_effects import (
    PartitionChanges,
    TopicConfigLayers,
)
from server.controller.placing import default_directory
from server.controller.result import Record

__all__ = [
    "alter_partition_reassignments",
    "list_partition_reassignments",
    "reassignment_replicas",
    "revert_reassignment",
]



def reassignment_replicas(current: list[int], target: list[int]) -> tuple[list[int], list[int], list[int]]:
    """(replicas, adding, removing) of a move from ``current`` to ``target``
    (``PartitionReassignmentReplicas``): the target followed by the dropped brokers, the new
    brokers, the dropped brokers; the last two ascending."""
    removing = sorted(set(current) - set(target))
    adding = sorted(set(target) - set(current))
    return [*target, *removing], adding, removing


def revert_reassignment(partition: PartitionRegistration) -> tuple[list[int], list[int], bool]:
    """(replicas, ISR, unclean) after cancelling ``partition``'s reassignment
    (``PartitionReassignmentRevert``): the adding replicas leave both lists; when that empties
    the ISR, the first remaining replica becomes it and the revert is unclean. Raises ApiError
    INVALID_REPLICA_ASSIGNMENT when every replica was being added."""
    adding = set(partition.adding_replicas)
    replicas = [r for r in partition.replicas if r not in adding]
    isr = [r for r in partition.isr if r not in adding]
    if isr:
        return replicas, isr, False
    if not replicas:
        raise ApiError(Errors.INVALID_REPLICA_ASSIGNMENT, "Invalid replica assignment: addingReplicas contains all replicas.")
    return replicas, [replicas[0]], True


class _Reassigner(PartitionChanges):
    def _change(self, topic_id: Uuid, index: int) -> PartitionChange:
        """A change whose new replicas go to their brokers' default directories."""
        return self.change(topic_id, index, default_directory=partial(default_directory, self.cluster))

    def alter(self, name: str, target: ReassignablePartition, allow_rf_change: bool) -> Message | None:
        """``alterPartitionReassignment``: the record for one partition (None: no change).
        Raises ApiError."""
        topic_id = self.image.topic_ids.get(name)
        if topic_id is None:
            raise ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {name}.")
        partition = self.image.topics[topic_id].partitions.get(target.partition_index)
        if partition is None:
            raise ApiError(
                Errors.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find partition {name}:{target.partition_index}."
            )
        if target.replicas is None:
            return self._cancel(name, topic_id, target.partition_index, partition)
        return self._reassign(topic_id, target.partition_index, partition, list(target.replicas), allow_rf_change)

    def _cancel(self, name: str, topic_id: Uuid, index: int, partition: PartitionRegistration) -> Message | None:
        """``cancelPartitionReassignment``."""
        if not partition.reassigning:
            raise ApiError(Errors.NO_REASSIGNMENT_IN_PROGRESS)
        replicas, isr, unclean = revert_reassignment(partition)
        election = self.configs.election(name)
        if unclean and election is not Election.UNCLEAN:
            raise ApiError(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"Unable to revert partition assignment for {name}:{index} because it would require an unclean "
                "leader election.",
            )
        change = self._change(topic_id, index)
        change.election = election
        change.target_isr, change.target_replicas = isr, replicas
        change.target_removing, change.target_adding = [], []
        return change.build()

    def _reassign(
        self, topic_id: Uuid, index: int, partition: PartitionRegistration, target: list[int], allow_rf_change: bool
    ) -> Message | None:
        """``changePartitionReassignment``."""
        check_manual_replicas(target, None, self.cluster)
        if not allow_rf_change:
            _check_replication_factor_unchanged(partition, target)
        replicas, adding, removing = reassignment_replicas(list(partition.replicas), target)
        change = self._change(topic_id, index)
        if replicas != list(partition.replicas):
            change.target_replicas = replicas
        if removing:
            change.target_removing = removing
        if adding:
            change.target_adding = adding
        return change.build()


def _check_replication_factor_unchanged(partition: PartitionRegistration, target: list[int]) -> None:
    """``validatePartitionReplicationFactorUnchanged``: the target has as many replicas as the
    partition will have (its replicas and adding ones, less the removing ones, while a
    reassignment is in progress). Raises ApiError INVALID_REPLICATION_FACTOR."""
    if partition.reassigning:
        size = len((set(partition.replicas) | set(partition.adding_replicas)) - set(partition.removing_replicas))
    else:
        size = len(partition.replicas)
    if size != len(target):
        raise ApiError(
            Errors.INVALID_REPLICATION_FACTOR, f"The replication factor is changed from {size} to {len(target)}"
        )


def alter_partition_reassignments(
    request: AlterPartitionReassignmentsRequest, version: int, *, image: ReplicationControlManager, cluster: ClusterControlManager,
    configs: TopicConfigLayers, metadata_version: int, elr_enabled: bool,
) -> tuple[list[Record], AlterPartitionReassignmentsResponse]:
    """AlterPartitionReassignments (45, v0-1) at ``version``: the records (written together)
    and the answer, one result per requested partition (module docstring). Each partition is
    judged against the image as it was before the request. A request naming no topics gets
    the response's default fields (``QuorumController.alterPartitionReassignments``)."""
    if not request.topics:  # answered without a write, with the message's defaults
        return [], AlterPartitionReassignmentsResponse()
    allow_rf_change = request.allow_replication_factor_change if version >= 1 else True
    reassigner = _Reassigner(image, cluster, configs, metadata_version=metadata_version, elr_enabled=elr_enabled)
    records: list[Record] = []
    response = AlterPartitionReassignmentsResponse(error_message=None, allow_replication_factor_change=allow_rf_change)
    for topic in request.topics:
        answered = ReassignableTopicResponse(name=topic.name)
        response.responses.append(answered)
        for target in topic.partitions:
            result = ReassignablePartitionResponse(partition_index=target.partition_index, error_message=None)
            try:
                record = reassigner.alter(topic.name, target, allow_rf_change)
            except ApiError as exc:
                result.error_code, result.error_message = exc.error, exc.message
            else:
                if record is not None:
                    records.append((record, reassigner.record_version))
            answered.partitions.append(result)
    return records, response


def list_partition_reassignments(
    request: ListPartitionReassignmentsRequest, *, image: ReplicationControlManager
) -> ListPartitionReassignmentsResponse:
    """ListPartitionReassignments (46, v0) from the image (module docstring): topics in the
    order their first partition started reassigning, or in request order; partitions in the
    order they started, or in request order."""
    response = ListPartitionReassignmentsResponse(error_message=None)
    if request.topics is None:
        wanted = [(topic_id, list(indexes)) for topic_id, indexes in image.reassigning.items()]
    else:
        wanted = [
            (image.topic_ids[topic.name], list(topic.partition_indexes))
            for topic in request.topics
            if topic.name in image.topic_ids
        ]
    for topic_id, indexes in wanted:
        topic = image.topics[topic_id]
        ongoing = OngoingTopicReassignment(name=topic.name)
        for index in indexes:
            partition = topic.partitions.get(index)
            if partition is not None and partition.reassigning:
                ongoing.partitions.append(
                    OngoingPartitionReassignment(
                        partition_index=index,
                        replicas=list(partition.replicas),
                        adding_replicas=list(partition.adding_replicas),
                        removing_replicas=list(partition.removing_replicas),
                    )
                )
        if ongoing.partitions:
            response.topics.append(ongoing)
    return response
