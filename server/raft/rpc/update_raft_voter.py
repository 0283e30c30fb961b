"""UpdateRaftVoter (api key 82): a voter tells the leader its current listeners and supported
kraft.version range (KIP-853), at kraft.version 0 too (Kafka 4.1+).

Version handled: 0. Mirrors ``KafkaRaftClient.handleUpdateVoterRequest`` and
``internals/UpdateVoterHandler`` (Kafka 4.4). Followers send it (``build_request``)
when their own entry in the voter set is stale, and at kraft.version 0 once to each leader
(``voter_change.should_send_update_voter``); ``handle_response`` treats the answer. Times out after ``controller.quorum.request.timeout.ms``.

Steps, in order, each with the error it returns (CurrentLeader is always filled in, with the
leader's endpoint on the default listener when known):

1. ClusterId present and different -> INCONSISTENT_CLUSTER_ID.
2. CurrentLeaderEpoch below the local epoch -> FENCED_LEADER_EPOCH; above ->
   UNKNOWN_LEADER_EPOCH; not the leader -> NOT_LEADER_OR_FOLLOWER.
3. VoterId < 0 or a zero VoterDirectoryId -> INVALID_REQUEST.
4. Another voter change in progress -> REQUEST_TIMED_OUT.
5. The high watermark of this epoch not known yet -> REQUEST_TIMED_OUT.
6. A VotersRecord not yet committed (kraft.version 1) -> REQUEST_TIMED_OUT.
7. KRaftVersionFeature not containing the finalized kraft.version, or min > max ->
   INVALID_REQUEST.
8. No listener named like the leader's default listener -> INVALID_REQUEST.
9. (VoterId, VoterDirectoryId) not a voter -> VOTER_NOT_FOUND; at kraft.version 0 the id
   alone is matched (a static voter set has no directory ids).
10. kraft.version 1: a control batch with the updated VotersRecord is appended and NONE is
    answered at once, without waiting for the record to commit (the voter that asked must keep
    fetching for it to commit; ``UpdateVoterHandler.storeUpdatedVoters``). kraft.version 0 (a
    static quorum, where Kafka 4.1+ followers send the request too): the leader keeps the
    voter's directory id, endpoints and range in memory (``Leader.volatile_voters``), writes
    nothing and answers NONE. (Kafka 3.9 answered INVALID_REQUEST there, which a 4.x follower
    takes as fatal.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kwire.errors import Errors
from messages.generated.update_raft_voter_request import KRaftVersionFeature as UpdateFeature
from messages.generated.update_raft_voter_request import Listener as UpdateListener
from messages.generated.update_raft_voter_request import UpdateRaftVoterRequest
from messages.generated.update_raft_voter_response import CurrentLeader, UpdateRaftVoterResponse
from server.raft import voter_change
from server.raft.common import validate_leader_only
from server.raft.events import FailureReason
from server.raft.roles import Follower
from server.raft.types import Endpoint, ReplicaKey, VoterNode

if TYPE_CHECKING:
    from server.raft.context import RaftContext
    from server.raft.events import RequestReceived, ResponseReceived

VERSIONS = (0, 0)


def _factory(ctx: RaftContext) -> Callable[..., UpdateRaftVoterResponse]:
    """A response builder that fills CurrentLeader from the replica's state at answer time."""

    def build(error: Errors, message: str | None = None) -> UpdateRaftVoterResponse:
        leader = ctx.quorum.state.leader_id
        current = CurrentLeader(leader_id=-1 if leader is None else leader, leader_epoch=ctx.quorum.epoch)
        node = ctx.control.voters.get(leader) if leader is not None else None
        endpoint = node.endpoint(ctx.identity.default_listener) if node is not None else None
        if endpoint is not None:
            current.host = endpoint.host
            current.port = endpoint.port
        return UpdateRaftVoterResponse(error_code=error, current_leader=current)

    return build


def handle_request(ctx: RaftContext, now_ms: int, event: RequestReceived) -> UpdateRaftVoterResponse | None:
    """Steps 1-10 above (``handleUpdateVoterRequest``); returns the response, NONE as soon as the
    VotersRecord is appended."""
    request: UpdateRaftVoterRequest = event.request
    response = _factory(ctx)
    if not ctx.identity.validate_cluster_id(request.cluster_id):
        return response(Errors.INCONSISTENT_CLUSTER_ID)
    error = validate_leader_only(ctx, request.current_leader_epoch)
    if error != Errors.NONE:
        return response(error)
    state = ctx.quorum.leader()
    key = ReplicaKey.of(request.voter_id, request.voter_directory_id)
    if request.voter_id < 0 or key.directory_id is None:
        return response(Errors.INVALID_REQUEST)
    if state.pending_voter_change is not None or state.high_watermark is None:
        return response(Errors.REQUEST_TIMED_OUT)
    static = ctx.control.kraft_version < 1
    if not static and voter_change.uncommitted(ctx):
        return response(Errors.REQUEST_TIMED_OUT)
    feature = request.kraft_version_feature
    low, high = feature.min_supported_version, feature.max_supported_version
    if low > high or not low <= ctx.control.kraft_version <= high:
        return response(Errors.INVALID_REQUEST)
    if not any(listener.name == ctx.identity.default_listener for listener in request.listeners):
        return response(Errors.INVALID_REQUEST)
    endpoints = tuple(Endpoint(e.name, e.host, e.port) for e in request.listeners)
    voter = VoterNode(key, endpoints, (low, high))
    if static:
        # step 6: kept in memory only (UpdateVoterHandler's volatile voters)
        updated = (state.volatile_voters or ctx.control.voters).update_voter(voter, ignoring_directory_id=True)
        if updated is None:
            return response(Errors.VOTER_NOT_FOUND)
        state.volatile_voters = updated
        state.record_voter_fetch(key.id, now_ms)
        return response(Errors.NONE)
    updated = ctx.control.voters.update_voter(voter)
    if updated is None:
        return response(Errors.VOTER_NOT_FOUND)
    voter_change.append_voters_record(ctx, updated, now_ms)
    # "Reply immediately and don't wait for the change to commit" (UpdateVoterHandler): the
    # voter that asked must go on fetching for the record to commit at all
    return response(Errors.NONE)


def build_request(ctx: RaftContext) -> UpdateRaftVoterRequest:
    """A follower voter's current listeners and supported kraft.version range
    (``KafkaRaftClient.buildUpdateVoterRequest``)."""
    identity = ctx.identity
    return UpdateRaftVoterRequest(
        cluster_id=identity.cluster_id,
        current_leader_epoch=ctx.quorum.epoch,
        voter_id=identity.node_id,
        voter_directory_id=identity.directory_id,
        listeners=[UpdateListener(name=e.name, host=e.host, port=e.port) for e in identity.endpoints],
        kraft_version_feature=UpdateFeature(
            min_supported_version=identity.supported_kraft_versions[0],
            max_supported_version=identity.supported_kraft_versions[1],
        ),
    )


def handle_response(ctx: RaftContext, now_ms: int, event: ResponseReceived) -> None:
    """A later epoch named in CurrentLeader moves this replica on; NONE or UNSUPPORTED_VERSION
    tells a kraft.version 0 follower that this leader is updated (``handleUpdateVoterResponse``;
    at kraft.version 1 the VotersRecord will replicate); another error backs off and waits for
    the next period (``3 x fetch.timeout.ms``)."""
    source_id, message = event.source_id, event.response
    current = message.current_leader
    if current.leader_epoch >= 0:
        leader = current.leader_id if current.leader_id >= 0 else None
        if ctx.quorum.maybe_transition(leader, current.leader_epoch, now_ms):
            return
    state = ctx.quorum.state
    if not isinstance(state, Follower):
        return
    if message.error_code in (Errors.NONE, Errors.UNSUPPORTED_VERSION):
        state.has_updated_leader = True
    else:
        ctx.requests.backoff(source_id, now_ms)


def on_failure(ctx: RaftContext, now_ms: int, correlation_id: int, reason: FailureReason) -> None:
    """A leader whose versions lack UpdateRaftVoter (Kafka before 3.9) counts as one that
    answered UNSUPPORTED_VERSION: a kraft.version 0 follower stops asking it."""
    state = ctx.quorum.state
    if reason == FailureReason.UNSUPPORTED_VERSION and isinstance(state, Follower):
        state.has_updated_leader = True
