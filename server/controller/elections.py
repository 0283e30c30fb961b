"""Leader elections an operator or the controller itself asks for (Kafka 4.4's
``ReplicationControlManager.electLeaders``, ``electLeader`` and ``maybeBalancePartitionLeaders``;
KIP-460):

* :func:`elect_leaders`: ElectLeaders (43, v0-2). PREFERRED moves leadership to each partition's
  first replica when it is an acceptable leader in the ISR; UNCLEAN gives a partition without a
  leader any acceptable replica. Per partition: NONE (a change record is written),
  ELECTION_NOT_NEEDED (already led by its preferred replica, or, for UNCLEAN, led at all),
  PREFERRED_LEADER_NOT_AVAILABLE / ELIGIBLE_LEADERS_NOT_AVAILABLE (no change possible) or
  UNKNOWN_TOPIC_OR_PARTITION. A request naming no partitions covers every partition, and then
  leaves out the ELECTION_NOT_NEEDED ones.
* :func:`balance_partition_leaders`: ``auto.leader.rebalance.enable``'s periodic task: a
  PREFERRED election for partitions led by another than their first replica, at most
  ``max_elections`` records at a time. A pass over the imbalanced partitions (a
  :class:`BalanceWalk`) goes a slice of :data:`MAX_EXAMINED_PER_SLICE` partitions at a time:
  Kafka walks them all in one event of its controller thread, which at 10^6 partitions after a
  zonal outage (333,000 imbalanced partitions, none of whose preferred replicas may lead)
  took kwire's event loop 1-4 s, a pause the followers' fetch timeouts do not allow.

Acceptable leaders are ``LeaderAcceptor``'s: registered, unfenced, not shutting down, with the
replica's directory online (``server.controller.alter_partition.leader_acceptable``).
"""

from __future__ import annotations

from dataclasses import dataclass

from kwire.errors import Errors
from kwire.uuid import Uuid
from messages.generated.elect_leaders_request import ElectLeadersRequest
from messages.generated.elect_leaders_response import (
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)
from messages.runtime import Message
from server.controller.cluster import ClusterControlManager
from server.controller.errors import ApiError
from server.controller.image import ReplicationControlManager, imbalanced
from server.controller.partition_change import Election
from server.controller.partition_effects import (
    PartitionChanges,
    TopicConfigLayers,
    leader_acceptable,
)
from server.controller.result import Record

__all__ = [
    "MAX_EXAMINED_PER_SLICE",
    "PREFERRED",
    "UNCLEAN",
    "BalanceWalk",
    "balance_partition_leaders",
    "elect_leaders",
    "imbalanced_partitions",
]

MAX_EXAMINED_PER_SLICE = 20_000
"""Imbalanced partitions one slice of a rebalance pass looks at (about 40 ms when their
preferred replicas cannot lead, each passed over in about 2 us)."""

PREFERRED, UNCLEAN = 0, 1
"""``ElectionType`` ids."""

_MESSAGES = {
    Errors.ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
    Errors.PREFERRED_LEADER_NOT_AVAILABLE: "The preferred leader was not available.",
    Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE: "Eligible topic partition leaders are not available.",
}
"""What a partition's result says with its error (the default message of Kafka's exception for
the code, which ``new ApiError(error)`` carries)."""


def _error(code: Errors) -> ApiError:
    return ApiError(code, _MESSAGES[code])


class _Elector(PartitionChanges):
    def elected(self, topic_id: Uuid, index: int, election: Election) -> Message | None:
        """The record of an ``election`` for one partition, None when nothing changes."""
        return self.change(topic_id, index, election=election).build()

    def keeps_its_leader(self, topic_id: Uuid, index: int) -> bool:
        """A PREFERRED election of this partition would certainly change nothing: told without
        building the change, which costs about ten times more. A sufficient condition, taken
        step by step from ``server.controller.partition_change``: no reassignment to complete;
        its leader stays (in the ISR and acceptable, where its preferred replica is not); and
        no ELR or last known ELR, which with the ISR unchanged keeps the ELR targets empty
        whatever min.insync.replicas is. Every partition it does not hold for goes through
        the builder."""
        partition = self.image.topics[topic_id].partitions[index]
        if partition.reassigning or partition.elr or partition.last_known_elr:
            return False
        leader, isr = partition.leader, partition.isr
        if leader not in isr:  # -1 is in no ISR
            return False
        preferred = partition.replicas[0]
        if preferred in isr and leader_acceptable(self.cluster, partition, preferred):
            return False
        return leader_acceptable(self.cluster, partition, leader)

    def elect(self, topic: str, index: int, kind: int, records: list[Record]) -> ApiError:
        """``electLeader``: the outcome for one partition; its record, if any, appended."""
        topic_id = self.image.topic_ids.get(topic)
        if topic_id is None:
            return ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic}")
        partition = self.image.topics[topic_id].partitions.get(index)
        if partition is None:
            return ApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic}-{index}")
        preferred = partition.leader == partition.replicas[0]
        if (kind == PREFERRED and preferred) or (kind == UNCLEAN and partition.leader != -1):
            return _error(Errors.ELECTION_NOT_NEEDED)
        record = self.elected(topic_id, index, Election.UNCLEAN if kind == UNCLEAN else Election.PREFERRED)
        if record is None:
            return _error(
                Errors.PREFERRED_LEADER_NOT_AVAILABLE if kind == PREFERRED else Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE
            )
        records.append((record, self.record_version))
        return ApiError(Errors.NONE)


def elect_leaders(
    request: ElectLeadersRequest, version: int, *, image: ReplicationControlManager, cluster: ClusterControlManager,
    configs: TopicConfigLayers, metadata_version: int, elr_enabled: bool,
) -> tuple[list[Record], ElectLeadersResponse]:
    """ElectLeaders at ``version`` (v0 is always PREFERRED): the records and the answer.
    Raises ApiError INVALID_REQUEST for an unknown election type."""
    kind = request.election_type if version >= 1 else PREFERRED
    if kind not in (PREFERRED, UNCLEAN):
        raise ApiError(Errors.INVALID_REQUEST, f"Unknown election type {kind}")
    elector = _Elector(image, cluster, configs, metadata_version=metadata_version, elr_enabled=elr_enabled)
    records: list[Record] = []
    response = ElectLeadersResponse(error_code=Errors.NONE)
    if request.topic_partitions is None:
        for name, topic_id in image.topic_ids.items():
            result = ReplicaElectionResult(topic=name)
            response.replica_election_results.append(result)
            for index in image.topics[topic_id].partitions:
                error = elector.elect(name, index, kind, records)
                if error.error != Errors.ELECTION_NOT_NEEDED:
                    result.partition_result.append(_result(index, error))
        return records, response
    for wanted in request.topic_partitions:
        result = ReplicaElectionResult(topic=wanted.topic)
        response.replica_election_results.append(result)
        for index in wanted.partitions:
            result.partition_result.append(_result(index, elector.elect(wanted.topic, index, kind, records)))
    return records, response


def _result(index: int, error: ApiError) -> PartitionResult:
    return PartitionResult(partition_id=index, error_code=error.error, error_message=error.message)


def elect_unclean_leaders(
    *, image: ReplicationControlManager, cluster: ClusterControlManager, configs: TopicConfigLayers, metadata_version: int,
    elr_enabled: bool, max_elections: int,
) -> list[Record]:
    """``maybeElectUncleanLeaders``: an UNCLEAN election for each partition without a leader
    whose topic has ``unclean.leader.election.enable``, at most ``max_elections`` records (the
    task runs again at once when it wrote that many). A partition with no live replica stays
    leaderless."""
    elector = _Elector(image, cluster, configs, metadata_version=metadata_version, elr_enabled=elr_enabled)
    records: list[Record] = []
    for topic_id, index in image.partitions_without_leader():
        if len(records) >= max_elections:
            break
        name = image.topics[topic_id].name
        if configs.election(name) is Election.UNCLEAN:
            elector.elect(name, index, UNCLEAN, records)
    return records


def imbalanced_partitions(image: ReplicationControlManager) -> list[tuple[Uuid, int]]:
    """(topic id, partition) of the partitions not led by their first replica
    (``imbalancedPartitions``), in topic creation order, partitions ascending."""
    return image.imbalanced_partitions()


@dataclass(slots=True)
class BalanceWalk:
    """One pass of the rebalance over the partitions imbalanced when it began, in
    :func:`imbalanced_partitions`' order: ``at`` is the next to look at. A partition that
    became imbalanced since waits for the next pass; one that is gone or balanced again is
    passed over."""

    partitions: list[tuple[Uuid, int]]
    at: int = 0

    @property
    def done(self) -> bool:
        """Every partition of the pass was looked at."""
        return self.at >= len(self.partitions)


def balance_partition_leaders(
    *, image: ReplicationControlManager, cluster: ClusterControlManager, configs: TopicConfigLayers, metadata_version: int,
    elr_enabled: bool, max_elections: int, walk: BalanceWalk | None = None,
    max_examined: int = MAX_EXAMINED_PER_SLICE,
) -> list[Record]:
    """``maybeBalancePartitionLeaders``: PREFERRED elections for the imbalanced partitions, at
    most ``max_elections`` records, looking at most ``max_examined`` partitions of ``walk``
    from where it stands (a new pass over the image when None) and moving it on; the task runs
    again at once while the walk is not done."""
    elector = _Elector(image, cluster, configs, metadata_version=metadata_version, elr_enabled=elr_enabled)
    if walk is None:
        walk = BalanceWalk(imbalanced_partitions(image))
    records: list[Record] = []
    partitions, topics = walk.partitions, image.topics
    end = min(len(partitions), walk.at + max_examined)
    while walk.at < end and len(records) < max_elections:
        topic_id, index = partitions[walk.at]
        walk.at += 1
        topic = topics.get(topic_id)
        partition = None if topic is None else topic.partitions.get(index)
        if partition is None or not imbalanced(partition):
            continue  # gone, or balanced again, since the pass began
        if elector.keeps_its_leader(topic_id, index):
            continue  # its preferred replica cannot lead: the common case after an outage
        record = elector.elected(topic_id, index, Election.PREFERRED)
        if record is not None:
            records.append((record, elector.record_version))
    return records
