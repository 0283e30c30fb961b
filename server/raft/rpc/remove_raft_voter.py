"""RemoveRaftVoter (api key 81): the leader removes a voter from the voter set (KIP-853).

Version handled: 0. Mirrors ``KafkaRaftClient.handleRemoveVoterRequest`` and
``internals/RemoveVoterHandler``. Times out after
``controller.quorum.request.timeout.ms`` with REQUEST_TIMED_OUT.

Steps, in order, each with the error it returns (ErrorMessage defaults to the error's text):

1. ClusterId present and different -> INCONSISTENT_CLUSTER_ID.
2. Not the leader -> NOT_LEADER_OR_FOLLOWER, with an empty ErrorMessage.
3. Another voter change in progress -> REQUEST_TIMED_OUT.
4. The high watermark of this epoch not known yet -> REQUEST_TIMED_OUT.
5. kraft.version 0 -> UNSUPPORTED_VERSION.
6. A VotersRecord not yet committed -> REQUEST_TIMED_OUT.
7. (VoterId, VoterDirectoryId) not a voter, or the last voter -> VOTER_NOT_FOUND.
8. A control batch with the new VotersRecord is appended and counted at once; NONE is answered
   when the high watermark passes it. A leader that removed itself resigns then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kwire.errors import Errors
from messages.generated.remove_raft_voter_request import RemoveRaftVoterRequest
from messages.generated.remove_raft_voter_response import RemoveRaftVoterResponse
from server.raft import voter_change
from server.raft.roles import Leader, PendingVoterChange, VoterChangeKind
from server.raft.types import ReplicaKey

if TYPE_CHECKING:
    from server.raft.context import RaftContext
    from server.raft.events import RequestReceived, ResponseReceived

VERSIONS = (0, 0)


def response(error: Errors, message: str | None = None) -> RemoveRaftVoterResponse:
    """A RemoveRaftVoterResponse with ``error`` and ``message`` (default: the error's own
    message)."""
    return RemoveRaftVoterResponse(
        error_code=error, error_message=error.message if message is None else message
    )


def handle_request(ctx: RaftContext, now_ms: int, event: RequestReceived) -> RemoveRaftVoterResponse | None:
    """Steps 1-8 above (``handleRemoveVoterRequest``). Returns an error response, or None once
    the VotersRecord is appended: NONE is answered when it commits."""
    request: RemoveRaftVoterRequest = event.request
    if not ctx.identity.validate_cluster_id(request.cluster_id):
        return response(
            Errors.INCONSISTENT_CLUSTER_ID,
            voter_change.cluster_id_text(request.cluster_id, ctx.identity.cluster_id),
        )
    state = ctx.quorum.state
    if not isinstance(state, Leader):  # Kafka's leader-only check sets the code alone: an empty message
        return response(Errors.NOT_LEADER_OR_FOLLOWER, "")
    if state.pending_voter_change is not None:
        return response(Errors.REQUEST_TIMED_OUT, "Request timed out waiting for leader to handle previous voter change request")
    if state.high_watermark is None:
        return response(Errors.REQUEST_TIMED_OUT, "Request timed out waiting for leader to establish HWM and fence previous voter changes")
    if ctx.control.kraft_version < 1:
        return response(
            Errors.UNSUPPORTED_VERSION,
            "Cluster doesn't support removing voter because the kraft.version feature is 0",
        )
    if voter_change.uncommitted(ctx):
        return response(Errors.REQUEST_TIMED_OUT, voter_change.uncommitted_text(ctx))
    key = ReplicaKey.of(request.voter_id, request.voter_directory_id)
    new_voters = ctx.control.voters.remove_voter(key)
    if new_voters is None:
        return response(
            Errors.VOTER_NOT_FOUND,
            f"Cannot remove voter {key} from the set of voters {ctx.control.voters.keys_text()}",
        )
    state.pending_voter_change = PendingVoterChange(
        kind=VoterChangeKind.REMOVE,
        request_id=event.request_id,
        response_factory=response,
        deadline_ms=now_ms + ctx.config.request_timeout_ms,
        new_voters=new_voters,
    )
    offset = voter_change.append_voters_record(ctx, new_voters, now_ms)
    if key.id == ctx.identity.node_id:
        state.resign_when_committed = offset
    return None


def build_request(ctx: RaftContext, key: ReplicaKey) -> RemoveRaftVoterRequest:
    """An auto-joining observer's request to remove the voter ``key`` that holds its node id
    with another directory (``RaftUtil.removeVoterRequest``)."""
    return RemoveRaftVoterRequest(
        cluster_id=ctx.identity.cluster_id, voter_id=key.id, voter_directory_id=key.directory_id_or_zero
    )


def handle_response(ctx: RaftContext, now_ms: int, event: ResponseReceived) -> None:
    """NONE, REQUEST_TIMED_OUT and VOTER_NOT_FOUND wait for the next attempt; any other error
    backs the leader off (``handleRemoveVoterResponse``)."""
    error = Errors.of(event.response.error_code)
    if error not in (Errors.NONE, Errors.REQUEST_TIMED_OUT, Errors.VOTER_NOT_FOUND):
        ctx.requests.backoff(event.source_id, now_ms)
