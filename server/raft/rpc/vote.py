"""Vote (api key 52): elections and KIP-996 pre-votes.

Versions handled: 0-2 (v1 adds VoterId, ReplicaDirectoryId, VoterDirectoryId and the response's
NodeEndpoints; v2 adds PreVote). Mirrors ``KafkaRaftClient.handleVoteRequest`` /
``handleVoteResponse`` (KIP-595; pre-votes KIP-996).

Request steps, each with the error it returns:

1. ClusterId present and different -> top-level INCONSISTENT_CLUSTER_ID.
2. Not exactly one topic ``__cluster_metadata`` with one partition 0 -> top-level
   INVALID_REQUEST.
3. LastOffset < 0, LastOffsetEpoch < 0, or LastOffsetEpoch >= ReplicaEpoch (> for a pre-vote,
   which a Prospective sends in its own epoch) -> partition INVALID_REQUEST.
4. ReplicaEpoch below the local epoch -> partition FENCED_LEADER_EPOCH; ReplicaId < 0 ->
   INVALID_REQUEST.
5. A later ReplicaEpoch, vote or pre-vote, moves this replica to Unattached in that epoch.
   Then (v1+) VoterId / VoterDirectoryId naming another replica -> INVALID_VOTER_KEY.
6. The vote is granted iff the role allows it (``can_grant_vote``: Unattached/Prospective not
   yet voted or voted for the same key; Candidate/Leader/Follower/Resigned never, except a
   pre-vote where the role permits) and the requester's log is at least as up to date:
   ``(LastOffsetEpoch, LastOffset) >= (last fetched epoch, log end offset)``, epoch first.
7. A granted real vote moves Unattached/Prospective to Unattached-voted; that election state
   goes into the Outbox, which makes it durable before this response leaves. Response: NONE,
   the known leader (or -1), the local epoch, VoteGranted, and (v1+) the leader's endpoint.

Response handling: UNSUPPORTED_VERSION (or a request that failed for that reason) while
Prospective -> Candidate at once, since part of the quorum cannot pre-vote; a later epoch or a
leader named in the response -> ``maybe_transition``; otherwise a grant or a rejection is
recorded for the Prospective / Candidate that asked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kwire.errors import Errors
from messages.generated.vote_request import PartitionData as VotePartition
from messages.generated.vote_request import TopicData as VoteTopic
from messages.generated.vote_request import VoteRequest
from messages.generated.vote_response import NodeEndpoint, VoteResponse
from messages.generated.vote_response import PartitionData as VoteResponsePartition
from messages.generated.vote_response import TopicData as VoteResponseTopic
from server.raft.common import (
    leader_endpoint,
    leader_id_or_minus_one,
    single_partition,
    validate_voter_only,
)
from server.raft.events import FailureReason
from server.raft.roles import Candidate, Prospective, Unattached
from server.raft.types import METADATA_PARTITION, METADATA_TOPIC_NAME, OffsetAndEpoch, ReplicaKey

if TYPE_CHECKING:
    from server.raft.context import RaftContext
    from server.raft.events import RequestReceived, ResponseReceived

VERSIONS = (0, 2)


def build_request(ctx: RaftContext, voter_id: int, *, pre_vote: bool) -> VoteRequest:
    """``RaftUtil.singletonVoteRequest``: the receiver's key, the local key, and the local
    ``(last fetched epoch, log end offset)``, in the local epoch: a Prospective pre-votes in
    the epoch it is in, a Candidate votes in the epoch it moved to."""
    end = ctx.view.end_offset()
    voter = ctx.control.voters.get(voter_id)
    voter_dir = voter.key.directory_id_or_zero if voter is not None else ReplicaKey(voter_id).directory_id_or_zero
    epoch = ctx.quorum.epoch
    return VoteRequest(
        cluster_id=ctx.identity.cluster_id,
        voter_id=voter_id,
        topics=[
            VoteTopic(
                topic_name=METADATA_TOPIC_NAME,
                partitions=[
                    VotePartition(
                        partition_index=METADATA_PARTITION,
                        replica_epoch=epoch,
                        replica_id=ctx.identity.node_id,
                        replica_directory_id=ctx.identity.directory_id,
                        voter_directory_id=voter_dir,
                        last_offset_epoch=end.epoch,
                        last_offset=end.offset,
                        pre_vote=pre_vote,
                    )
                ],
            )
        ],
    )


def _response(
    ctx: RaftContext, listener: str, version: int, error: Errors, granted: bool
) -> VoteResponse:
    endpoints: list[NodeEndpoint] = []
    found = leader_endpoint(ctx, listener)
    if version >= 1 and found is not None:
        endpoints.append(NodeEndpoint(node_id=found[0], host=found[1], port=found[2]))
    return VoteResponse(
        error_code=Errors.NONE,
        topics=[
            VoteResponseTopic(
                topic_name=METADATA_TOPIC_NAME,
                partitions=[
                    VoteResponsePartition(
                        partition_index=METADATA_PARTITION,
                        error_code=error,
                        leader_id=leader_id_or_minus_one(ctx),
                        leader_epoch=ctx.quorum.epoch,
                        vote_granted=granted,
                    )
                ],
            )
        ],
        node_endpoints=endpoints,
    )


def handle_request(ctx: RaftContext, now_ms: int, event: RequestReceived) -> VoteResponse:
    """Request steps 1-7 above (``handleVoteRequest``); returns the response with VoteGranted, a
    top-level error for steps 1-2."""
    request: VoteRequest = event.request
    if not ctx.identity.validate_cluster_id(request.cluster_id):
        return VoteResponse(error_code=Errors.INCONSISTENT_CLUSTER_ID)
    partition = single_partition(request.topics, "topic_name", "partition_index")
    if partition is None:
        return VoteResponse(error_code=Errors.INVALID_REQUEST)
    version = event.api_version
    pre_vote = bool(partition.pre_vote) and version >= 2
    # a pre-vote asks for the Prospective's own epoch, so its last epoch may equal it
    illegal_epoch = (
        partition.last_offset_epoch > partition.replica_epoch
        if pre_vote
        else partition.last_offset_epoch >= partition.replica_epoch
    )
    if partition.last_offset < 0 or partition.last_offset_epoch < 0 or illegal_epoch:
        return _response(ctx, event.listener, version, Errors.INVALID_REQUEST, False)
    error = validate_voter_only(ctx, partition.replica_epoch, partition.replica_id, None, None)
    if error != Errors.NONE:
        return _response(ctx, event.listener, version, error, False)
    if partition.replica_epoch > ctx.quorum.epoch:
        # pre-votes too: the Prospective is in that epoch already
        ctx.quorum.transition_to_unattached(partition.replica_epoch, now_ms)
    if version >= 1:
        error = validate_voter_only(
            ctx, partition.replica_epoch, partition.replica_id, request.voter_id, partition.voter_directory_id
        )
        if error != Errors.NONE:
            return _response(ctx, event.listener, version, error, False)
    candidate = ReplicaKey.of(partition.replica_id, partition.replica_directory_id)
    remote = OffsetAndEpoch(partition.last_offset, partition.last_offset_epoch)
    up_to_date = remote.at_least(ctx.view.end_offset())
    granted = ctx.quorum.state.can_grant_vote(candidate, up_to_date, pre_vote)
    if granted and not pre_vote:
        state = ctx.quorum.state
        if isinstance(state, (Unattached, Prospective)) and state.voted_key is None:
            ctx.quorum.transition_to_unattached(state.epoch, now_ms, voted_key=candidate)
    return _response(ctx, event.listener, version, Errors.NONE, granted)


def _pre_vote_unsupported(ctx: RaftContext, now_ms: int) -> None:
    """A voter cannot take a v2 (pre-)vote: the quorum does not fully support KIP-996, so a
    Prospective becomes a Candidate at once (Kafka 4.0 ``handleVoteResponse``)."""
    if isinstance(ctx.quorum.state, Prospective):
        ctx.quorum.become_candidate(now_ms)


def on_failure(ctx: RaftContext, now_ms: int, correlation_id: int, reason: FailureReason) -> None:
    """A Vote the peer's versions cannot carry (a pre-vote to a Kafka 3.9 voter) counts as an
    UNSUPPORTED_VERSION answer; other failures only back off (done by the core)."""
    if reason == FailureReason.UNSUPPORTED_VERSION:
        _pre_vote_unsupported(ctx, now_ms)


def handle_response(ctx: RaftContext, now_ms: int, event: ResponseReceived) -> None:
    """Response handling above (``handleVoteResponse``): records a grant or a rejection for the
    Prospective or Candidate of that epoch. Returns nothing."""
    source_id, response = event.source_id, event.response
    if response.error_code == Errors.UNSUPPORTED_VERSION:
        _pre_vote_unsupported(ctx, now_ms)
        return
    if response.error_code != Errors.NONE:
        ctx.requests.backoff(source_id, now_ms)
        return
    partition = single_partition(response.topics, "topic_name", "partition_index")
    if partition is None:
        ctx.requests.backoff(source_id, now_ms)
        return
    leader = partition.leader_id if partition.leader_id >= 0 else None
    if ctx.quorum.maybe_transition(leader, partition.leader_epoch, now_ms):
        return
    if partition.error_code != Errors.NONE:
        ctx.requests.backoff(source_id, now_ms)
        return
    state = ctx.quorum.state
    if not isinstance(state, (Candidate, Prospective)) or partition.leader_epoch != state.epoch:
        return
    if source_id not in state.votes.voters.ids:
        return
    if partition.vote_granted:
        state.votes.granted.add(source_id)
        state.votes.rejected.discard(source_id)
    else:
        state.votes.rejected.add(source_id)
