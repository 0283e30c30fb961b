"""Start-up from persisted quorum-state and the log (``QuorumState.initialize``), after
KafkaRaftClientTest's testInitialize* cases."""

from __future__ import annotations

from server.raft.events import Tick
from server.raft.log import MemoryRaftLog
from server.raft.roles import Candidate, Follower, Leader, Resigned, Unattached
from server.raft.types import ElectionState, ReplicaKey
from tests.raft.helpers import append_batches, make_context, static_voters


def test_fresh_node_is_unattached_in_epoch_zero() -> None:
    context = make_context()
    assert isinstance(context.core.state, Unattached) and context.core.epoch == 0
    assert context.outboxes[0].election_state == ElectionState(0)  # persisted on first step


def test_former_leader_starts_resigned() -> None:
    context = make_context(election=ElectionState(4, 1, ReplicaKey(1)))
    state = context.core.state
    assert isinstance(state, Resigned) and state.epoch == 4
    assert {s.destination_id for s in context.outboxes[0].sends} == {2, 3}  # EndQuorumEpoch


def test_voted_for_self_starts_as_candidate_of_the_same_epoch() -> None:
    context = make_context(election=ElectionState(4, None, ReplicaKey(1)))
    assert isinstance(context.core.state, Candidate) and context.core.epoch == 4
    assert context.outboxes[0].election_state is None


def test_voted_for_another_stays_unattached_with_that_vote() -> None:
    context = make_context(election=ElectionState(4, None, ReplicaKey(2)))
    state = context.core.state
    assert isinstance(state, Unattached) and state.voted_key == ReplicaKey(2)


def test_known_leader_starts_as_follower() -> None:
    context = make_context(election=ElectionState(4, 3, None))
    state = context.core.state
    assert isinstance(state, Follower) and state.leader_id == 3


def test_log_epoch_ahead_of_quorum_state() -> None:
    log = MemoryRaftLog()
    append_batches(log, [2, 6])
    context = make_context(log=log, election=ElectionState(4, 3, None))
    assert isinstance(context.core.state, Unattached) and context.core.epoch == 6
    assert context.outboxes[0].election_state == ElectionState(6)


def test_single_voter_elects_itself_at_once() -> None:
    context = make_context(voters=static_voters(1))
    assert isinstance(context.core.state, Leader) and context.core.epoch == 1
    out = context.outboxes[0]
    assert out.election_state == ElectionState(1, 1, ReplicaKey(1))
    assert out.appends  # the LeaderChange batch
    assert context.core.high_watermark == 1  # its own flushed offset is a majority


def test_observer_never_campaigns() -> None:
    context = make_context(local_id=9)
    context.tick(60_000)
    assert isinstance(context.core.state, Unattached) and context.core.epoch == 0
    context.step(Tick())
    assert not context.core.quorum.is_voter
