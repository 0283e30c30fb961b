"""EndQuorumEpoch (api key 54): a resigning leader asks the voters to elect a successor.

Versions handled: 0-1 (v0 carries PreferredSuccessors ids, v1 PreferredCandidates replica keys
and LeaderEndpoints; the response gains NodeEndpoints). Mirrors
``KafkaRaftClient.handleEndQuorumEpochRequest`` / ``handleEndQuorumEpochResponse``. Sent while
Resigned to every voter that has not acknowledged it, preferred candidates ordered by
descending fetch offset (``LeaderState.nonLeaderVotersByDescendingFetchOffset``).

Request steps, each with the error it returns:

1. ClusterId present and different -> top-level INCONSISTENT_CLUSTER_ID.
2. Not exactly one topic ``__cluster_metadata`` with one partition 0 -> top-level
   INVALID_REQUEST.
3. LeaderEpoch below the local epoch -> partition FENCED_LEADER_EPOCH; LeaderId < 0 ->
   INVALID_REQUEST.
4. ``maybe_transition(LeaderId, LeaderEpoch)`` (a replica that missed the epoch learns it).
5. If this replica follows that leader in that epoch, its fetch timer is cut to the election
   backoff for its position among the preferred candidates: 0 for the first, else
   ``min(backoff.max, (backoff.max >> (n - 1)) << (position - 1))``; not listed -> the full
   ``election.backoff.max.ms`` (``KafkaRaftClient.strictExponentialElectionBackoffMs``); the
   follower will grant pre-votes again since its leader is gone.
6. Response: NONE with the leader and epoch known.

Response handling: NONE in the same epoch -> that voter has acknowledged and is not asked
again; a later epoch -> ``maybe_transition``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kwire.errors import Errors
from messages.generated.end_quorum_epoch_request import (
    EndQuorumEpochRequest,
    LeaderEndpoint,
    ReplicaInfo,
)
from messages.generated.end_quorum_epoch_request import PartitionData as EndPartition
from messages.generated.end_quorum_epoch_request import TopicData as EndTopic
from messages.generated.end_quorum_epoch_response import EndQuorumEpochResponse, NodeEndpoint
from messages.generated.end_quorum_epoch_response import PartitionData as EndResponsePartition
from messages.generated.end_quorum_epoch_response import TopicData as EndResponseTopic
from server.raft.common import (
    leader_endpoint,
    leader_id_or_minus_one,
    single_partition,
    validate_voter_only,
)
from server.raft.roles import Follower, Resigned
from server.raft.types import METADATA_PARTITION, METADATA_TOPIC_NAME

if TYPE_CHECKING:
    from server.raft.context import RaftContext
    from server.raft.events import RequestReceived, ResponseReceived

VERSIONS = (0, 1)


def build_request(ctx: RaftContext, state: Resigned) -> EndQuorumEpochRequest:
    """The resigned leader's EndQuorumEpoch for its epoch: preferred successors by descending end
    offset (ids for v0, replica keys for v1) and its endpoints
    (``KafkaRaftClient.buildEndQuorumEpochRequest``)."""
    successors = state.preferred_successors
    return EndQuorumEpochRequest(
        cluster_id=ctx.identity.cluster_id,
        topics=[
            EndTopic(
                topic_name=METADATA_TOPIC_NAME,
                partitions=[
                    EndPartition(
                        partition_index=METADATA_PARTITION,
                        leader_id=ctx.identity.node_id,
                        leader_epoch=state.epoch,
                        preferred_successors=[k.id for k in successors],
                        preferred_candidates=[
                            ReplicaInfo(candidate_id=k.id, candidate_directory_id=k.directory_id_or_zero)
                            for k in successors
                        ],
                    )
                ],
            )
        ],
        leader_endpoints=[
            LeaderEndpoint(name=e.name, host=e.host, port=e.port) for e in ctx.identity.endpoints
        ],
    )


def election_backoff_ms(ctx: RaftContext, position: int | None, candidates: int) -> int:
    """``strictExponentialElectionBackoffMs`` for a position among ``candidates``."""
    max_ms = ctx.config.election_backoff_max_ms
    if position is None:
        return max_ms
    if position == 0:
        return 0
    return min(max_ms, (max_ms >> (candidates - 1)) << (position - 1))


def _response(ctx: RaftContext, listener: str, version: int, error: Errors) -> EndQuorumEpochResponse:
    endpoints: list[NodeEndpoint] = []
    found = leader_endpoint(ctx, listener)
    if version >= 1 and found is not None:
        endpoints.append(NodeEndpoint(node_id=found[0], host=found[1], port=found[2]))
    return EndQuorumEpochResponse(
        error_code=Errors.NONE,
        topics=[
            EndResponseTopic(
                topic_name=METADATA_TOPIC_NAME,
                partitions=[
                    EndResponsePartition(
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


def handle_request(ctx: RaftContext, now_ms: int, event: RequestReceived) -> EndQuorumEpochResponse:
    """Request steps 1-6 above (``handleEndQuorumEpochRequest``); returns the response, with a
    top-level error for steps 1-2."""
    request: EndQuorumEpochRequest = event.request
    if not ctx.identity.validate_cluster_id(request.cluster_id):
        return EndQuorumEpochResponse(error_code=Errors.INCONSISTENT_CLUSTER_ID)
    partition = single_partition(request.topics, "topic_name", "partition_index")
    if partition is None:
        return EndQuorumEpochResponse(error_code=Errors.INVALID_REQUEST)
    version = event.api_version
    error = validate_voter_only(ctx, partition.leader_epoch, partition.leader_id, None, None)
    if error != Errors.NONE:
        return _response(ctx, event.listener, version, error)
    ctx.quorum.maybe_transition(partition.leader_id, partition.leader_epoch, now_ms)
    state = ctx.quorum.state
    if (
        isinstance(state, Follower)
        and state.epoch == partition.leader_epoch
        and state.leader_id == partition.leader_id
    ):
        if version >= 1:
            ids = [c.candidate_id for c in partition.preferred_candidates]
        else:
            ids = list(partition.preferred_successors)
        position = ids.index(ctx.identity.node_id) if ctx.identity.node_id in ids else None
        backoff = election_backoff_ms(ctx, position, len(ids))
        state.fetch_deadline_ms = min(state.fetch_deadline_ms, now_ms + backoff)
        # the leader is gone: pre-votes may be granted again (KIP-996)
        state.has_fetched = False
    return _response(ctx, event.listener, version, Errors.NONE)


def handle_response(ctx: RaftContext, now_ms: int, event: ResponseReceived) -> None:
    """Response handling above (``handleEndQuorumEpochResponse``): NONE marks that voter as
    having acknowledged, a later epoch moves this replica on, an error backs off that voter.
    Returns nothing."""
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
    state = ctx.quorum.state
    if partition.error_code == Errors.NONE and isinstance(state, Resigned):
        state.unacknowledged.discard(source_id)
    elif partition.error_code != Errors.NONE:
        ctx.requests.backoff(source_id, now_ms)
