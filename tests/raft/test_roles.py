"""The role transition table (one class per role, every legal transition in one table) and its
enforcement by the core."""

from __future__ import annotations

import pytest

from server.raft.quorum_state import IllegalTransitionError
from server.raft.roles import (
    ROLES,
    TRANSITIONS,
    Candidate,
    Follower,
    Leader,
    Prospective,
    Resigned,
    Unattached,
    transition_allowed,
)
from tests.raft.helpers import elect_local_leader, make_context

EXPECTED = {
    "Unattached": {"Unattached", "Prospective", "Candidate", "Follower"},
    "Prospective": {"Unattached", "Prospective", "Candidate", "Follower"},
    "Candidate": {"Unattached", "Prospective", "Candidate", "Leader", "Follower"},
    "Leader": {"Unattached", "Follower", "Resigned"},
    "Follower": {"Unattached", "Prospective", "Candidate", "Follower"},
    "Resigned": {"Unattached", "Prospective", "Candidate", "Follower"},
}


def test_transition_table_is_exactly_the_documented_one() -> None:
    assert {role.__name__ for role in ROLES} == set(EXPECTED)
    table = {old.__name__: {new.__name__ for new in news} for old, news in TRANSITIONS.items()}
    assert table == EXPECTED


@pytest.mark.parametrize("old", ROLES, ids=lambda r: r.__name__)
@pytest.mark.parametrize("new", ROLES, ids=lambda r: r.__name__)
def test_every_pair_is_allowed_only_if_in_the_table(old: type, new: type) -> None:
    new_epoch = 5 if (old, new) in {(Candidate, Leader), (Leader, Resigned)} else 6
    assert transition_allowed(old, new, 5, new_epoch) == (new.__name__ in EXPECTED[old.__name__])


def test_the_epoch_never_decreases() -> None:
    for old in ROLES:
        for new in TRANSITIONS[old]:
            assert not transition_allowed(old, new, 5, 4)


def test_candidate_and_leader_need_a_new_epoch_or_a_won_election() -> None:
    assert not transition_allowed(Unattached, Candidate, 3, 3)
    assert transition_allowed(Unattached, Candidate, 3, 4)
    assert transition_allowed(Candidate, Leader, 4, 4)
    assert not transition_allowed(Candidate, Leader, 4, 5)
    assert not transition_allowed(Follower, Follower, 4, 4)
    assert transition_allowed(Leader, Resigned, 4, 4)
    assert not transition_allowed(Leader, Candidate, 4, 5)
    assert not transition_allowed(Resigned, Leader, 4, 4)
    assert transition_allowed(Prospective, Candidate, 4, 5)
    assert not transition_allowed(Prospective, Candidate, 4, 6)
    assert not transition_allowed(Leader, Resigned, 4, 5)


def test_core_refuses_an_illegal_transition() -> None:
    context = make_context()
    state = elect_local_leader(context)
    with pytest.raises(IllegalTransitionError):
        context.core.quorum.transition(
            Candidate(state.epoch + 1, context.core.quorum.local_key, context.core.voters, 0, 1)
        )
    assert isinstance(context.core.state, Leader)


def test_resign_then_new_election() -> None:
    from server.raft.events import Resign

    context = make_context()
    state = elect_local_leader(context)
    out = context.step(Resign())
    assert isinstance(context.core.state, Resigned)
    assert context.core.state.epoch == state.epoch
    assert out.election_state is None  # Resigned keeps the persisted leader and vote
    assert {s.destination_id for s in out.sends} == {2, 3}
