"""BeginQuorumEpoch and EndQuorumEpoch handling."""

from __future__ import annotations

from kwire.errors import Errors
from messages.generated.end_quorum_epoch_request import (
    EndQuorumEpochRequest,
    PartitionData,
    ReplicaInfo,
    TopicData,
)
from messages.generated.end_quorum_epoch_response import EndQuorumEpochResponse
from messages.generated.end_quorum_epoch_response import PartitionData as EndResponsePartition
from messages.generated.end_quorum_epoch_response import TopicData as EndResponseTopic
from server.raft.events import Resign
from server.raft.roles import Follower, Resigned, Unattached
from server.raft.rpc.end_quorum_epoch import election_backoff_ms
from server.raft.types import ElectionState, ReplicaKey
from tests.raft.helpers import (
    CLUSTER_ID,
    begin_epoch_request,
    elect_local_leader,
    make_context,
)


def test_begin_quorum_epoch_makes_a_durable_follower() -> None:
    context = make_context(election=ElectionState(2))
    out, response = context.request(begin_epoch_request(3, 4), 1)
    part = response.topics[0].partitions[0]
    assert part.error_code == Errors.NONE and (part.leader_id, part.leader_epoch) == (3, 4)
    assert out.election_state == ElectionState(4, 3, None)
    state = context.core.state
    assert isinstance(state, Follower) and state.leader_id == 3
    assert [s.destination_id for s in out.sends] == [3]  # it starts fetching at once
    assert response.node_endpoints[0].node_id == 3 and response.node_endpoints[0].port == 9003


def test_begin_quorum_epoch_keeps_the_vote_of_the_same_epoch() -> None:
    context = make_context(election=ElectionState(4, None, ReplicaKey(3)))
    out, _ = context.request(begin_epoch_request(3, 4), 1)
    assert out.election_state == ElectionState(4, 3, ReplicaKey(3))


def test_begin_quorum_epoch_errors() -> None:
    context = make_context(election=ElectionState(5))
    out, response = context.request(begin_epoch_request(3, 4), 1)
    assert response.topics[0].partitions[0].error_code == Errors.FENCED_LEADER_EPOCH
    assert out.election_state is None and isinstance(context.core.state, Unattached)
    _, response = context.request(begin_epoch_request(3, 6, voter_id=2), 1)
    assert response.topics[0].partitions[0].error_code == Errors.INVALID_VOTER_KEY
    _, response = context.request(begin_epoch_request(-1, 6), 1)
    assert response.topics[0].partitions[0].error_code == Errors.INVALID_REQUEST
    bad = begin_epoch_request(3, 6)
    bad.cluster_id = "nope"
    _, response = context.request(bad, 1)
    assert response.error_code == Errors.INCONSISTENT_CLUSTER_ID
    assert context.core.epoch == 5


def _end_epoch(leader: int, epoch: int, candidates: list[int]) -> EndQuorumEpochRequest:
    return EndQuorumEpochRequest(
        cluster_id=CLUSTER_ID,
        topics=[
            TopicData(
                topic_name="__cluster_metadata",
                partitions=[
                    PartitionData(
                        partition_index=0,
                        leader_id=leader,
                        leader_epoch=epoch,
                        preferred_successors=candidates,
                        preferred_candidates=[ReplicaInfo(candidate_id=c) for c in candidates],
                    )
                ],
            )
        ],
    )


def test_end_quorum_epoch_first_preferred_candidate_runs_at_once() -> None:
    context = make_context(election=ElectionState(4, 3, None))
    assert isinstance(context.core.state, Follower)
    out, response = context.request(_end_epoch(3, 4, [1, 2]), 1)
    assert response.topics[0].partitions[0].error_code == Errors.NONE
    # position 0: no backoff, the election starts in this very step
    assert context.core.epoch == 5 and not isinstance(context.core.state, Follower)


def test_end_quorum_epoch_backoff_by_position() -> None:
    context = make_context(election=ElectionState(4, 3, None))
    context.request(_end_epoch(3, 4, [2, 1]), 1)
    state = context.core.state
    assert isinstance(state, Follower)
    assert state.fetch_deadline_ms == context.now + election_backoff_ms(context.core, 1, 2)
    assert election_backoff_ms(context.core, 1, 2) == 500
    assert election_backoff_ms(context.core, 2, 3) == 500
    assert election_backoff_ms(context.core, None, 3) == 1000


def test_resigned_leader_sends_end_quorum_epoch_until_acknowledged() -> None:
    context = make_context()
    leader = elect_local_leader(context)
    out = context.step(Resign())
    state = context.core.state
    assert isinstance(state, Resigned)
    sent = {s.destination_id: s for s in out.sends}
    assert set(sent) == {2, 3}
    part = sent[2].request.topics[0].partitions[0]
    assert (part.leader_id, part.leader_epoch) == (1, leader.epoch)
    assert sorted(c.candidate_id for c in part.preferred_candidates) == [2, 3]
    ack = EndQuorumEpochResponse(
        topics=[
            EndResponseTopic(
                topic_name="__cluster_metadata",
                partitions=[EndResponsePartition(partition_index=0, leader_id=1, leader_epoch=leader.epoch)],
            )
        ]
    )
    context.respond(out, 2, ack)
    assert state.unacknowledged == {3}


def test_end_quorum_epoch_errors() -> None:
    context = make_context(election=ElectionState(4, 3, None))
    _, response = context.request(_end_epoch(3, 3, [1]), 1)
    assert response.topics[0].partitions[0].error_code == Errors.FENCED_LEADER_EPOCH
    _, response = context.request(_end_epoch(-1, 4, [1]), 1)
    assert response.topics[0].partitions[0].error_code == Errors.INVALID_REQUEST
    bad = _end_epoch(3, 4, [1])
    bad.cluster_id = "other"
    _, response = context.request(bad, 1)
    assert response.error_code == Errors.INCONSISTENT_CLUSTER_ID
    bad = _end_epoch(3, 4, [1])
    bad.topics[0].partitions[0].partition_index = 1
    _, response = context.request(bad, 1)
    assert response.error_code == Errors.INVALID_REQUEST
    assert isinstance(context.core.state, Follower) and context.core.epoch == 4


def test_end_quorum_epoch_from_a_later_epoch_is_learned() -> None:
    context = make_context(election=ElectionState(2))
    context.request(_end_epoch(3, 5, [2, 1]), 1)
    state = context.core.state
    assert isinstance(state, Follower) and (state.epoch, state.leader_id) == (5, 3)
