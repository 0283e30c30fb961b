"""AddRaftVoter (api key 80): the leader adds a caught-up observer to the voter set (KIP-853).

Versions handled: 0-1 (v1 adds AckWhenCommitted, KIP-1186). Mirrors
``KafkaRaftClient.handleAddVoterRequest`` and ``internals/AddVoterHandler``.
The request's TimeoutMs is not used: the operation times out after
``controller.quorum.request.timeout.ms`` with REQUEST_TIMED_OUT, as in Kafka.

Steps, in order, each with the error it returns (ErrorMessage defaults to the error's text):

1. ClusterId present and different -> INCONSISTENT_CLUSTER_ID.
2. Not the leader -> NOT_LEADER_OR_FOLLOWER, with an empty ErrorMessage.
3. VoterId < 0 or a zero VoterDirectoryId -> INVALID_REQUEST ("Add voter request didn't include
   a valid voter").
4. No listener named like the leader's default (first) listener -> INVALID_REQUEST.
5. Another voter change in progress -> REQUEST_TIMED_OUT.
6. The high watermark of this epoch not known yet -> REQUEST_TIMED_OUT.
7. kraft.version 0 -> UNSUPPORTED_VERSION ("Cluster doesn't support adding voter because the
   kraft.version feature is 0").
8. A VotersRecord not yet committed -> REQUEST_TIMED_OUT.
9. The id already a voter -> DUPLICATE_VOTER.
10. ApiVersions is sent to the new voter's endpoint; a failure -> REQUEST_TIMED_OUT; a response
    without ``kraft.version`` in SupportedFeatures covering the finalized level ->
    INVALID_REQUEST.
11. The new voter must be an observer of this leader, keyed by (id, directory id), caught up
    (``last_caught_up_ms >= 0``) and fetching within the last hour -> else REQUEST_TIMED_OUT.
12. A control batch with the new VotersRecord is appended; the leader counts the new set from
    then on. NONE is answered when the high watermark passes the record (or at once with
    AckWhenCommitted=false); losing leadership first -> NOT_LEADER_OR_FOLLOWER.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kwire.api_keys import ApiKey
from kwire.errors import Errors
from messages.generated.add_raft_voter_request import AddRaftVoterRequest, Listener
from messages.generated.add_raft_voter_response import AddRaftVoterResponse
from messages.generated.api_versions_request import ApiVersionsRequest
from server.raft import voter_change
from server.raft.roles import Leader, PendingVoterChange, VoterChangeKind
from server.raft.types import Endpoint, ReplicaKey, VoterNode

if TYPE_CHECKING:
    from server.raft.context import RaftContext
    from server.raft.events import FailureReason, RequestReceived, ResponseReceived

VERSIONS = (0, 1)
KRAFT_VERSION_FEATURE = "kraft.version"
CAUGHT_UP_FETCH_WINDOW_MS = 3_600_000


def response(error: Errors, message: str | None = None) -> AddRaftVoterResponse:
    """An AddRaftVoterResponse with ``error`` and ``message`` (default: the error's own message)."""
    return AddRaftVoterResponse(
        error_code=error, error_message=error.message if message is None else message
    )


def handle_request(ctx: RaftContext, now_ms: int, event: RequestReceived) -> AddRaftVoterResponse | None:
    """Steps 1-9 above, then sends ApiVersions to the new voter (step 10;
    ``handleAddVoterRequest``). Returns an error response, or None: the answer comes once the
    voter change completes."""
    request: AddRaftVoterRequest = event.request
    if not ctx.identity.validate_cluster_id(request.cluster_id):
        return response(
            Errors.INCONSISTENT_CLUSTER_ID,
            voter_change.cluster_id_text(request.cluster_id, ctx.identity.cluster_id),
        )
    state = ctx.quorum.state
    if not isinstance(state, Leader):  # Kafka's leader-only check sets the code alone: an empty message
        return response(Errors.NOT_LEADER_OR_FOLLOWER, "")
    if request.voter_id < 0 or ReplicaKey.of(request.voter_id, request.voter_directory_id).directory_id is None:
        return response(Errors.INVALID_REQUEST, "Add voter request didn't include a valid voter")
    default_listener = ctx.identity.default_listener
    listeners = {listener.name: listener for listener in request.listeners}
    if default_listener not in listeners:
        return response(
            Errors.INVALID_REQUEST,
            "Add voter request didn't include the endpoint ("
            + voter_change.endpoints_text([(e.name, e.host, e.port) for e in request.listeners])
            + f") for the default listener ListenerName({default_listener})",
        )
    if state.pending_voter_change is not None:
        return response(Errors.REQUEST_TIMED_OUT, "Request timed out waiting for leader to handle previous voter change request")
    if state.high_watermark is None:
        return response(Errors.REQUEST_TIMED_OUT, "Request timed out waiting for leader to establish HWM and fence previous voter changes")
    if ctx.control.kraft_version < 1:
        return response(
            Errors.UNSUPPORTED_VERSION,
            "Cluster doesn't support adding voter because the kraft.version feature is 0",
        )
    if voter_change.uncommitted(ctx):
        return response(Errors.REQUEST_TIMED_OUT, voter_change.uncommitted_text(ctx))
    new_key = ReplicaKey.of(request.voter_id, request.voter_directory_id)
    if ctx.control.voters.get(new_key.id) is not None:
        return response(
            Errors.DUPLICATE_VOTER,
            f"The voter id for {new_key} is already part of the set of voters {ctx.control.voters.keys_text()}.",
        )
    endpoints = tuple(Endpoint(e.name, e.host, e.port) for e in request.listeners)
    new_voter = VoterNode(new_key, endpoints, (0, 0))
    new_voters = ctx.control.voters.add_voter(new_voter)
    assert new_voters is not None
    pending = PendingVoterChange(
        kind=VoterChangeKind.ADD,
        request_id=event.request_id,
        response_factory=response,
        deadline_ms=now_ms + ctx.config.request_timeout_ms,
        new_voters=new_voters,
        new_voter_key=new_key,
        ack_when_committed=bool(request.ack_when_committed) if event.api_version >= 1 else True,
    )
    state.pending_voter_change = pending
    target = listeners[default_listener]
    pending.api_versions_correlation = ctx.send(
        now_ms,
        new_key.id,
        ApiKey.API_VERSIONS,
        ApiVersionsRequest(client_software_name="kwire", client_software_version="0"),
        endpoint=Endpoint(target.name, target.host, target.port),
    )
    return None


def handle_api_versions(ctx: RaftContext, now_ms: int, event: ResponseReceived) -> None:
    """Steps 10-12, on the new voter's ApiVersions response."""
    _api_versions_answered(ctx, now_ms, event.correlation_id, event.response)


def on_api_versions_failure(ctx: RaftContext, now_ms: int, correlation_id: int, reason: FailureReason) -> None:
    """Step 10: the new voter did not answer ApiVersions -> REQUEST_TIMED_OUT."""
    _api_versions_answered(ctx, now_ms, correlation_id, None)


def _api_versions_answered(ctx: RaftContext, now_ms: int, correlation_id: int, message: Any | None) -> None:
    state = ctx.quorum.state
    if not isinstance(state, Leader):
        return
    pending = state.pending_voter_change
    if pending is None or pending.api_versions_correlation != correlation_id:
        return
    pending.api_versions_correlation = None
    if message is None or message.error_code != Errors.NONE:
        voter_change.finish(ctx, Errors.REQUEST_TIMED_OUT, "Request timed out waiting for the new voter's ApiVersions")
        return
    feature = next((f for f in message.supported_features if f.name == KRAFT_VERSION_FEATURE), None)
    finalized = ctx.control.kraft_version
    if feature is None or not feature.min_version <= finalized <= feature.max_version:
        voter_change.finish(ctx,
            Errors.INVALID_REQUEST,
            f"The new voter doesn't support kraft.version {finalized}",
        )
        return
    assert pending.new_voter_key is not None and pending.new_voters is not None
    observer = state.observer_states.get(pending.new_voter_key)
    if (
        observer is None
        or observer.last_caught_up_ms < 0
        or now_ms - observer.last_fetch_ms > CAUGHT_UP_FETCH_WINDOW_MS
    ):
        voter_change.finish(ctx,
            Errors.REQUEST_TIMED_OUT,
            f"Request timed out waiting for {pending.new_voter_key} to catch up",
        )
        return
    node = pending.new_voters.get(pending.new_voter_key.id)
    assert node is not None
    voters = pending.new_voters.update_voter(
        VoterNode(node.key, node.endpoints, (feature.min_version, feature.max_version))
    )
    assert voters is not None
    voter_change.append_voters_record(ctx, voters, now_ms)


def build_request(ctx: RaftContext) -> AddRaftVoterRequest:
    """An observer's request to join as a voter (auto-join, ``RaftUtil.addVoterRequest``): its
    replica key and listeners, ``request.timeout.ms``, AckWhenCommitted false."""
    identity = ctx.identity
    return AddRaftVoterRequest(
        cluster_id=identity.cluster_id,
        timeout_ms=ctx.config.request_timeout_ms,
        voter_id=identity.node_id,
        voter_directory_id=identity.directory_id,
        listeners=[Listener(name=e.name, host=e.host, port=e.port) for e in identity.endpoints],
        ack_when_committed=False,
    )


def handle_response(ctx: RaftContext, now_ms: int, event: ResponseReceived) -> None:
    """The leader's answer to an auto-join: NONE, REQUEST_TIMED_OUT and DUPLICATE_VOTER wait
    for the next attempt; any other error backs the leader off (``handleAddVoterResponse``)."""
    error = Errors.of(event.response.error_code)
    if error not in (Errors.NONE, Errors.REQUEST_TIMED_OUT, Errors.DUPLICATE_VOTER):
        ctx.requests.backoff(event.source_id, now_ms)
