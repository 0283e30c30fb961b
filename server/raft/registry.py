"""Every RPC the KRaft core speaks, in one table: :data:`HANDLERS`.

One :class:`RpcHandler` per API key drives the core's dispatch of requests, responses and
failures, the API versions the node advertises in ApiVersions, and the versions the
simulation speaks. Adding an RPC to the core is its spec in ``messages/specs``, its handler
module in ``server/raft`` and one line here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kwire.api_keys import ApiKey
from messages.generated.add_raft_voter_request import AddRaftVoterRequest
from messages.generated.add_raft_voter_response import AddRaftVoterResponse
from messages.generated.api_versions_request import ApiVersionsRequest
from messages.generated.api_versions_response import ApiVersionsResponse
from messages.generated.begin_quorum_epoch_request import BeginQuorumEpochRequest
from messages.generated.begin_quorum_epoch_response import BeginQuorumEpochResponse
from messages.generated.describe_quorum_request import DescribeQuorumRequest
from messages.generated.end_quorum_epoch_request import EndQuorumEpochRequest
from messages.generated.end_quorum_epoch_response import EndQuorumEpochResponse
from messages.generated.fetch_request import FetchRequest
from messages.generated.fetch_response import FetchResponse
from messages.generated.fetch_snapshot_request import FetchSnapshotRequest
from messages.generated.fetch_snapshot_response import FetchSnapshotResponse
from messages.generated.remove_raft_voter_request import RemoveRaftVoterRequest
from messages.generated.remove_raft_voter_response import RemoveRaftVoterResponse
from messages.generated.update_raft_voter_request import UpdateRaftVoterRequest
from messages.generated.update_raft_voter_response import UpdateRaftVoterResponse
from messages.generated.vote_request import VoteRequest
from messages.generated.vote_response import VoteResponse
from server.raft.context import RaftContext
from server.raft.events import FailureReason, RequestReceived, ResponseReceived
from server.raft.rpc import (
    add_raft_voter,
    begin_quorum_epoch,
    describe_quorum,
    end_quorum_epoch,
    fetch,
    fetch_snapshot,
    remove_raft_voter,
    update_raft_voter,
    vote,
)

RequestHandler = Callable[[RaftContext, int, RequestReceived], Any | None]
"""``(ctx, now_ms, event) -> response``; None when the answer comes in a later step (a parked
Fetch, a voter change waiting to commit), through ``ctx.reply``."""
ResponseHandler = Callable[[RaftContext, int, ResponseReceived], None]
"""``(ctx, now_ms, event)`` for the answer to a request the core sent."""
FailureHandler = Callable[[RaftContext, int, int, FailureReason], None]
"""``(ctx, now_ms, correlation_id, reason)`` for a request that got no answer (after the core
forgot it and backed off its destination)."""


@dataclass(frozen=True, slots=True)
class RpcHandler:
    """One RPC of the core: its API key, the versions its handlers accept (inclusive), and the
    handlers. ``request_type`` is None for an RPC the core only sends (ApiVersions is answered
    by the network layer); such an RPC is not advertised by the core."""

    api_key: ApiKey
    versions: tuple[int, int]
    request_type: type | None
    handle_request: RequestHandler | None
    response_type: type | None = None
    handle_response: ResponseHandler | None = None
    on_failure: FailureHandler | None = None


HANDLERS: tuple[RpcHandler, ...] = (
    RpcHandler(ApiKey.VOTE, vote.VERSIONS, VoteRequest, vote.handle_request, VoteResponse, vote.handle_response, vote.on_failure),
    RpcHandler(ApiKey.BEGIN_QUORUM_EPOCH, begin_quorum_epoch.VERSIONS, BeginQuorumEpochRequest, begin_quorum_epoch.handle_request, BeginQuorumEpochResponse, begin_quorum_epoch.handle_response),
    RpcHandler(ApiKey.END_QUORUM_EPOCH, end_quorum_epoch.VERSIONS, EndQuorumEpochRequest, end_quorum_epoch.handle_request, EndQuorumEpochResponse, end_quorum_epoch.handle_response),
    RpcHandler(ApiKey.FETCH, fetch.VERSIONS, FetchRequest, fetch.handle_request, FetchResponse, fetch.handle_response),
    RpcHandler(ApiKey.DESCRIBE_QUORUM, describe_quorum.VERSIONS, DescribeQuorumRequest, describe_quorum.handle_request),
    RpcHandler(ApiKey.FETCH_SNAPSHOT, fetch_snapshot.VERSIONS, FetchSnapshotRequest, fetch_snapshot.handle_request, FetchSnapshotResponse, fetch_snapshot.handle_response),
    RpcHandler(ApiKey.ADD_RAFT_VOTER, add_raft_voter.VERSIONS, AddRaftVoterRequest, add_raft_voter.handle_request, AddRaftVoterResponse, add_raft_voter.handle_response),
    RpcHandler(ApiKey.REMOVE_RAFT_VOTER, remove_raft_voter.VERSIONS, RemoveRaftVoterRequest, remove_raft_voter.handle_request, RemoveRaftVoterResponse, remove_raft_voter.handle_response),
    RpcHandler(ApiKey.UPDATE_RAFT_VOTER, update_raft_voter.VERSIONS, UpdateRaftVoterRequest, update_raft_voter.handle_request, UpdateRaftVoterResponse, update_raft_voter.handle_response, update_raft_voter.on_failure),
    RpcHandler(ApiKey.API_VERSIONS, (ApiVersionsRequest.LOWEST_VERSION, ApiVersionsRequest.HIGHEST_VERSION), None, None, ApiVersionsResponse, add_raft_voter.handle_api_versions, add_raft_voter.on_api_versions_failure),
)  # fmt: skip



class Registry:
    """Handlers looked up by API key, request class and response class. Raises ValueError
    when two handlers claim one API key, request class or response class."""

    def __init__(self, handlers: tuple[RpcHandler, ...]) -> None:
        self.handlers = handlers
        self.by_api_key = {h.api_key: h for h in handlers}
        self.by_request_type = {h.request_type: h for h in handlers if h.request_type is not None}
        self.by_response_type = {h.response_type: h for h in handlers if h.response_type is not None}
        claimed = len(self.by_api_key), len(self.by_request_type), len(self.by_response_type)
        expected = (
            len(handlers),
            sum(h.request_type is not None for h in handlers),
            sum(h.response_type is not None for h in handlers),
        )
        if claimed != expected:
            raise ValueError("two handlers claim the same API key, request or response class")

    def advertised_versions(self) -> dict[int, tuple[int, int]]:
        """``{api key: (min, max)}`` of every RPC the core answers, for ApiVersions."""
        return {int(h.api_key): h.versions for h in self.handlers if h.request_type is not None}

    def highest_versions(self) -> dict[type, int]:
        """``{request or response class: highest version}`` of every RPC in the table."""
        versions: dict[type, int] = {}
        for h in self.handlers:
            for message_type in (h.request_type, h.response_type):
                if message_type is not None:
                    versions[message_type] = h.versions[1]
        return versions


DEFAULT = Registry(HANDLERS)
"""The core's RPCs."""
