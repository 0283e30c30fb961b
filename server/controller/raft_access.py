"""What the raft RPCs need of the authorizer, and their refusals (``ControllerApis``: each raft
RPC is authorized on the cluster before ``handleRaftRequest``).

Fetch, FetchSnapshot, Vote, BeginQuorumEpoch, EndQuorumEpoch and UpdateRaftVoter come from
controllers and brokers and need CLUSTER_ACTION; DescribeQuorum (an operator's tool) needs
DESCRIBE; AddRaftVoter and RemoveRaftVoter need ALTER. A refusal is the request's
``getErrorResponse`` with CLUSTER_AUTHORIZATION_FAILED at the top: DescribeQuorum and the voter
changes carry Kafka's default message, "Cluster authorization failed.". No I/O.
"""

from __future__ import annotations

from kwire.errors import Errors
from messages.generated.add_raft_voter_request import AddRaftVoterRequest
from messages.generated.add_raft_voter_response import AddRaftVoterResponse
from messages.generated.begin_quorum_epoch_request import BeginQuorumEpochRequest
from messages.generated.begin_quorum_epoch_response import BeginQuorumEpochResponse
from messages.generated.describe_quorum_request import DescribeQuorumRequest
from messages.generated.describe_quorum_response import DescribeQuorumResponse
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
from messages.runtime import Message
from server.controller.authorizer import ALTER, CLUSTER_ACTION, DESCRIBE

__all__ = ["RAFT_OPERATIONS", "raft_refusal"]

_DENIED = Errors.CLUSTER_AUTHORIZATION_FAILED
_MESSAGE = "Cluster authorization failed."

RAFT_OPERATIONS: dict[type[Message], int] = {
    FetchRequest: CLUSTER_ACTION,
    FetchSnapshotRequest: CLUSTER_ACTION,
    VoteRequest: CLUSTER_ACTION,
    BeginQuorumEpochRequest: CLUSTER_ACTION,
    EndQuorumEpochRequest: CLUSTER_ACTION,
    UpdateRaftVoterRequest: CLUSTER_ACTION,
    DescribeQuorumRequest: DESCRIBE,
    AddRaftVoterRequest: ALTER,
    RemoveRaftVoterRequest: ALTER,
}
"""The operation on the cluster each raft RPC needs."""


def raft_refusal(request: Message) -> Message:
    """The answer refusing ``request`` (a raft RPC of :data:`RAFT_OPERATIONS`)."""
    if isinstance(request, FetchRequest):
        return FetchResponse(error_code=_DENIED, session_id=0, responses=[])
    if isinstance(request, FetchSnapshotRequest):
        return FetchSnapshotResponse(error_code=_DENIED)
    if isinstance(request, VoteRequest):
        return VoteResponse(error_code=_DENIED)
    if isinstance(request, BeginQuorumEpochRequest):
        return BeginQuorumEpochResponse(error_code=_DENIED)
    if isinstance(request, EndQuorumEpochRequest):
        return EndQuorumEpochResponse(error_code=_DENIED)
    if isinstance(request, UpdateRaftVoterRequest):
        return UpdateRaftVoterResponse(error_code=_DENIED)
    if isinstance(request, DescribeQuorumRequest):
        return DescribeQuorumResponse(error_code=_DENIED, error_message=_MESSAGE)
    if isinstance(request, AddRaftVoterRequest):
        return AddRaftVoterResponse(error_code=_DENIED, error_message=_MESSAGE)
    assert isinstance(request, RemoveRaftVoterRequest), type(request).__name__
    return RemoveRaftVoterResponse(error_code=_DENIED, error_message=_MESSAGE)
