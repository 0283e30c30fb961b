"""Checks shared by the RPC handlers (``RaftUtil`` / ``KafkaRaftClient`` validation helpers)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kwire.errors import Errors
from kwire.uuid import ZERO_UUID, Uuid
from server.raft.types import METADATA_PARTITION, METADATA_TOPIC_NAME

if TYPE_CHECKING:
    from server.raft.context import RaftContext


def single_partition(topics: list[Any], name_attr: str, partition_attr: str) -> Any | None:
    """The one partition of ``__cluster_metadata``-0 in a Vote/BQE/EQE/DescribeQuorum request,
    or None when the request holds anything else (``RaftUtil.hasValidTopicPartition``)."""
    if len(topics) != 1:
        return None
    topic = topics[0]
    if getattr(topic, name_attr) != METADATA_TOPIC_NAME or len(topic.partitions) != 1:
        return None
    partition = topic.partitions[0]
    if getattr(partition, partition_attr) != METADATA_PARTITION:
        return None
    return partition


def validate_voter_only(
    ctx: RaftContext,
    request_epoch: int,
    remote_id: int,
    voter_id: int | None,
    voter_directory_id: Uuid | None,
) -> Errors:
    """``KafkaRaftClient.validateVoterOnlyRequest``:

    1. request epoch below the local epoch -> FENCED_LEADER_EPOCH;
    2. a negative remote replica id -> INVALID_REQUEST;
    3. the request names a receiver (VoterId / VoterDirectoryId, v1+) that is not this replica
       -> INVALID_VOTER_KEY.
    """
    if request_epoch < ctx.quorum.epoch:
        return Errors.FENCED_LEADER_EPOCH
    if remote_id < 0:
        return Errors.INVALID_REQUEST
    if voter_id is not None and voter_id >= 0 and voter_id != ctx.identity.node_id:
        return Errors.INVALID_VOTER_KEY
    if (
        voter_directory_id is not None
        and voter_directory_id != ZERO_UUID
        and voter_directory_id != ctx.identity.directory_id
    ):
        return Errors.INVALID_VOTER_KEY
    return Errors.NONE


def validate_leader_only(ctx: RaftContext, request_epoch: int) -> Errors:
    """``KafkaRaftClient.validateLeaderOnlyRequest``: FENCED_LEADER_EPOCH for an older epoch,
    UNKNOWN_LEADER_EPOCH for a newer one, NOT_LEADER_OR_FOLLOWER when not the leader."""
    from server.raft.roles import Leader

    if request_epoch < ctx.quorum.epoch:
        return Errors.FENCED_LEADER_EPOCH
    if request_epoch > ctx.quorum.epoch:
        return Errors.UNKNOWN_LEADER_EPOCH
    if not isinstance(ctx.quorum.state, Leader):
        return Errors.NOT_LEADER_OR_FOLLOWER
    return Errors.NONE


def leader_id_or_minus_one(ctx: RaftContext) -> int:
    """The leader known in the current epoch, or -1: the LeaderId of Vote, BeginQuorumEpoch and
    EndQuorumEpoch responses."""
    leader = ctx.quorum.state.leader_id
    return -1 if leader is None else leader


def leader_endpoint(ctx: RaftContext, listener: str) -> tuple[int, str, int] | None:
    """The known leader's endpoint on ``listener``, for NodeEndpoints in responses: from the
    voter set, else (a leader not in this node's voter set, e.g. an observer's before it read
    the VotersRecord) as a response or request named it, as Kafka's ``FollowerState`` keeps
    the leader's endpoints. A stock node that hears of a leader outside its voter set without
    an endpoint stops (``KafkaRaftClient.transitionToFollower``)."""
    leader = ctx.quorum.state.leader_id
    if leader is None:
        return None
    node = ctx.control.voters.get(leader)
    if node is not None:
        endpoint = node.endpoint(listener)
    else:
        endpoint = ctx.requests.learned_endpoint(leader)
        if endpoint is not None and endpoint.name != listener:
            endpoint = None
    if endpoint is None:
        return None
    return (leader, endpoint.host, endpoint.port)


def is_diverging(epoch: int, end_offset: int) -> bool:
    """Whether a Fetch response's DivergingEpoch is set: its epoch or end offset is not the
    default -1 (``FetchResponse.isDivergingEpoch`` looks at the epoch only)."""
    return epoch >= 0 or end_offset >= 0
