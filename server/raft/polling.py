"""Acting on the current role's timers, once per step after its events (Kafka's
``KafkaRaftClient.pollCurrentState`` with ``pollLeader``, ``pollFollower``, ``pollCandidate``,
``pollProspective``, ``pollUnattached`` and ``pollResigned``).

:func:`poll_role` sends the requests the role has due and makes the transitions its timers call
for; after a transition the core polls the new role in the same step. Per role:

* Leader: drains the accumulator once its linger expired, times out a pending voter change,
  resigns when check-quorum expired, and sends BeginQuorumEpoch to every other voter each
  ``fetch.timeout.ms / 2``.
* Follower: without a successful fetch within ``fetch.timeout.ms`` a voter starts an election
  and an observer becomes Unattached; otherwise, after any backoff, one request to the leader.
* Unattached: an election once the election timeout expires; an observer fetches from a random
  bootstrap server, or else a random voter, to find the leader.
* Prospective / Candidate: a won election leads (Candidate) or votes for real (Prospective,
  KIP-996); a lost or timed-out one backs off and starts again; Vote to each voter not yet
  heard from.
* Resigned: an election at the election timeout (an observer once it removed itself); until
  then EndQuorumEpoch to every voter that has not acknowledged it.

The request to a leader is, in order of precedence: an observer's auto-join (RemoveRaftVoter for
an entry of its id with another directory, else AddRaftVoter), UpdateRaftVoter, FetchSnapshot
during a download, else Fetch. None goes out while this step's log changes are staged or the
log has unflushed data, since the fetch offset counts toward the high watermark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from kwire.api_keys import ApiKey
from kwire.errors import Errors
from server.raft import (
    leadership,
    voter_change,
)
from server.raft.context import RaftContext
from server.raft.roles import (
    Candidate,
    Follower,
    Leader,
    Prospective,
    Resigned,
    Unattached,
)
from server.raft.rpc import (
    add_raft_voter,
    begin_quorum_epoch,
    end_quorum_epoch,
    fetch,
    fetch_snapshot,
    remove_raft_voter,
    update_raft_voter,
    vote,
)

if TYPE_CHECKING:
    import random

__all__ = ["PollingContext", "poll_role"]


class PollingContext(RaftContext, Protocol):
    """A :class:`~server.raft.context.RaftContext` with the core's injected ``rng``, from which
    an observer that knows no leader picks the replica to fetch from."""

    rng: random.Random


def poll_role(ctx: PollingContext, now_ms: int) -> bool:
    """Act on the current role's timers at ``now_ms``. True when it made a transition: the
    caller then polls again, in the new role."""
    state = ctx.quorum.state
    if isinstance(state, Leader):
        return _poll_leader(ctx, now_ms, state)
    if isinstance(state, Follower):
        return _poll_follower(ctx, now_ms, state)
    if isinstance(state, (Candidate, Prospective)):
        return _poll_election(ctx, now_ms, state)
    if isinstance(state, Unattached):
        return _poll_unattached(ctx, now_ms, state)
    if isinstance(state, Resigned):
        return _poll_resigned(ctx, now_ms, state)
    return False


def _poll_leader(ctx: PollingContext, now_ms: int, state: Leader) -> bool:
    if state.accumulator.needs_drain(now_ms):
        ctx.view.stage_lingering(state, now_ms)
    pending = state.pending_voter_change
    if pending is not None and now_ms >= pending.deadline_ms:
        voter_change.finish(ctx, Errors.REQUEST_TIMED_OUT)
    if state.check_quorum_expired(now_ms):
        ctx.quorum.resign(now_ms)
        return True
    for voter_id, due in sorted(state.next_begin_epoch_ms.items()):
        if due <= now_ms and ctx.requests.can_send_to(voter_id, now_ms):
            ctx.send(now_ms, voter_id, ApiKey.BEGIN_QUORUM_EPOCH, begin_quorum_epoch.build_request(ctx, voter_id))
            state.next_begin_epoch_ms[voter_id] = now_ms + ctx.config.fetch_timeout_ms // 2
    return False


def _poll_follower(ctx: PollingContext, now_ms: int, state: Follower) -> bool:
    if now_ms >= state.fetch_deadline_ms:
        if ctx.quorum.is_voter:
            ctx.quorum.start_election(now_ms)
        else:
            ctx.quorum.transition_to_unattached(state.epoch, now_ms)
        return True
    if state.backoff_until_ms is not None and now_ms < state.backoff_until_ms:
        return False
    state.backoff_until_ms = None
    _maybe_send_fetch(ctx, now_ms, state.leader_id)
    return False


def _maybe_send_fetch(ctx: PollingContext, now_ms: int, destination_id: int | None) -> None:
    if destination_id is None or not ctx.requests.can_send_to(destination_id, now_ms):
        return
    if ctx.view.has_staged_changes:
        return  # wait until the driver applied this step's log changes
    if ctx.log.flushed_offset < ctx.log.log_end_offset:
        return  # the fetch offset counts toward the HWM: only flushed data may be reported
    state = ctx.quorum.state
    if isinstance(state, Follower):
        if _maybe_auto_join(ctx, now_ms, state, destination_id):
            return
        if state.has_fetched and now_ms >= state.update_voter_due_ms and voter_change.should_send_update_voter(ctx, state):
            # in place of this Fetch, as Kafka's pollFollowerAsVoter does
            state.update_voter_due_ms = now_ms + 3 * ctx.config.fetch_timeout_ms
            ctx.send(now_ms, destination_id, ApiKey.UPDATE_RAFT_VOTER, update_raft_voter.build_request(ctx))
            return
        if state.snapshot_download is not None:
            request = fetch_snapshot.build_request(ctx, state.snapshot_download)
            ctx.send(now_ms, destination_id, ApiKey.FETCH_SNAPSHOT, request)
            return
    ctx.send(now_ms, destination_id, ApiKey.FETCH, fetch.build_request(ctx))


def _maybe_auto_join(ctx: PollingContext, now_ms: int, state: Follower, leader_id: int) -> bool:
    """An observer of a dynamic quorum with ``auto_join`` asks the leader, in place of a
    Fetch and once per fetch timeout, to remove the voter holding its id (another
    directory) or else to add it (``KafkaRaftClient.pollFollowerAsObserver``). True when a
    request went out."""
    if not ctx.config.auto_join or ctx.quorum.is_voter or ctx.control.kraft_version < 1:
        return False
    if state.auto_join_due_ms is None:
        state.auto_join_due_ms = now_ms + ctx.config.fetch_timeout_ms
    if now_ms < state.auto_join_due_ms:
        return False
    state.auto_join_due_ms = now_ms + ctx.config.fetch_timeout_ms
    old = ctx.control.voters.get(ctx.identity.node_id)
    if old is not None:
        ctx.send(now_ms, leader_id, ApiKey.REMOVE_RAFT_VOTER, remove_raft_voter.build_request(ctx, old.key))
    else:
        ctx.send(now_ms, leader_id, ApiKey.ADD_RAFT_VOTER, add_raft_voter.build_request(ctx))
    return True


def _poll_unattached(ctx: PollingContext, now_ms: int, state: Unattached) -> bool:
    is_voter = ctx.quorum.is_voter
    if not is_voter:
        state.election_deadline_ms = None
    elif state.election_deadline_ms is None:
        state.election_deadline_ms = ctx.quorum.election_deadline(now_ms)  # it became a voter
    if state.election_deadline_ms is not None and now_ms >= state.election_deadline_ms:
        ctx.quorum.start_election(now_ms)
        return True
    if not is_voter:
        # an observer looks for the leader by fetching from a bootstrap server, or else
        # from any voter (``KafkaRaftClient.pollUnattachedAsObserver``)
        candidates = sorted(ctx.requests.bootstrap_servers) or sorted(ctx.control.voters.ids)
        if candidates and not ctx.requests.has_in_flight(ApiKey.FETCH):
            _maybe_send_fetch(ctx, now_ms, ctx.rng.choice(candidates))
    return False


def _poll_election(ctx: PollingContext, now_ms: int, state: Candidate | Prospective) -> bool:
    """A Candidate that won leads; a Prospective that won votes for real (KIP-996). A lost
    or timed-out election backs off, then starts again; a Prospective that lost while its
    former leader is known follows that leader again."""
    pre_vote = isinstance(state, Prospective)
    if state.votes.is_won():
        if pre_vote:
            ctx.quorum.become_candidate(now_ms)
        else:
            leadership.become_leader(ctx, now_ms)
        return True
    if state.backoff_until_ms is not None:
        if now_ms >= state.backoff_until_ms:
            ctx.quorum.restart_election(now_ms)
            return True
        return False
    if state.votes.is_lost() or now_ms >= state.election_deadline_ms:
        if pre_vote and state.leader_id is not None:
            # the majority still hears from the old leader: follow it again
            ctx.quorum.transition_to_follower(state.epoch, state.leader_id, now_ms)
            return True
        state.backoff_until_ms = now_ms + ctx.quorum.election_backoff_ms(state.retries)
        if state.backoff_until_ms <= now_ms:
            ctx.quorum.restart_election(now_ms)
            return True
        return False
    for voter_id in state.votes.unrecorded():
        if voter_id != ctx.identity.node_id and ctx.requests.can_send_to(voter_id, now_ms):
            ctx.send(now_ms, voter_id, ApiKey.VOTE, vote.build_request(ctx, voter_id, pre_vote=pre_vote))
    return False


def _poll_resigned(ctx: PollingContext, now_ms: int, state: Resigned) -> bool:
    if now_ms >= state.election_deadline_ms:
        if ctx.quorum.is_voter:
            ctx.quorum.start_election(now_ms)
        else:  # it removed itself from the voters: carry on as an observer
            ctx.quorum.transition_to_unattached(state.epoch, now_ms)
        return True
    for voter_id in sorted(state.unacknowledged):
        if ctx.requests.can_send_to(voter_id, now_ms):
            ctx.send(now_ms, voter_id, ApiKey.END_QUORUM_EPOCH, end_quorum_epoch.build_request(ctx, state))
    return False
