"""BeginQuorumEpoch (api key 53): a new leader announces its epoch to the voters.

Versions handled: 0-1 (v1 adds VoterId, VoterDirectoryId, LeaderEndpoints and the response's
NodeEndpoints). Mirrors ``KafkaRaftClient.handleBeginQuorumEpochRequest`` /
``handleBeginQuorumEpochResponse``. The leader sends it to every other voter when elected and
again every ``fetch.timeout.ms / 2`` (``LeaderState``'s BeginQuorumEpoch timer).

Request steps, each with the error it returns:

1. ClusterId present and different -> top-level INCONSISTENT_CLUSTER_ID.
2. Not exactly one topic ``__cluster_metadata`` with one partition 0 -> top-level
   INVALID_REQUEST.
3. LeaderEpoch below the local epoch -> partition FENCED_LEADER_EPOCH; LeaderId < 0 ->
   INVALID_REQUEST; VoterId / VoterDirectoryId naming another replica -> INVALID_VOTER_KEY.
4. ``maybe_transition(LeaderId, LeaderEpoch)``: become Follower of that leader (a durable
   transition: the Outbox persists it before this response leaves). A second leader in the
   same epoch is a safety violation and raises.
5. Response: NONE, the leader and epoch now known, and (v1+) the leader's endpoint.

Response handling: a later epoch -> ``maybe_transition``; an error -> per-destination backoff
(the periodic resend retries).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kwire.errors import Errors
from kwire.uuid import ZERO_UUID
from messages.generated.begin_quorum_epoch_request import (
    BeginQuorumEpochRequest,
    LeaderEndpoint,
)
from messages.generated.begin_quorum_epoch_request import PartitionData as BeginPartition
from messages.generated.begin_quorum_epoch_request import TopicData as BeginTopic
from messages.generated.begin_quorum_epoch_response import (
    BeginQuorumEpochResponse,
    NodeEndpoint,
)
from messages.generated.begin_quorum_epoch_response import PartitionData as BeginResponsePartition
from messages.generated.begin_quorum_epoch_response import TopicData as BeginResponseTopic
from server.raft.common import (
    leader_endpoint,
    leader_id_or_minus_one,
    single_partition,
    validate_voter_only,
)
from server.raft.types import METADATA_PARTITION, METADATA_TOPIC_NAME

if TYPE_CHECKING:
    from server.raft.context import RaftContext
    from server.raft.events import RequestReceived, ResponseReceived

VERSIONS = (0, 1)


def build_request(ctx: RaftContext, voter_id: int) -> BeginQuorumEpochRequest:
    """The leader's BeginQuorumEpoch for voter ``voter_id`` in the current epoch, with that
    voter's directory id (zero if unknown) and the leader's endpoints
    (``KafkaRaftClient.buildBeginQuorumEpochRequest``)."""
    voter = ctx.control.voters.get(voter_id)
    return BeginQuorumEpochRequest(
        cluster_id=ctx.identity.cluster_id,
        voter_id=voter_id,
        topics=[
            BeginTopic(
                topic_name=METADATA_TOPIC_NAME,
                partitions=[
                    BeginPartition(
                        partition_index=METADATA_PARTITION,
                        voter_directory_id=voter.key.directory_id_or_zero
                        if voter is not None
                        else ZERO_UUID,
                        leader_id=ctx.identity.node_id,
                        leader_epoch=ctx.quorum.epoch,
                    )
                ],
            )
        ],
        leader_endpoints=[
            LeaderEndpoint(name=e.name, host=e.host, port=e.port) for e in ctx.identity.endpoints
        ],
    )


def response(ctx: RaftContext, listener: str, version: int, error: Errors) -> BeginQuorumEpochResponse:
    """A response with ``error`` at the partition level, the known leader (or -1), the local
    epoch and, at v1+, the leader's endpoint on ``listener`` when known."""
    endpoints: list[NodeEndpoint] = []
    found = leader_endpoint(ctx, listener)
    if version >= 1 and found is not None:
        endpoints.append(NodeEndpoint(node_id=found[0], host=found[1], port=found[2]))
    return BeginQuorumEpochResponse(
        error_code=Errors.NONE,
        topics=[
            BeginResponseTopic(
                topic_name=METADATA_TOPIC_NAME,
                partitions=[
                    BeginResponsePartition(
                        partition_index=METADATA_PARTITION,
                        error_code=error,
                        leader_id=leader_id_or_minus_one(ctx),
                        leader_epoch=ctx.quorum.epoch,
                    )
                ],
            )
        ],
        node_endpoints=endpoints,
    )


def handle_request(ctx: RaftContext, now_ms: int, event: RequestReceived) -> BeginQuorumEpochResponse:
    """Request steps 1-5 above (``handleBeginQuorumEpochRequest``); returns the response, with a
    top-level error for steps 1-2."""
    request: BeginQuorumEpochRequest = event.request
    if not ctx.identity.validate_cluster_id(request.cluster_id):
        return BeginQuorumEpochResponse(error_code=Errors.INCONSISTENT_CLUSTER_ID)
    partition = single_partition(request.topics, "topic_name", "partition_index")
    if partition is None:
        return BeginQuorumEpochResponse(error_code=Errors.INVALID_REQUEST)
    version = event.api_version
    error = validate_voter_only(
        ctx,
        partition.leader_epoch,
        partition.leader_id,
        request.voter_id if version >= 1 else None,
        partition.voter_directory_id if version >= 1 else None,
    )
    if error != Errors.NONE:
        return response(ctx, event.listener, version, error)
    for endpoint in request.leader_endpoints:
        if endpoint.name == ctx.identity.default_listener:
            ctx.requests.learn_endpoint(partition.leader_id, endpoint.host, endpoint.port)
    ctx.quorum.maybe_transition(partition.leader_id, partition.leader_epoch, now_ms)
    return response(ctx, event.listener, version, Errors.NONE)


def handle_response(ctx: RaftContext, now_ms: int, event: ResponseReceived) -> None:
    """Response handling above (``handleBeginQuorumEpochResponse``): a later epoch or leader
    moves this replica on, an error backs off that voter. Returns nothing."""
    source_id, message = event.source_id, event.response
    if message.error_code != Errors.NONE:
        ctx.requests.backoff(source_id, now_ms)
        return
    partition = single_partition(message.topics, "topic_name", "partition_index")
    if partition is None:
        ctx.requests.backoff(source_id, now_ms)
        return
    leader = partition.leader_id if partition.leader_id >= 0 else None
    if ctx.quorum.maybe_transition(leader, partition.leader_epoch, now_ms):
        return
    if partition.error_code != Errors.NONE:
        ctx.requests.backoff(source_id, now_ms)
