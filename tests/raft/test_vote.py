"""Vote handling (KafkaRaftClientTest-style: build a state, feed a request, assert the response
and the transition)."""

from __future__ import annotations

from kwire.errors import Errors
from server.raft.log import MemoryRaftLog
from server.raft.roles import Candidate, Follower, Leader, Prospective, Unattached
from server.raft.types import ElectionState, ReplicaKey
from tests.raft.helpers import (
    append_batches,
    begin_epoch_request,
    elect_local_leader,
    make_context,
    vote_request,
    vote_response,
)


def _partition(response):  # type: ignore[no-untyped-def]
    return response.topics[0].partitions[0]


def test_grant_vote_persists_before_the_response() -> None:
    context = make_context(election=ElectionState(2))
    out, response = context.request(vote_request(2, 3, 0, 0), 1)
    part = _partition(response)
    assert response.error_code == Errors.NONE and part.error_code == Errors.NONE
    assert part.vote_granted and part.leader_epoch == 3 and part.leader_id == -1
    # the vote and the reply leave in the same Outbox: the driver persists first
    assert out.election_state == ElectionState(3, None, ReplicaKey(2))
    state = context.core.state
    assert isinstance(state, Unattached) and state.voted_key == ReplicaKey(2)


def test_reject_candidate_with_older_log_epoch_first() -> None:
    log = MemoryRaftLog()
    append_batches(log, [1, 1, 2])  # LEO 3, last epoch 2
    context = make_context(election=ElectionState(2), log=log)
    # a longer log with an older last epoch is not up to date
    _, response = context.request(vote_request(2, 3, 1, 10), 1)
    assert not _partition(response).vote_granted
    # the epoch moved to 3 anyway (higher epoch -> Unattached)
    assert isinstance(context.core.state, Unattached) and context.core.epoch == 3
    _, response = context.request(vote_request(3, 3, 2, 3), 1)
    assert _partition(response).vote_granted


def test_only_one_vote_per_epoch() -> None:
    context = make_context(election=ElectionState(4, None, ReplicaKey(2)))
    _, response = context.request(vote_request(3, 4, 0, 0), 1)
    assert not _partition(response).vote_granted
    _, response = context.request(vote_request(2, 4, 0, 0), 1)
    assert _partition(response).vote_granted


def test_stale_epoch_is_fenced() -> None:
    context = make_context(election=ElectionState(5))
    out, response = context.request(vote_request(2, 4, 0, 0), 1)
    part = _partition(response)
    assert part.error_code == Errors.FENCED_LEADER_EPOCH and not part.vote_granted
    assert part.leader_epoch == 5
    assert out.election_state is None


def test_invalid_last_offset_epoch() -> None:
    context = make_context()
    _, response = context.request(vote_request(2, 3, 3, 0), 1)
    assert _partition(response).error_code == Errors.INVALID_REQUEST
    _, response = context.request(vote_request(2, 3, 0, -1), 1)
    assert _partition(response).error_code == Errors.INVALID_REQUEST


def test_wrong_voter_key_cluster_and_topic() -> None:
    context = make_context()
    _, response = context.request(vote_request(2, 3, 0, 0, voter_id=3), 1)
    assert _partition(response).error_code == Errors.INVALID_VOTER_KEY
    _, response = context.request(vote_request(2, 3, 0, 0, cluster_id="other"), 1)
    assert response.error_code == Errors.INCONSISTENT_CLUSTER_ID
    bad = vote_request(2, 3, 0, 0)
    bad.topics[0].topic_name = "other"
    _, response = context.request(bad, 1)
    assert response.error_code == Errors.INVALID_REQUEST
    # v0 has no VoterId: the check is skipped
    _, response = context.request(vote_request(2, 3, 0, 0, voter_id=3), 0)
    assert _partition(response).error_code == Errors.NONE


def test_leader_rejects_votes_in_its_epoch() -> None:
    context = make_context()
    leader = elect_local_leader(context)
    _, response = context.request(vote_request(2, leader.epoch, 0, 0), 1)
    assert not _partition(response).vote_granted
    assert isinstance(context.core.state, Leader)


def test_candidate_wins_with_a_majority_and_writes_leader_change() -> None:
    context = make_context()
    out = context.tick(3000)
    state = context.core.state
    assert isinstance(state, Candidate) and state.epoch == 1
    assert out.election_state == ElectionState(1, None, ReplicaKey(1))
    assert sorted(s.destination_id for s in out.sends) == [2, 3]
    sent = out.sends[0].request.topics[0].partitions[0]
    assert (sent.replica_epoch, sent.replica_id, sent.last_offset, sent.pre_vote) == (1, 1, 0, False)
    out = context.respond(out, 2, vote_response(1, True))
    assert isinstance(context.core.state, Leader)
    assert out.election_state == ElectionState(1, 1, ReplicaKey(1))
    assert context.log.log_end_offset == 1  # the LeaderChange control batch
    assert context.log.batches[0].is_control and context.log.batches[0].epoch == 1


def test_candidate_steps_down_on_higher_epoch_response() -> None:
    context = make_context()
    out = context.tick(3000)
    context.respond(out, 2, vote_response(7, False, leader_id=3))
    state = context.core.state
    assert isinstance(state, Follower) and state.epoch == 7 and state.leader_id == 3


def test_pre_vote_keeps_epoch_and_vote() -> None:
    # a Prospective pre-votes in its own epoch (KafkaRaftClient.buildVoteRequest)
    context = make_context(pre_vote=True, election=ElectionState(2))
    out, response = context.request(vote_request(2, 2, 2, 0, pre_vote=True), 2)
    assert _partition(response).vote_granted and _partition(response).error_code == Errors.NONE
    assert out.election_state is None
    assert context.core.epoch == 2 and isinstance(context.core.state, Unattached)
    assert context.core.state.voted_key is None


def test_pre_vote_from_a_later_epoch_moves_to_that_epoch_without_voting() -> None:
    # handleVoteRequest moves to Unattached for any later ReplicaEpoch, pre-vote or not
    context = make_context(pre_vote=True, election=ElectionState(2))
    out, response = context.request(vote_request(2, 5, 0, 0, pre_vote=True), 2)
    assert _partition(response).vote_granted and _partition(response).leader_epoch == 5
    assert out.election_state == ElectionState(5)
    assert isinstance(context.core.state, Unattached) and context.core.state.voted_key is None


def test_pre_vote_whose_last_epoch_equals_its_epoch_is_valid_but_a_vote_is_not() -> None:
    # a stock Prospective in epoch 0 with an empty log sends (0, 0, 0); a real vote cannot
    context = make_context(pre_vote=True)
    _, response = context.request(vote_request(2, 0, 0, 0, pre_vote=True), 2)
    assert _partition(response).error_code == Errors.NONE and _partition(response).vote_granted
    _, response = context.request(vote_request(2, 0, 0, 0), 2)
    assert _partition(response).error_code == Errors.INVALID_REQUEST
    _, response = context.request(vote_request(2, 0, 1, 0, pre_vote=True), 2)
    assert _partition(response).error_code == Errors.INVALID_REQUEST


def test_follower_that_hears_from_its_leader_rejects_pre_votes() -> None:
    context = make_context(pre_vote=True)
    context.request(begin_epoch_request(2, 1), 1)
    state = context.core.state
    assert isinstance(state, Follower)
    _, response = context.request(vote_request(3, state.epoch, 0, 0, pre_vote=True), 2)
    assert _partition(response).vote_granted  # it has not fetched yet
    state.has_fetched = True
    _, response = context.request(vote_request(3, state.epoch, 0, 0, pre_vote=True), 2)
    assert context.core.state is state
    assert not _partition(response).vote_granted


def test_prospective_becomes_candidate_after_a_pre_vote_majority() -> None:
    context = make_context(pre_vote=True, election=ElectionState(4))
    out = context.tick(3000)
    assert isinstance(context.core.state, Prospective) and context.core.epoch == 4
    sent = out.sends[0].request.topics[0].partitions[0]
    assert sent.pre_vote and sent.replica_epoch == 4
    out = context.respond(out, 2, vote_response(4, True))
    assert isinstance(context.core.state, Candidate) and context.core.epoch == 5
    assert out.election_state == ElectionState(5, None, ReplicaKey(1))


def test_prospective_runs_a_real_election_when_a_voter_cannot_pre_vote() -> None:
    from server.raft.events import FailureReason, RequestFailed

    context = make_context(pre_vote=True, election=ElectionState(4))
    out = context.tick(3000)
    assert isinstance(context.core.state, Prospective)
    send = next(s for s in out.sends if s.destination_id == 2)
    out = context.step(RequestFailed(send.correlation_id, 2, FailureReason.UNSUPPORTED_VERSION))
    assert isinstance(context.core.state, Candidate) and context.core.epoch == 5
    assert all(not s.request.topics[0].partitions[0].pre_vote for s in out.sends)
